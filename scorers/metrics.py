"""Metric helpers shared by bedside's scorers: every headline number comes with its n and a 95 % CI.

``headline()`` = mean, 95 % interval (``ci_lower``/``ci_upper``) and ``n``. The interval is
Student's t for scores on a scale; for rates of 0/1 outcomes (``binary=True``) it is the Wilson
score interval, which stays within [0, 1] and is honest for small n and rates near 0 or 1.
``strata(*keys)`` = the same per value of each sample-metadata key, flattened as
``"<key>=<value>"`` (mean), ``"<key>=<value> lower"``/``upper`` and ``"<key>=<value> n"``. The
value comes from the sample metadata or, failing that, the score metadata; a sample without the key
counts under ``<key>=<missing>`` rather than failing the whole run.
"""

from __future__ import annotations

from collections import defaultdict

from inspect_ai.scorer import Metric, SampleScore, ci, mean, metric
from scipy.stats import binomtest


@metric(name="n")
def n() -> Metric:
    """How many samples a number is computed over (unscored samples are not counted)."""

    def compute(scores: list[SampleScore]) -> int:
        return len(scores)

    return compute


def wilson_bounds(values: list[float]) -> dict[str, float]:
    """95 % Wilson score interval of a proportion of 0/1 values."""
    if not values:
        return {"lower": float("nan"), "upper": float("nan")}
    if any(v not in (0.0, 1.0) for v in values):
        raise ValueError("a Wilson interval needs 0/1 values; use binary=False for other scores")
    interval = binomtest(int(sum(values)), len(values)).proportion_ci(confidence_level=0.95, method="wilson")
    return {"lower": float(interval.low), "upper": float(interval.high)}


@metric(name="ci")
def wilson() -> Metric:
    """95 % Wilson interval for 0/1 scores, named like Inspect's ``ci`` (``ci_lower``/``ci_upper``)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return wilson_bounds([s.score.as_float() for s in scores])

    return compute


def headline(binary: bool = False) -> list[Metric]:
    return [mean(), wilson() if binary else ci(0.95), n()]


def group_value(score: SampleScore, key: str) -> object:
    """The sample's value for ``key``: from the sample metadata, else from the score's metadata
    (for facts known only after the solver ran, such as the encounter's end reason)."""
    if score.sample_metadata and key in score.sample_metadata:
        return score.sample_metadata[key]
    return (score.score.metadata or {}).get(key, "<missing>")


@metric(name="by")
def strata(*keys: str, binary: bool = False) -> Metric:
    """mean, 95 % CI (Wilson when ``binary``) and n for every value of each metadata key."""
    interval = wilson() if binary else ci(0.95)

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        out: dict[str, float] = {}
        for key in keys:
            groups: dict[str, list[SampleScore]] = defaultdict(list)
            for s in scores:
                groups[str(group_value(s, key))].append(s)
            for value in sorted(groups):
                group = groups[value]
                label = f"{key}={value}"
                out[label] = float(sum(s.score.as_float() for s in group) / len(group))
                bounds = interval(group)
                out[f"{label} lower"] = float(bounds["lower"])  # type: ignore[index]
                out[f"{label} upper"] = float(bounds["upper"])  # type: ignore[index]
                out[f"{label} n"] = float(len(group))
        return out

    return compute


@metric(name="total")
def total() -> Metric:
    """Sum over samples (e.g. how many sub-scores were left unscored)."""

    def compute(scores: list[SampleScore]) -> float:
        return float(sum(s.score.as_float() for s in scores))

    return compute
