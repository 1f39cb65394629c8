"""What a benchmark is, declared once: :class:`Benchmark`.

Each benchmark is the package ``bedside/<name>/``; its ``__init__.py`` states its facts as a
``BENCHMARK = Benchmark(...)``, and :mod:`bedside.benchmarks` lists the registered ones, one line each.
Everything that must know every benchmark asks the registry instead of keeping its own per-benchmark
table: Inspect's entry point (:mod:`bedside._registry`: every task), every number shown (the score keys its
scorers declare, :mod:`bedside.score_keys`: scale, label, direction, role; for Inspect's blocks,
:mod:`bedside.scorers.metrics`, and reporting: ``bedside report``, ``strata``, ``compare``, the log loader),
the ``bedside`` command (:mod:`bedside.cli`: every benchmark's tools, its own sub-commands among them) and,
through :mod:`bedside.parts`, the scripted model (:mod:`bedside.providers.scripted`: every script module), the
``bedside`` model provider (:mod:`bedside.providers.api`: a benchmark's own engines) and the reply protocols
(:func:`bedside.parts.all_protocols`).

A benchmark's code sits in its own folders, at fixed places, each imported only when a tool first
asks for it (:meth:`Benchmark.code`: beside the registry's import of each descriptor, the one place bedside
imports a benchmark's code by a name it builds):

- ``scorers/<name>/``: its scorers, each declared with the keys it writes and the runs it scores
  (:attr:`Benchmark.scorers`, in the order ``ORDER`` of its ``__init__.py`` gives; their declared keys are
  :attr:`Benchmark.keys`);
- ``tasks/<name>.py`` and ``tasks/<name>_*.py``: its Inspect tasks (:attr:`Benchmark.task_functions`);
- ``bedside/<name>/parts.py`` and ``tools.py``: ``PARTS``, what an eval's model calls need (protocols,
  scripted roles, engines; :mod:`bedside.parts`), and ``TOOLS``, what the ``bedside`` command needs (commands,
  report section, ...; :class:`bedside.cli.Tools`).

So the facts are read without importing any of its code, its score keys without its solvers, tasks or
reports (reading a log's numbers imports its scorers' modules, never a solver or a model library), and its
tasks and parts without its tools (an eval imports neither pandas nor scipy for them).
``tests/test_descriptors.py`` checks the places of every registered benchmark and what each path imports.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bedside.score_keys import ScoreKey

#: scorers whose keys copy other scorers' (the health block): left out of per-stratum tables
DERIVED_SCORERS: frozenset[str] = frozenset({"health"})

#: a run option's value in a run of a task it does not apply to (``Benchmark.tasks_without_run_options``)
NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark's facts as reporting and the tools need them (its code: :attr:`scorers`,
    :attr:`task_functions`, its parts, :mod:`bedside.parts`, and its tools, :class:`bedside.cli.Tools`).

    - ``name``: the short name logs and reports use (its package's name); ``title``: the paper's name;
    - ``tasks``: the Inspect task names whose logs belong to it (a task name that starts with
      ``name`` also does, e.g. a test task ``<name>_smoke``);
    - ``preparation_tasks``: its tasks that prepare data and have no scores to report (e.g. a case
      extraction): their logs are its for the checks of its data and prompts (``bedside rescore``), never
      reported with its runs (:meth:`owns` with ``preparation=True``);
    - ``subject_role``: what the model under test is called (its model events carry no role);
      ``roles``: the other model roles (``--model-role``) its tasks use;
    - ``end_reasons``: the end reasons its samples end with (shared :class:`~bedside.end_reasons.EndReason`
      members and its own, declared in its package; each a ``str``, as the logs carry it);
      ``end_reason_scorer``: the scorer whose answer is the sample's end reason (None: no such scorer);
    - ``strata``: sample- (else score-) metadata keys its results are broken down by, in order;
      ``min_n``: fewest scored cases a stratum value needs to be reported;
    - ``ranked_keys``: the per-case keys a sweep's leaderboard ranks models on (default: the headline keys);
    - ``variant_args``: task arguments that make two runs of one model measure different things
      (shown in a log's label when not neutral);
    - ``run_options``: the parameters of its main task (the task named ``name``) that its paper leaves open
      and that change a number: the task records each in its metadata, and a run that does not record one used
      the task's default (:attr:`run_option_defaults`; :mod:`bedside.reporting.run_options`: ``bedside report`` /
      ``strata`` show each run's values and warn when runs in one table differ);
      ``tasks_without_run_options``: its tasks whose runs none of them applies to (e.g. a probe that
      replays transcripts): their logs show :data:`NOT_APPLICABLE` and never make runs differ;
    - ``optional_roles``: model roles its tasks use only when they are bound (never a fallback to the model
      under test, never counted in ``role_fallbacks``), e.g. the simulated patient's LLM checker.
    """

    name: str
    title: str
    tasks: tuple[str, ...]
    subject_role: str
    preparation_tasks: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    end_reasons: tuple[str, ...] = ()
    end_reason_scorer: str | None = None
    strata: tuple[str, ...] = ()
    min_n: Mapping[str, int] = field(default_factory=dict)
    ranked_keys: tuple[str, ...] = ()
    variant_args: tuple[str, ...] = ()
    run_options: tuple[str, ...] = ()
    tasks_without_run_options: tuple[str, ...] = ()
    optional_roles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field_name in ("preparation_tasks", "tasks_without_run_options"):
            listed = getattr(self, field_name)
            wrong = [t for t in listed if (t in self.tasks) == (field_name == "preparation_tasks")]
            if wrong:
                where = "also in" if field_name == "preparation_tasks" else "not in"
                raise ValueError(f"benchmark {self.name!r}: {field_name}: {', '.join(wrong)} {where} its tasks")

    def owns(self, task: str, preparation: bool = False) -> bool:
        """Whether a log of Inspect task ``task`` (``bedside/<task>`` or ``<task>``) is this benchmark's
        (``preparation``: its :attr:`preparation_tasks` too)."""
        task = task.split("/")[-1]
        return task in self.tasks or task.startswith(self.name) or (preparation and task in self.preparation_tasks)

    def run_options_apply(self, task: str) -> bool:
        """Whether its run options apply to a log of Inspect task ``task`` (``bedside/<task>`` or ``<task>``)."""
        return task.split("/")[-1] not in self.tasks_without_run_options

    @cached_property
    def run_option_defaults(self) -> dict[str, str]:
        """Each of :attr:`run_options` -> its main task's default (the task's signature; imports its tasks)."""
        parameters = inspect.signature(self.task_functions[self.name]).parameters
        return {option: str(parameters[option].default) for option in self.run_options}

    # --- its code, each part imported when first asked for ------------------------------------------

    def code(self, module: str) -> ModuleType:
        """Module ``module`` of its folders (``bedside.{name}...``, ``bedside.scorers.{name}``, ...), imported
        now: the one place bedside imports a benchmark's code by a name it builds (module docstring)."""
        return importlib.import_module(module)

    @cached_property
    def scorers(self) -> tuple[Callable[..., Any], ...]:
        """Its scorers (their ``@scorer`` factories), each declaring the score keys it writes and the runs it
        scores (:func:`bedside.score_keys.declares`): every declared scorer that the modules of its package
        ``scorers/<name>/`` define or import (a shared one, e.g. ``simulator_check``, by its import there), in
        the order of its tables: first as ``ORDER`` of ``scorers/<name>/__init__.py`` names them, then the
        others by module name and place in the module. Its tasks build their scorers from these
        (:func:`bedside.scorers.metrics.task_scorers`)."""
        from bedside.score_keys import is_declared

        package = self.code(f"bedside.scorers.{self.name}")
        modules = [package]
        for found in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            modules.append(self.code(f"{package.__name__}.{found.name}"))
        ordered: dict[int, Callable[..., Any]] = {id(f): f for f in getattr(package, "ORDER", ())}
        for module in modules:
            for value in vars(module).values():
                if is_declared(value):
                    ordered.setdefault(id(value), value)
        return tuple(ordered.values())

    @property
    def scorer_protocols(self) -> tuple[Any, ...]:
        """The reply protocols its scorers declare with them (a judge's; its parts hold the others)."""
        from bedside.score_keys import declaration_of

        return tuple(p for factory in self.scorers for p in declaration_of(factory).protocols)

    @cached_property
    def task_modules(self) -> tuple[str, ...]:
        """The modules of its Inspect tasks, ``tasks/<name>.py`` and ``tasks/<name>_*.py`` (registered by
        Inspect's entry point, :mod:`bedside._registry`)."""
        tasks = self.code("bedside.tasks")
        names = sorted(m.name for m in pkgutil.iter_modules(tasks.__path__))
        return tuple(f"bedside.tasks.{n}" for n in names if n == self.name or n.startswith(f"{self.name}_"))

    @cached_property
    def task_functions(self) -> dict[str, Callable[..., Any]]:
        """Its Inspect tasks (the ``@task`` functions of :attr:`task_modules`, imported now), by task name."""
        from inspect_ai.util import registry_info

        found: dict[str, Callable[..., Any]] = {}
        for module in self.task_modules:
            for value in vars(self.code(module)).values():
                try:
                    info = registry_info(value)
                except (ValueError, AttributeError):
                    continue
                if info.type == "task":
                    found[info.name.rsplit("/", 1)[-1]] = value
        return found

    # --- its score keys, as its scorers declare them ----------------------------------------------

    @cached_property
    def scorer_keys(self) -> dict[str, tuple[ScoreKey, ...]]:
        """Scorer name -> the score keys it declares, for each of :attr:`scorers`."""
        from bedside.score_keys import keys_of

        return {factory.__name__: keys_of(factory) for factory in self.scorers}

    @cached_property
    def keys(self) -> dict[str, ScoreKey]:
        """Score key -> its declaration, over every scorer in order: its headline keys and labels
        (:attr:`headline`), directions (:attr:`lower_is_better`), pooled and bookkeeping keys come from these
        (scorers that write one key agree on its scale, label and direction: ``tests/test_descriptors.py``)."""
        found: dict[str, ScoreKey] = {}
        for declared in self.scorer_keys.values():
            for key in declared:
                found.setdefault(key.name, key)
        return found

    @property
    def headline(self) -> tuple[ScoreKey, ...]:
        """The keys of its headline table (the paper's), in order, with their labels."""
        return tuple(k for k in self.keys.values() if k.role == "headline")

    @property
    def headline_keys(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.headline)

    @property
    def ranked(self) -> tuple[str, ...]:
        return self.ranked_keys or self.headline_keys

    @property
    def lower_is_better(self) -> frozenset[str]:
        """Score keys for which lower is better (``compare``, leaderboards)."""
        return frozenset(k.name for k in self.keys.values() if k.lower_is_better)

    @property
    def pooled_keys(self) -> frozenset[str]:
        """Rates pooled over items, never averaged per case (``strata`` leaves them out)."""
        return frozenset(k.name for k in self.keys.values() if k.pooled)

    @property
    def skip_keys(self) -> frozenset[str]:
        """Bookkeeping keys left out of every table."""
        return frozenset(k.name for k in self.keys.values() if not k.reported)
