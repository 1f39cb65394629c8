"""Metric helpers shared by bedside's scorers: every headline number comes with its n and a 95 % CI.

``headline()`` = ``mean``, one 95 % interval (``ci``: ``lower``/``upper``) and ``n`` — what Inspect
shows for every score key. The interval is Student's t for scores on a scale. For rates of 0/1
outcomes (``binary=True``) it is the Wilson score interval, which stays within [0, 1] and is honest
for small n and rates near 0 or 1; when the values are not all 0/1 (``--epochs k`` averages a
sample's outcomes, e.g. 0.5) it is the t-interval clipped to [0, 1]. ``n`` counts the scored
samples and is 0 (not NaN) when every sample is unscored.

Per-stratum numbers (ICD chapter, persona axes, category, dataset, language, specialty) are not
Inspect metrics: ``bedside-report strata LOG`` computes them from the log (:mod:`bedside.report`).
"""

from __future__ import annotations

import math
from inspect_ai.scorer import Metric, SampleScore, mean, metric
from scipy.stats import binomtest
from scipy.stats import t as student_t


@metric(name="n")
def n() -> Metric:
    """How many samples a number is computed over (unscored samples are not counted). A mapping,
    so that Inspect reports 0 rather than NaN when every sample is unscored."""

    def compute(scores: list[SampleScore]) -> dict[str, int]:
        return {"n": len(scores)}

    return compute


def wilson_bounds(values: list[float]) -> dict[str, float]:
    """95 % Wilson score interval of a proportion of 0/1 values."""
    if not values:
        return {"lower": float("nan"), "upper": float("nan")}
    if any(v not in (0.0, 1.0) for v in values):
        raise ValueError("a Wilson interval needs 0/1 values; use binary=False for other scores")
    interval = binomtest(int(sum(values)), len(values)).proportion_ci(confidence_level=0.95, method="wilson")
    return {"lower": float(interval.low), "upper": float(interval.high)}


def t_bounds(values: list[float], clip: tuple[float, float] | None = None) -> dict[str, float]:
    """95 % Student-t interval of a mean (NaN bounds below two values), optionally clipped."""
    k = len(values)
    if k < 2:
        return {"lower": float("nan"), "upper": float("nan")}
    m = sum(values) / k
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (k - 1))
    half = float(student_t.ppf(0.975, k - 1)) * sd / math.sqrt(k)
    lower, upper = m - half, m + half
    if clip is not None:
        lower, upper = max(clip[0], lower), min(clip[1], upper)
    return {"lower": lower, "upper": upper}


def interval_bounds(values: list[float], binary: bool = False) -> dict[str, float]:
    """The 95 % interval ``headline`` reports (module docstring)."""
    if binary and all(v in (0.0, 1.0) for v in values):
        return wilson_bounds(values)
    return t_bounds(values, clip=(0.0, 1.0) if binary else None)


def rate_text(values: list[float]) -> str:
    """A rate of 0/1 outcomes as text for reports: ``mean [lower, upper] n=k`` (Wilson, :func:`interval_bounds`)."""
    if not values:
        return "n=0"
    b = interval_bounds([float(v) for v in values], binary=True)
    return f"{sum(values) / len(values):.3f} [{b['lower']:.3f}, {b['upper']:.3f}] n={len(values)}"


@metric(name="ci")
def interval(binary: bool = False) -> Metric:
    """95 % interval of the mean (``lower``/``upper``, like Inspect's ``ci``); see the module docstring."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return interval_bounds([s.score.as_float() for s in scores], binary)

    return compute


def headline(binary: bool = False) -> list[Metric]:
    return [mean(), interval(binary=binary), n()]


@metric(name="total")
def total() -> Metric:
    """Sum over samples (e.g. how many sub-scores were left unscored)."""

    def compute(scores: list[SampleScore]) -> float:
        return float(sum(s.score.as_float() for s in scores))

    return compute
