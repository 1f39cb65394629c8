"""bedside's one interval rule: every 95 % interval of every number bedside shows comes from here.

Used by the Inspect metrics (:mod:`bedside.scorers.metrics`), ``bedside strata``
(:mod:`bedside.reporting.strata`), ``bedside report`` tables and figure error bars
(:mod:`bedside.reporting.tables`), ``bedside compare`` (:mod:`bedside.reporting.compare`) and the
pooled rates a scorer computes itself.

The rule, per score, by the score's **declared scale** (a :class:`Scale`; the scorer that writes a
key declares it, :class:`bedside.score_keys.ScoreKey`), never by what its values happen to look like:

- **fewer than 2 values: no interval** (``None``; shown as no interval, never a NaN or a
  zero-width one);
- a scale **declared binary** (a rate of 0/1 outcomes) whose values
  are all 0 or 1: the **Wilson score interval** (:func:`scipy.stats.binomtest`), inside [0, 1] by
  construction;
- everything else (Likert 1-5, [0, 1] scores, grade levels, counts, binary rates averaged over
  ``--epochs``, paired differences): the **bootstrap percentile interval** of the mean
  (:func:`scipy.stats.bootstrap`, ``method="percentile"``, :data:`RESAMPLES` resamples, seed
  :data:`SEED`): each bound is a mean of values drawn from the sample, so it lies between the
  smallest and largest value seen and therefore inside the score's scale by construction. A
  sample without spread (every value equal) gets the zero-width interval at that value: the
  bootstrap sees no variation;
- statistics that are not a mean of per-case values (rates pooled over items, or a mean of such rates):
  the same percentile bootstrap with the **case** as the resampled unit (:func:`case_bootstrap`); a
  ratio of sums of 0/1 items stays inside [0, 1] by construction;
- agreement statistics (Cohen's κ and Spearman's ρ of judge and physician ratings, Kendall's τ of two
  graders' rankings): :func:`scipy.stats.bootstrap`'s percentile interval with the **case** as the
  resampled unit, :data:`AGREEMENT_RESAMPLES` resamples, seed :data:`SEED` (:func:`agreement_interval`).

Bounds are finally clipped to the declared scale, which only removes floating-point dust
(a mean of values in [0, 1] can round to 1.0000000000000002).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95
#: bootstrap resamples and seed (fixed: the same data always gives the same interval)
RESAMPLES = 2000
SEED = 0
#: bootstrap resamples of an agreement statistic's interval (:func:`agreement_interval`)
AGREEMENT_RESAMPLES = 1000


@dataclass(frozen=True)
class Scale:
    """The range a score can take (``None``: unbounded on that side); ``binary``: a rate of 0/1
    outcomes (gets Wilson's interval when its values are 0/1)."""

    lower: float | None
    upper: float | None
    binary: bool = False
    name: str = ""


BINARY = Scale(0.0, 1.0, binary=True, name="binary rate")
UNIT = Scale(0.0, 1.0, name="[0, 1]")
LIKERT = Scale(1.0, 5.0, name="1-5 Likert")
COSINE = Scale(-1.0, 1.0, name="[-1, 1]")
COUNT = Scale(0.0, None, name="count")
UNBOUNDED = Scale(None, None, name="unbounded")


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray([float(v) for v in values], dtype=float)
    return array[np.isfinite(array)]


def clip(low: float, high: float, scale: Scale) -> tuple[float, float]:
    """The interval ``[low, high]`` intersected with ``scale``."""
    if scale.lower is not None:
        low, high = max(low, scale.lower), max(high, scale.lower)
    if scale.upper is not None:
        low, high = min(low, scale.upper), min(high, scale.upper)
    return float(low), float(high)


def wilson(successes: int, n: int) -> tuple[float, float]:
    """95 % Wilson score interval of ``successes`` out of ``n`` (n >= 1)."""
    from scipy import stats  # here, not at the top: every task imports this module (scipy.stats: 0.6 s)

    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return float(ci.low), float(ci.high)


def rate_text(values: Sequence[float]) -> str:
    """A rate of 0/1 outcomes (numbers or booleans) as text for the command-line reports:
    ``mean [lower, upper] n=k`` (Wilson; no interval below n = 2)."""
    if not values:
        return "n=0"
    mean = sum(values) / len(values)
    if len(values) < 2:
        return f"{mean:.3f} n={len(values)}"
    lower, upper = wilson(int(sum(values)), len(values))
    return f"{mean:.3f} [{lower:.3f}, {upper:.3f}] n={len(values)}"


def case_bootstrap(
    n: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    scale: Scale = UNBOUNDED,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a statistic of ``n`` cases resampled as whole cases.

    ``statistic(idx)`` gets an integer array of case indices of shape ``(..., n)`` and returns the
    statistic along the last axis (NaN allowed for a resample where it is undefined; such resamples
    are left out). ``None`` below two cases."""
    if n < 2:
        return None
    values = np.asarray(statistic(_drawn_indices(n, resamples, seed)), dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return clip(float(low), float(high), scale)


def agreement_interval(
    cases: int,
    statistic: Callable[..., Any],
    resamples: int = AGREEMENT_RESAMPLES,
    vectorized: bool = True,
    seed: int = SEED,
) -> tuple[float, float]:
    """95 % percentile bootstrap interval (:func:`scipy.stats.bootstrap`) of an agreement statistic of
    ``cases`` cases, each resample drawing whole cases with replacement. ``statistic`` gets the drawn case
    numbers: with ``vectorized``, an array ``(..., cases)`` and ``axis=-1``, returning the statistic of each
    row; otherwise one resample at a time. ``(nan, nan)`` below two cases, or when a resample's statistic
    is undefined (e.g. every rating the same)."""
    if cases < 2:
        return math.nan, math.nan
    from scipy import stats

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # degenerate resamples: NaN interval, reported as such
        result = stats.bootstrap(
            (np.arange(cases),),
            statistic,
            vectorized=vectorized,
            n_resamples=resamples,
            method="percentile",
            confidence_level=CONFIDENCE,
            random_state=seed,
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return (low, high) if math.isfinite(low) and math.isfinite(high) else (math.nan, math.nan)


def mean_interval(
    values: Sequence[float] | np.ndarray, scale: Scale = UNBOUNDED, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float] | None:
    """The 95 % interval of the mean of ``values`` (NaN values left out) by the rule of the module
    docstring; ``None`` (no interval) below two values."""
    x = _finite(values)
    n = len(x)
    if n < 2:
        return None
    if scale.binary and np.all((x == 0.0) | (x == 1.0)):
        return clip(*wilson(int(x.sum()), n), scale)
    if np.ptp(x) == 0:  # no spread: every resample has the same mean
        return clip(float(x[0]), float(x[0]), scale)
    from scipy import stats

    # scipy.stats.bootstrap(method="percentile", vectorized) step by step, its draw made once per n:
    # the same numbers, bit for bit (tests/test_metrics.py checks them against scipy's), without a fresh
    # draw of resamples x n indices per call (a sweep's report takes thousands of intervals)
    means = np.mean(x[_drawn_indices(n, resamples, seed)], axis=-1)
    alpha = np.asarray((1 - CONFIDENCE) / 2, dtype=means.dtype)
    low, high = stats.quantile(means, np.stack((alpha, 1 - alpha), axis=-1), axis=-1)
    return clip(float(low), float(high), scale)


#: the bytes of drawn indices :func:`_drawn_indices` keeps
DRAWN_BYTES = 64 * 2**20
_drawn: dict[tuple[int, int, int], np.ndarray] = {}


def _drawn_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """The ``(resamples, n)`` indices :func:`scipy.stats.bootstrap` draws for a sample of ``n`` with
    ``rng=np.random.default_rng(seed)`` (read-only), kept for the next interval of the same n while the
    kept draws stay within :data:`DRAWN_BYTES` (least recently used dropped first)."""
    key = (n, resamples, seed)
    idx = _drawn.pop(key, None)
    if idx is None:
        idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
        idx.flags.writeable = False
    _drawn[key] = idx
    while sum(a.nbytes for a in _drawn.values()) > DRAWN_BYTES and len(_drawn) > 1:
        del _drawn[next(iter(_drawn))]
    return idx


def summarise(values: Sequence[float], scale: Scale = UNBOUNDED) -> dict[str, float]:
    """``mean``, ``ci_lower``, ``ci_upper`` (NaN when there is no interval) and ``n`` of the
    non-NaN ``values`` — the row every table of bedside shows."""
    x = _finite(values)
    interval = mean_interval(x, scale)
    return {
        "mean": float(x.mean()) if len(x) else math.nan,
        "ci_lower": interval[0] if interval else math.nan,
        "ci_upper": interval[1] if interval else math.nan,
        "n": int(len(x)),
    }


def describe() -> str:
    """One line naming the rule (for report captions and Markdown summaries)."""
    return (
        f"95 % intervals: Wilson for rates declared binary, otherwise a percentile bootstrap of the mean "
        f"({RESAMPLES} resamples, seed {SEED}); none below n = 2"
    )
