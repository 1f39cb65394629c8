"""A run's units: its tasks built as ``inspect eval`` builds them, cut into shards, with their concurrency.

:func:`plan` builds every (task, model) of the run through Inspect's own task resolution (the same task
specs, ``-T`` arguments, models and model roles as ``inspect eval`` / ``eval-set``: the task's checks of its
roles and data run here too, once, before any unit starts), takes the sample ids of each whole case set
(after ``--limit`` / ``--sample-id``, as Inspect applies them) and cuts them into shards
(:func:`bedside.scale.shards.split`). A unit is plain data (:class:`Unit`): it crosses to a Ray worker, which
builds its task again from the same arguments and runs only its shard's ids.

Concurrency is the run's, not the unit's: ``max_connections`` is the connection budget **per model for the
whole run** (Inspect applies an eval's ``max_connections`` to every model of the eval, the roles' models
included) and ``max_samples`` the samples at once over the run. With ``k`` units running at once (the
engine never runs more), each unit gets ``budget // k`` of both (:func:`concurrency`): eight workers open at
most the budget's connections to a rate-limited API, never eight times it. Left unset, the budget is the
model's provider default (Inspect's static default for one process; its adaptive concurrency is per process,
so a sharded run fixes it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bedside.compat import eval_resolve_tasks, parse_model_role_cli_args, registry_info
from bedside.scale.shards import ShardInfo, run_id, split, unit_dir
from bedside.versions import KEY as VERSIONS


@dataclass(frozen=True)
class RunSpec:
    """What the user asked for: ``inspect eval``'s task, model and role arguments, the shards, the log
    directory and the run's concurrency (each a total for the run). ``eval_args``: other ``eval_set()``
    arguments, passed to every unit as they are (``epochs``, ``max_retries``, ``timeout``, ...)."""

    tasks: tuple[str, ...]
    models: tuple[str, ...]
    log_dir: str
    task_args: dict[str, Any] = field(default_factory=dict)
    model_args: dict[str, Any] = field(default_factory=dict)
    model_base_url: str | None = None
    model_roles: tuple[str, ...] = ()
    shards: int | None = None
    limit: int | tuple[int, int] | None = None
    sample_id: tuple[str, ...] | None = None
    max_connections: int | None = None
    max_samples: int | None = None
    eval_args: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None


@dataclass(frozen=True)
class Unit:
    """One (task, model, shard): an ordinary ``eval_set()`` of ``task`` on ``sample_ids`` in ``log_dir``."""

    task: str  # a spec Inspect resolves to this one task (``<file>@<name>`` or a registry name)
    task_name: str
    task_args: dict[str, Any]
    model: str
    model_args: dict[str, Any]
    model_base_url: str | None
    model_roles: tuple[str, ...]  # ``role=spec`` as on the command line
    info: ShardInfo
    sample_ids: tuple[str | int, ...]
    log_dir: str
    max_connections: int
    max_samples: int | None
    eval_args: dict[str, Any]
    cwd: str = (
        ""  # the command's working folder: the unit runs there where it exists (relative paths, the log's task file)
    )

    def __str__(self) -> str:
        return f"{self.task_name} × {self.model}, shard {self.info.shard} of {self.info.shards}"


@dataclass(frozen=True)
class Plan:
    run_id: str
    units: tuple[Unit, ...]
    at_once: int  # units running at once
    budget: int  # max_connections per model over the run
    samples: dict[str, int]  # "<task> × <model>" -> samples of the whole case set


class PlanError(ValueError):
    """A run that cannot be cut into units (one line)."""


def concurrency(total: int, slots: int, units: int) -> tuple[int, int]:
    """(units at once, each unit's share) of a run-wide ``total`` (connections or samples) over ``slots``
    engine slots and ``units`` units: never more units at once than the total allows, so that the shares
    add up to at most ``total``."""
    at_once = max(1, min(slots, units, total))
    return at_once, max(1, total // at_once)


def plan(spec: RunSpec, slots: int) -> Plan:
    """The units of ``spec`` for an engine of ``slots`` units at once (module docstring)."""
    shards = spec.shards or slots
    if shards < 1:
        raise PlanError(f"--shards must be at least 1, got {shards}")
    groups = resolve(spec)
    definition = {
        "tasks": [(name, model, versions, list(map(str, ids))) for _, name, model, ids, versions in groups],
        "task_args": spec.task_args,
        "model_args": spec.model_args,
        "model_roles": list(spec.model_roles),
        "shards": shards,
        "epochs": spec.eval_args.get("epochs"),
    }
    run = spec.run_id or run_id(definition)
    n_units = len(groups) * shards
    budget = spec.max_connections or default_budget(spec)
    at_once, connections = concurrency(budget, slots, n_units)
    samples = max(1, spec.max_samples // at_once) if spec.max_samples else None
    units = []
    for task_spec, name, model, ids, _ in groups:
        for index, shard_ids in enumerate(split(ids, shards)):
            info = ShardInfo(run_id=run, shard=index + 1, shards=shards)
            units.append(
                Unit(
                    task=task_spec,
                    task_name=name,
                    task_args=dict(spec.task_args),
                    model=model,
                    model_args=dict(spec.model_args),
                    model_base_url=spec.model_base_url,
                    model_roles=tuple(spec.model_roles),
                    info=info,
                    sample_ids=tuple(shard_ids),
                    log_dir=unit_dir(spec.log_dir, name, model, run, info.shard),
                    max_connections=connections,
                    max_samples=samples,
                    eval_args=dict(spec.eval_args),
                    cwd=os.getcwd(),
                )
            )
    return Plan(
        run_id=run,
        units=tuple(units),
        at_once=at_once,
        budget=budget,
        samples={f"{name} × {model}": len(ids) for _, name, model, ids, _ in groups},
    )


def resolve(spec: RunSpec) -> list[tuple[str, str, str, list[str | int], Any]]:
    """(unit task spec, task name, model, sample ids, data record) of each (task, model) of the run, built
    by Inspect's task resolution as ``eval()`` does it."""
    from inspect_ai.model import GenerateConfig, get_model

    models = [get_model(m, base_url=spec.model_base_url, memoize=False, **spec.model_args) for m in spec.models]
    roles = parse_model_role_cli_args(spec.model_roles) if spec.model_roles else None
    resolved, _, _ = eval_resolve_tasks(
        list(spec.tasks), dict(spec.task_args), models, roles, GenerateConfig(), None, None, None
    )
    out = []
    for item in resolved:
        ids = [sample.id for sample in item.task.dataset]
        if any(i is None for i in ids):
            raise PlanError(f"task {item.task.name}: a sample has no id; a sharded run selects samples by id")
        if len(set(map(str, ids))) != len(ids):
            raise PlanError(f"task {item.task.name}: two samples share an id; a sharded run selects samples by id")
        ids = _selected(ids, spec.limit, spec.sample_id)
        name = registry_info(item.task).name
        # the one task, from anywhere (a Ray worker may start in another folder): ``<absolute file>@<name>``
        task_spec = f"{Path(item.task_file).resolve()}@{name.split('/')[-1]}" if item.task_file else name
        out.append((task_spec, item.task.name, str(item.model), ids, (item.task.metadata or {}).get(VERSIONS)))
    return out


def default_budget(spec: RunSpec) -> int:
    """The connection budget of a run that sets none: the model under test's provider default
    (``max_connections()`` of its API: what one Inspect process uses without adaptive concurrency)."""
    from inspect_ai.model import get_model

    return min(
        get_model(m, base_url=spec.model_base_url, memoize=False, **spec.model_args).api.max_connections()
        for m in spec.models
    )


def _selected(
    ids: Sequence[str | int], limit: int | tuple[int, int] | None, sample_id: Sequence[str] | None
) -> list[str | int]:
    """The ids Inspect would run: ``--sample-id`` (compared as text), then ``--limit`` (n or (start, end))."""
    chosen = list(ids)
    if sample_id is not None:
        wanted = {str(s) for s in sample_id}
        chosen = [i for i in chosen if str(i) in wanted]
    if isinstance(limit, int):
        chosen = chosen[:limit]
    elif limit is not None:
        chosen = chosen[limit[0] : limit[1]]  # Inspect's (start, stop) positional range
    return chosen
