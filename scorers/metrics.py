"""Metric helpers shared by bedside's scorers: every headline number comes with its n and a 95 % CI.

``headline()`` = mean, 95 % t-interval (``ci_lower``/``ci_upper``) and ``n``.
``strata(*keys)`` = the same per value of each sample-metadata key, flattened as
``"<key>=<value>"`` (mean), ``"<key>=<value> lower"``/``upper`` and ``"<key>=<value> n"``. The
value comes from the sample metadata or, failing that, the score metadata; a sample without the key
counts under ``<key>=<missing>`` rather than failing the whole run.
"""

from __future__ import annotations

from collections import defaultdict

from inspect_ai.scorer import Metric, SampleScore, ci, mean, metric


@metric(name="n")
def n() -> Metric:
    """How many samples a number is computed over (unscored samples are not counted)."""

    def compute(scores: list[SampleScore]) -> int:
        return len(scores)

    return compute


def headline() -> list[Metric]:
    return [mean(), ci(0.95), n()]


def group_value(score: SampleScore, key: str) -> object:
    """The sample's value for ``key``: from the sample metadata, else from the score's metadata
    (for facts known only after the solver ran, such as the encounter's end reason)."""
    if score.sample_metadata and key in score.sample_metadata:
        return score.sample_metadata[key]
    return (score.score.metadata or {}).get(key, "<missing>")


@metric(name="by")
def strata(*keys: str) -> Metric:
    """mean, 95 % CI and n for every value of each metadata key."""
    interval = ci(0.95)

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
