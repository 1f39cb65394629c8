"""What a benchmark is, declared once: :class:`Benchmark`.

Each benchmark is the package ``bedside/<name>/``; its ``__init__.py`` describes it as a
``BENCHMARK = Benchmark(...)``, and :mod:`bedside.benchmarks` lists the registered ones, one line each.
Everything that must know every benchmark asks the registry instead of keeping its own per-benchmark
table: Inspect's entry point (:mod:`bedside._registry`: every task module), the ``bedside`` command
(:mod:`bedside.cli`: every benchmark's own sub-commands), the scripted model (:mod:`bedside.providers.scripted`:
every script module), the ``bedside`` model provider (:mod:`bedside.providers.api`: a benchmark's own
engines), the reply protocols (:func:`bedside.protocols.all_protocols`), and every number shown: the score
keys its scorers declare (:mod:`bedside.score_keys`: scale, label, direction, role) for Inspect's blocks
(:mod:`bedside.scorers.metrics`) and reporting (``bedside report``, ``strata``, ``compare``, the log loader).

Modules and objects are named by dotted path and imported only when asked for (:meth:`Benchmark.store_model`,
:meth:`Benchmark.protocols`, :attr:`Benchmark.scorer_keys`, ...): reading a log's numbers imports its
scorers' modules (their declarations), never a solver or a model library, and moving a module is a
one-line change in its descriptor.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bedside.score_keys import ScoreKey

#: scorers whose keys copy other scorers' (the health block): left out of per-stratum tables
DERIVED_SCORERS: frozenset[str] = frozenset({"health"})

#: a run option's value in a run of a task it does not apply to (``Benchmark.tasks_without_run_options``)
NOT_APPLICABLE = "not applicable"


def resolve(dotted: str) -> Any:
    """The object named ``"package.module:attribute"`` (or a module, without ``:``), imported now."""
    module, _, attribute = dotted.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


@dataclass(frozen=True)
class Benchmark:
    """One benchmark's rules as reporting and the tools need them.

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
    - ``strata``: sample- (else score-) metadata keys its results are broken down by, in order;
      ``min_n``: fewest scored cases a stratum value needs to be reported;
    - ``scorers``: dotted paths (``module:factory``) of its scorers, each declaring the score keys it writes
      (:func:`bedside.score_keys.declares`), in the order its headline table shows their keys: its
      headline keys and labels (:attr:`headline`), directions (:attr:`lower_is_better`), pooled and
      bookkeeping keys come from those declarations (:attr:`keys`);
    - ``ranked_keys``: the per-case keys a sweep's leaderboard ranks models on (default: the headline keys);
    - ``variant_args``: task arguments that make two runs of one model measure different things
      (shown in a log's label when not neutral);
    - ``store``: dotted path of its sample-store model; ``protocol_modules``: the modules of its reply
      protocols (each with a ``PROTOCOLS`` tuple);
    - ``task_modules``: the modules that define its Inspect tasks (registered by Inspect's entry point);
    - ``scripts``: the modules of its scripted roles for ``bedside/scripted`` (each with ``Options`` and
      ``HANDLERS``, :mod:`bedside.providers.scripted`);
    - ``commands``: modules that add its own ``bedside`` sub-commands (each with ``register(subparsers)``);
    - ``engines``: its own ``bedside/<name>`` model engines, name -> dotted path of the engine class;
    - ``report``: dotted path of its section of ``bedside report`` (``fn(inputs)``,
      :class:`bedside.reporting.section.SectionInputs`; None: the generic section of its headline keys
      per stratum);
    - ``end_reason_scorer``: the scorer whose answer is the sample's end reason (None: no such scorer);
    - ``populations``: dotted path of a module naming the sample populations its reports may average
      (``POPULATIONS``, the default first, and ``in_population(sample, name)``; ``bedside report`` /
      ``strata`` ``--population``); None: every sample;
    - ``run_options``: task-metadata keys of the options its paper leaves open that change a number, each
      with the value a run that does not record it used (its task's default; :mod:`bedside.reporting.run_options`:
      ``bedside report`` / ``strata`` show each run's values and warn when runs in one table differ);
      ``tasks_without_run_options``: its tasks whose runs none of them applies to (e.g. a probe that
      replays transcripts): their logs show :data:`NOT_APPLICABLE` and never make runs differ;
    - ``rescore_guard``: dotted path of a check ``fn(log, grader, zero_retention)`` that ``bedside rescore``
      runs on each of its logs before any call, raising an error (one line) when the log's data may not go
      to the new ``grader`` (e.g. patient data under a data-use agreement); None: no check;
    - ``calibrated``: dotted path of a module giving its judge-calibrated estimates from physician
      annotations (``read_annotations(path)`` and ``section(page, benchmark, logs, annotations, csv)``;
      ``bedside report --annotations``); None: it takes no annotations.
    """

    name: str
    title: str
    tasks: tuple[str, ...]
    subject_role: str
    preparation_tasks: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    end_reasons: tuple[str, ...] = ()
    strata: tuple[str, ...] = ()
    min_n: Mapping[str, int] = field(default_factory=dict)
    scorers: tuple[str, ...] = ()
    ranked_keys: tuple[str, ...] = ()
    variant_args: tuple[str, ...] = ()
    store: str | None = None
    protocol_modules: tuple[str, ...] = ()
    task_modules: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    engines: Mapping[str, str] = field(default_factory=dict)
    report: str | None = None
    end_reason_scorer: str | None = None
    populations: str | None = None
    run_options: Mapping[str, str] = field(default_factory=dict)
    tasks_without_run_options: tuple[str, ...] = ()
    calibrated: str | None = None
    rescore_guard: str | None = None

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

    def store_model(self) -> type:
        """The sample-store model (imported now)."""
        if self.store is None:
            raise LookupError(f"benchmark {self.name!r} declares no store model")
        return resolve(self.store)

    def protocols(self) -> tuple[Any, ...]:
        """The reply protocols of its model calls (``PROTOCOLS`` of each of :attr:`protocol_modules`)."""
        return tuple(p for module in self.protocol_modules for p in resolve(module).PROTOCOLS)

    @cached_property
    def scorer_keys(self) -> dict[str, tuple[ScoreKey, ...]]:
        """Scorer name -> the score keys it declares, for each of :attr:`scorers` (imported now)."""
        from bedside.score_keys import keys_of

        found: dict[str, tuple[ScoreKey, ...]] = {}
        for dotted in self.scorers:
            factory = resolve(dotted)
            found[factory.__name__] = keys_of(factory)
        return found

    @cached_property
    def keys(self) -> dict[str, ScoreKey]:
        """Score key -> its declaration, over every scorer in order (scorers that write one key agree on its
        scale, label and direction: ``tests/test_descriptors.py``)."""
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
