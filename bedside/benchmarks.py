"""The registry of bedside's benchmarks: one :class:`~bedside.benchmark.Benchmark` each.

A benchmark is the package ``bedside/<name>/``, whose ``BENCHMARK`` states its facts (tasks, roles, end
reasons, strata, run options) and whose code the descriptor finds in its folders (its scorers and so the
score keys they declare, its task modules, and its parts: protocols, scripted roles, its own commands,
engines and report section; :mod:`bedside.benchmark`); :data:`NAMES` lists the registered ones, one line
each, and everything that must know every benchmark asks this registry (:func:`all_benchmarks`,
:func:`of_task`, :func:`strata`, :func:`score_key`, :func:`lower_is_better`, ...) instead of keeping its
own per-benchmark table. Adding a benchmark: its folders (``bedside/<name>/``, ``tasks/<name>.py``,
``solvers/<name>/``, ``scorers/<name>/``, ``prompts/<name>/``, ``tests/<name>/``) and one line in
:data:`NAMES` (docs/development.md, "Adding a benchmark"; tests may :func:`register` a descriptor for a
while).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from bedside.benchmark import DERIVED_SCORERS, Benchmark

if TYPE_CHECKING:
    from bedside.score_keys import ScoreKey

__all__ = [
    "Benchmark",
    "DERIVED_SCORERS",
    "NAMES",
    "REGISTRY",
    "all_benchmarks",
    "get",
    "health_keys",
    "of_task",
    "register",
    "score_key",
    "strata",
]

#: the registered benchmarks (packages ``bedside.<name>``), in the order reports show them
NAMES: tuple[str, ...] = (
    "discharge",
    "medsp",
    "cpb",
)
#: their descriptors (``bedside.<name>.BENCHMARK``)
REGISTRY: list[Benchmark] = [importlib.import_module(f"bedside.{name}").BENCHMARK for name in NAMES]


def all_benchmarks() -> tuple[Benchmark, ...]:
    return tuple(REGISTRY)


def names() -> tuple[str, ...]:
    return tuple(b.name for b in REGISTRY)


def get(name: str) -> Benchmark:
    for benchmark in REGISTRY:
        if benchmark.name == name:
            return benchmark
    raise KeyError(f"no benchmark named {name!r} (registered: {', '.join(names())})")


def of_task(task: str, preparation: bool = False) -> Benchmark | None:
    """The benchmark whose logs a log of Inspect task ``task`` is (``None``: not a benchmark's task);
    ``preparation``: a benchmark's data-preparation task counts too (its ``preparation_tasks``: their logs
    are checked against its data and prompts, never reported)."""
    for benchmark in REGISTRY:
        if benchmark.owns(task, preparation):
            return benchmark
    return None


@contextmanager
def register(benchmark: Benchmark) -> Iterator[Benchmark]:
    """Add ``benchmark`` to the registry for the ``with`` block (tests, plug-ins)."""
    if benchmark.name in names():
        raise ValueError(f"a benchmark named {benchmark.name!r} is registered already")
    REGISTRY.append(benchmark)
    try:
        yield benchmark
    finally:
        REGISTRY.remove(benchmark)


def _union(values: list[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for group in values for v in group))


def strata() -> tuple[str, ...]:
    """Every benchmark's strata, in registry order (a log's metadata holds only its own)."""
    return _union([b.strata for b in REGISTRY])


def variant_args() -> tuple[str, ...]:
    return _union([b.variant_args for b in REGISTRY])


def skip_keys() -> frozenset[str]:
    """Bookkeeping score keys, left out of every table."""
    return frozenset().union(*(b.skip_keys for b in REGISTRY))


def pooled_keys() -> frozenset[str]:
    return frozenset().union(*(b.pooled_keys for b in REGISTRY))


def min_n(stratum: str) -> int:
    """Fewest scored cases a value of ``stratum`` needs to be reported (1 unless a benchmark says more)."""
    return max([b.min_n[stratum] for b in REGISTRY if stratum in b.min_n] or [1])


def lower_is_better(benchmark: str | None = None) -> frozenset[str]:
    """Score keys for which lower is better: of ``benchmark`` (a name), else of every benchmark."""
    if benchmark is not None and benchmark in names():
        return get(benchmark).lower_is_better
    return frozenset().union(*(b.lower_is_better for b in REGISTRY))


def score_key(key: str, strict: bool = False) -> ScoreKey:
    """The declaration of score key ``key`` (``scorer/key`` accepted) by a registered benchmark's scorer
    (every scorer that writes a key declares it alike: ``tests/test_descriptors.py``). An undeclared key:
    ``LookupError`` if ``strict``, else a key of its own name on no fixed scale."""
    from bedside.score_keys import ScoreKey

    name = key.rpartition("/")[2]
    for benchmark in REGISTRY:
        if name in benchmark.keys:
            return benchmark.keys[name]
    if strict:
        raise LookupError(
            f"score key {name!r} is declared by no registered benchmark's scorer "
            "(declare it with @declares on a scorer in its benchmark's scorers/<name>/)"
        )
    return ScoreKey(name)


def health_keys() -> dict[str, ScoreKey]:
    """The health block's keys (name in the block -> declaration) of every registered benchmark, in the
    block's order: counts, then tallies, then means, each in the registry's order (benchmarks, their
    scorers in their order, the keys as each scorer declares them). The order is the
    registry's, never that of a task's scorers or of the scores a sample holds."""
    from bedside.score_keys import HEALTH_KINDS

    found: dict[str, ScoreKey] = {}
    for kind in HEALTH_KINDS:
        for benchmark in REGISTRY:
            for declared in benchmark.scorer_keys.values():
                for key in declared:
                    if key.health == kind:
                        found.setdefault(key.health_name, key)
    return found


def scorer_keys(scorer: str) -> tuple[ScoreKey, ...]:
    """The score keys scorer ``scorer`` (its name in the log) declares; ``LookupError`` if no registered
    benchmark lists it."""
    for benchmark in REGISTRY:
        if scorer in benchmark.scorer_keys:
            return benchmark.scorer_keys[scorer]
    raise LookupError(
        f"scorer {scorer!r} is declared in no registered benchmark's scorers/<name>/ (@declares): "
        "its score keys are unknown"
    )


def subject_role(benchmark: str) -> str:
    return get(benchmark).subject_role if benchmark in names() else "model under test"


def task_functions() -> dict[str, Callable[..., Any]]:
    """Every benchmark's Inspect tasks by name (imported now: Inspect's entry point, :mod:`bedside._registry`,
    registers them so)."""
    return {name: function for b in REGISTRY for name, function in b.task_functions.items()}


def scorer_factories() -> tuple[Callable[..., Any], ...]:
    """Every benchmark's scorers (imported now: Inspect's entry point, :mod:`bedside._registry`, registers them
    under the names Inspect writes into logs, by which ``inspect score`` and ``bedside rescore`` rebuild them)."""
    return tuple(factory for b in REGISTRY for factory in b.scorers)
