"""The logs of a sharded run read back as one run: :func:`merge_runs`, used by every reader through
:mod:`bedside.reporting.load`.

The units of one (run, task, model) (:mod:`bedside.scale.shards`) become one run
(:class:`bedside.reporting.run.Run`: a header and a record per sample): their samples in
the order Inspect reads a log's samples back (epoch, then id: what the unsharded run's log gives), the
header of shard 1 with the whole case set's sample ids, the usage of all shards added up, the first unit's
non-success status (with its error) if any, the run id and its units' logs in the metadata
(``bedside_merged_shards``: the merged log is an ordinary log, not a unit); no metrics (the units' are of
their shards: each reader computes its numbers from the samples, ``bedside rescore`` has Inspect compute new
ones). Its location is the run's ``.shards`` folder. So a reader sees the numbers of the unsharded run:
the same samples with the same scores, in the same order.

Refused with :class:`ShardError`, one line naming the shard, before anything is read from the samples:

- a shard missing (no log of shard *k* of *n* of the run among the logs given);
- a shard given twice from two places (two copies of one unit; the attempts of one unit, logs in one unit
  folder, are not duplicates: they are one run, :func:`bedside.reporting.load.read_attempts`);
- shards of different runs under one run id (their number of shards, task arguments or data and prompt
  hashes differ), or a sample in a shard it does not belong to, or in two shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai.log import EvalDataset, EvalStats

from bedside.reporting.run import Run, inspect_order
from bedside.scale.shards import KEY, MERGED_KEY, ShardInfo, assignment, shard_info
from bedside.versions import differences, versions_of


class ShardError(ValueError):
    """The logs of a sharded run cannot be read as one run (one line naming the shard)."""


def merge_runs(runs: Sequence[Run]) -> list[Run]:
    """``runs`` with the units of each sharded run replaced by one merged run (path: the run's ``.shards``
    folder), in the order of each run's first unit; runs of unsharded runs as they are."""
    out: list[Run | list[tuple[str, Run, ShardInfo]]] = []
    sharded: dict[tuple[str, str, str], list[tuple[str, Run, ShardInfo]]] = {}
    for run in runs:
        info = shard_info(run)
        if info is None:
            out.append(run)
            continue
        key = (info.run_id, run.eval.task, run.eval.model)
        if key not in sharded:
            sharded[key] = []
            out.append(sharded[key])
        sharded[key].append((run.path, run, info))
    return [x if isinstance(x, Run) else merge(x) for x in out]


def merge(units: list[tuple[str, Run, ShardInfo]]) -> Run:
    """One run of the units of one (run, task, model) (module docstring)."""
    current = _current_attempts(units)
    _check(current)
    first_path, first, info = current[0]
    samples = sorted((sample for _, log, _ in current for sample in log.samples), key=inspect_order)
    ids = [i for _, log, _ in current for i in (log.eval.dataset.sample_ids or [])]
    ids.sort(key=lambda i: i if isinstance(i, str) else str(i).zfill(20))
    statuses = [log for _, log, _ in current if log.status != "success"]
    merged = first.header.model_copy()
    merged.eval = first.eval.model_copy(
        update={
            "dataset": EvalDataset(
                name=first.eval.dataset.name,
                location=first.eval.dataset.location,
                samples=first.eval.dataset.samples,  # the whole case set's size, as each unit recorded it
                sample_ids=ids,
                shuffled=first.eval.dataset.shuffled,
            ),
            "config": first.eval.config.model_copy(update={"sample_id": ids}),  # the run's selection
            "metadata": {
                **{k: v for k, v in (first.eval.metadata or {}).items() if k != KEY},
                MERGED_KEY: {"run_id": info.run_id, "shards": info.shards, "units": [p for p, _, _ in current]},
            },
        }
    )
    merged.status = statuses[0].status if statuses else "success"  # type: ignore[assignment]
    merged.error = statuses[0].error if statuses else None
    merged.stats = EvalStats(
        started_at=min(log.stats.started_at for _, log, _ in current),
        completed_at=max(log.stats.completed_at for _, log, _ in current),
        model_usage=_added([log.stats.model_usage for _, log, _ in current]),
        role_usage=_added([log.stats.role_usage for _, log, _ in current]),
    )
    run_folder = _parent(_parent(first_path))
    merged.location = run_folder
    merged.results = None  # the units' metrics are of their shards; readers compute theirs from the samples
    merged.reductions = None
    sources = {key: source for _, run, _ in current for key, source in run.sources.items()}
    return Run(run_folder, merged, samples, sources, [p for _, run, _ in current for p in run.superseded])


