"""What Inspect shows at the end of a run: each benchmark's headline numbers, then one health block.

Every scorer declares the keys it writes (:mod:`bedside.score_keys`) and its metrics are built from
that declaration, ``summary_of(KEYS)``: one block per scorer in Inspect's terminal summary and in
``inspect view``, with one row per key it shows (role ``headline`` or ``summary``) and the paper's label
as the row name —

    NA           4.200      the mean (the key's declared label)
    NA lower     3.900      the 95 % interval (no rows when there is no interval: n < 2)
    NA upper     4.500
    n            24         scored samples (one ``n`` row when every key of the block has the same n,
                            else ``NA n`` per key); 0, never NaN, when every sample is unscored

The interval follows bedside's one rule, chosen by each key's declared scale (:mod:`bedside.intervals`).
Bookkeeping (system failures, unscored sub-scores, role fallbacks, repaired or unparsed replies, turns
...) is not a headline number: each scorer still writes it in its per-sample score value, declared with
role ``health``, and the health scorer gathers it from the other scorers of the sample into one block.
It reads their results, so it runs last: a task gets it only through :func:`with_health`, which puts it
after the task's scorers.

The blocks read the declarations through the benchmark registry (:mod:`bedside.benchmarks`; so they
are the same when Inspect recomputes a log's metrics). Per-stratum numbers (ICD chapter, persona axes,
category, dataset, language, specialty) are not Inspect metrics: ``bedside strata LOG`` and ``bedside
report`` compute them from the log with the same declarations and interval rule.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from inspect_ai.log import transcript
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import registry_info

from bedside import benchmarks, sample_usage
from bedside.intervals import mean_interval
from bedside.score_keys import ScoreKey, declaration_of

if TYPE_CHECKING:
    from bedside.benchmark import Benchmark


def key_values(scores: Sequence[SampleScore], key: str) -> list[float]:
    """The scored (non-NaN, numeric) values of ``key`` in dict-valued sample scores."""
    out = []
    for s in scores:
        value = s.score.value
        if isinstance(value, dict):
            v = value.get(key)
            if isinstance(v, int | float) and not isinstance(v, bool) and v == v:
                out.append(float(v))
    return out


def summary_rows(columns: dict[str, tuple[float, tuple[float, float] | None, int]]) -> dict[str, float]:
    """Rows of one block from ``label -> (mean, interval or None, n)`` (module docstring)."""
    out: dict[str, float] = {}
    for name, (mean, interval, _) in columns.items():
        out[name] = mean
        if interval is not None:
            out[f"{name} lower"], out[f"{name} upper"] = interval
    counts = {name: n for name, (_, _, n) in columns.items()}
    if len(set(counts.values())) <= 1:
        out["n"] = next(iter(counts.values()), 0)
    else:
        out.update({f"{name} n": n for name, n in counts.items()})
    return out


@metric(name="summary")
def summary(keys: list[str]) -> Metric:
    """Mean, 95 % interval and n of each of ``keys``, each by its declaration (label, scale; module
    docstring)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        columns = {}
        for key in keys:
            declared = benchmarks.score_key(key, strict=True)
            values = key_values(scores, key)
            mean = float(np.mean(values)) if values else math.nan  # as Inspect's mean(): same digits
            columns[declared.label] = (mean, mean_interval(values, declared.scale), len(values))
        return summary_rows(columns)

    return compute


def summary_of(keys: Sequence[ScoreKey]) -> list[Metric]:
    """A scorer's metrics from its declared keys: one summary block of those it shows (role ``headline``
    or ``summary``), in the order declared."""
    return [summary([k.name for k in keys if k.shown])]


# --- health: the bookkeeping of every scorer, in one block -----------------------------------


def gather_health(scores: dict[str, Score]) -> dict[str, float]:
    """One sample's bookkeeping from its other scores: every key their scorers declare with role
    ``health``, by its name in the block, combined over scorers as declared (``sum`` or ``max``; NaN
    when every value is NaN: not applicable to this sample), in the block's order
    (:func:`bedside.benchmarks.health_keys`: counts, tallies, means, each in the registry's order)."""
    gathered: dict[str, list[float]] = {}
    for name, score in scores.items():
        if name in benchmarks.DERIVED_SCORERS or not isinstance(score.value, dict):
            continue
        for key in benchmarks.scorer_keys(name):
            value = score.value.get(key.name)
            if key.role != "health" or not isinstance(value, int | float) or isinstance(value, bool):
                continue
            found = gathered.setdefault(key.health_name, [])
            if value == value:  # NaN (not applicable to this sample) keeps the key, adds nothing
                found.append(float(value))
    out = {}
    for name, key in benchmarks.health_keys().items():
        if name in gathered:
            found = gathered[name]
            out[name] = (sum(found) if key.combine == "sum" else max(found)) if found else math.nan
    return out