def _current_attempts(units: list[tuple[str, Run, ShardInfo]]) -> list[tuple[str, Run, ShardInfo]]:
    """One log per shard, in shard order: of several logs of one shard in one folder (the attempts of one
    unit), the one that ended ``success``, else the newest; of logs of one shard in two folders, none (a
    duplicated shard, :class:`ShardError`)."""
    by_shard: dict[int, list[tuple[str, Run, ShardInfo]]] = {}
    for unit in units:
        by_shard.setdefault(unit[2].shard, []).append(unit)
    current = []
    for shard in sorted(by_shard):
        members = by_shard[shard]
        folders = {_parent(path) for path, _, _ in members}
        if len(folders) > 1:
            a, b = sorted({path for path, _, _ in members})[:2]
            raise ShardError(f"{members[0][2]} is given twice: {a} and {b} (pass one copy of each shard)")
        members.sort(key=lambda m: (m[1].status == "success", m[1].eval.created))
        current.append(members[-1])
    return current


def _check(units: list[tuple[str, Run, ShardInfo]]) -> None:
    """Refuse (one line naming the shard) a missing shard, or shards of different runs (module docstring)."""
    path0, log0, info0 = units[0]
    for path, log, info in units[1:]:
        if info.shards != info0.shards:
            raise ShardError(f"{path}: {info} is not of the run of {path0} ({info0}): their numbers of shards differ")
        if log.eval.task_args != log0.eval.task_args:
            raise ShardError(f"{path}: {info} is not of the run of {path0}: their task arguments differ")
        if diff := differences(versions_of(log0), versions_of(log)):
            raise ShardError(
                f"{path}: {info} is not of the run of {path0}: {', '.join(diff)} "
                f"{'differs' if len(diff) == 1 else 'differ'}"
            )
    present = {info.shard for _, _, info in units}
    if missing := [k for k in range(1, info0.shards + 1) if k not in present]:
        where = _parent(_parent(path0))
        raise ShardError(
            f"shard {missing[0]} of {info0.shards} of run {info0.run_id} ({log0.eval.task} × {log0.eval.model}) "
            f"is missing: found shard{'s' if len(present) > 1 else ''} {', '.join(map(str, sorted(present)))} "
            f"in {where}; re-run the run's command to complete it, or pass every shard's log"
        )
    planned = {path: [str(i) for i in _planned_ids(log)] for path, log, _ in units}
    dealt = assignment((i for ids in planned.values() for i in ids), info0.shards)
    seen: dict[tuple[str, int], str] = {}
    for path, log, info in units:
        if wrong := next((i for i in planned[path] if dealt[i] != info.shard), None):
            raise ShardError(f"{path}: {info} holds sample {wrong}, which belongs to shard {dealt[wrong]}")
        mine = set(planned[path])
        for sample in log.samples:
            if str(sample.id) not in mine:
                raise ShardError(f"{path}: {info} holds sample {sample.id}, which is not among its shard's samples")
            key = (str(sample.id), sample.epoch)
            if key in seen:
                raise ShardError(f"{path}: {info} holds sample {sample.id} (epoch {sample.epoch}) also in {seen[key]}")
            seen[key] = path


def _planned_ids(log: Run) -> list[str | int]:
    """The sample ids a unit was given (its log's selection; a log without one: the samples it holds)."""
    return list(log.eval.dataset.sample_ids or [sample.id for sample in log.samples])


def _added(usages: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for usage in usages:
        for name, value in (usage or {}).items():
            total[name] = total[name] + value if name in total else value
    return total


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0]