def health_kind(name: str) -> str:
    """How the health block shows bookkeeping key ``name`` (its name in the block), as declared."""
    try:
        return str(benchmarks.health_keys()[name].health)
    except KeyError:
        raise LookupError(f"{name!r} is declared as a health key by no registered benchmark's scorer") from None


@metric(name="health_counts")
def health_counts() -> Metric:
    """``samples`` and, per bookkeeping key present, its count over samples or its mean (as declared)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        present = {k for s in scores if isinstance(s.score.value, dict) for k in s.score.value}
        for name in present:
            health_kind(name)  # LookupError: an undeclared key
        out: dict[str, float] = {"samples": float(len(scores))}
        for name, key in benchmarks.health_keys().items():  # the block's order (counts, tallies, means)
            values = key_values(scores, name) if name in present else []
            if not values:
                continue
            if key.health == "mean":
                out[f"{name} (mean)"] = sum(values) / len(values)
            else:
                out[name] = sum(values)
        return out

    return compute


@scorer(metrics=[health_counts()], name=sample_usage.HOLDER)
def _health() -> Scorer:
    """Bookkeeping of the sample gathered from the scorers that ran before it (:func:`gather_health`):
    system failures, unscored sub-scores (summed over scorers), role fallbacks, unparsed or repaired
    replies, turns ... Not a paper number: read it to judge whether a run's headline numbers can be
    trusted. Tasks get it through :func:`with_health` (it must run last). Its metadata also records the
    sample's model calls and tokens by role, model and mode (:mod:`bedside.sample_usage`: every scorer's
    calls are in the transcript by then), which ``bedside report`` reads from the sample's summary."""

    async def score(state: TaskState, target: Target) -> Score:
        scores = {n: s for n, s in (state.scores or {}).items() if n not in benchmarks.DERIVED_SCORERS}
        value = gather_health(scores)
        problems = [f"{k} {v:g}" for k, v in value.items() if health_kind(k) == "count" and v]
        fallbacks = sorted({r for s in scores.values() for r in (s.metadata or {}).get("role_fallbacks") or []})
        usage = sample_usage.of_transcript(transcript().events, [*(state.scores or {}), sample_usage.HOLDER])
        return Score(
            value=value,
            explanation="; ".join(problems) if problems else "no bookkeeping problem",
            metadata={
                "role_fallbacks": fallbacks,
                "from_scorers": list(scores),
                sample_usage.KEY: usage,
            },
        )

    return score


def scorer_name(scorer: Scorer) -> str:
    """A scorer's name as the log's sample scores hold it (its registry name without the package)."""
    return registry_info(scorer).name.split("/")[-1]


def task_scorers(benchmark: Benchmark, task: str, arguments: Mapping[str, Any]) -> list[Scorer]:
    """The scorers of a run of ``benchmark``'s task ``task`` with ``arguments`` (the task function's, by name):
    each of its scorers (:attr:`~bedside.benchmark.Benchmark.scorers`, in their order) that declares this task
    (default: the main task, named as the benchmark) and whose ``when`` holds for the arguments
    (:func:`bedside.score_keys.declares`), made with the arguments its factory takes by name (``benchmark``:
    the benchmark's name). A scorer's parameters are so named as the task's; one the task does not give keeps
    its default."""
    given = {"benchmark": benchmark.name, **arguments}
    found = []
    for factory in benchmark.scorers:
        declared = declaration_of(factory)
        if task not in (declared.tasks or (benchmark.name,)) or (declared.when and not declared.when(given)):
            continue
        accepted = inspect.signature(factory).parameters
        found.append(factory(**{name: given[name] for name in accepted if name in given}))
    return found


def with_health(scorers: Sequence[Scorer]) -> list[Scorer]:
    """A task's scorers, then the health scorer that gathers their bookkeeping: it reads their results,
    so it runs after every one of them (the only way a task gets it). Every scorer must be one a
    registered benchmark declares (its declared keys are what the block gathers)."""
    for s in scorers:
        name = scorer_name(s)
        if name in benchmarks.DERIVED_SCORERS:
            raise ValueError(f"the {name} scorer is added by with_health, after the task's scorers; do not pass it")
        benchmarks.scorer_keys(name)  # LookupError: an undeclared scorer
    return [*scorers, _health()]


from bedside.scorers.rescore import rescorable  # noqa: E402

rescorable(_health)
