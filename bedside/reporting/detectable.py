"""The noise floor of a paired comparison: the minimum detectable difference (MDD) at a run's n, and the
cases and epochs a wanted detectable difference needs.

**The MDD.** Two runs on the same cases give per-case paired differences d₁ … dₙ (epochs averaged per
case first) with sample SD s_d. The MDD is the smallest true mean difference that a two-sided paired
t-test at level α detects with probability ``power``:

    MDD = δ*(n, α, power) · s_d

where δ* is the standardised effect (the mean difference over the SD of the differences) at which the
one-sample t-test of n values has that power — the noncentral t distribution with n − 1 degrees of
freedom, solved by statsmodels (:class:`statsmodels.stats.power.TTestPower`). For large n
δ* ≈ (z₁₋α/₂ + z_power) / √n, so MDD ≈ 2.80 · s_d / √n at the defaults, power 0.8 and α 0.05
(``--power``, ``--alpha``). The MDD describes the comparison — its n and the spread of its per-case
differences — not the difference it observed: this comparison can reliably detect true differences ≥ MDD,
and misses a smaller true difference more often than 1 − power, but still detects it at the power the
t-test has there. Whether an observed difference is real is its interval's or its test's to say, never the
MDD's: a difference smaller than the MDD whose interval excludes zero is a detected difference.
s_d is estimated too: the MDD's 95 % interval is δ* times the case bootstrap of s_d
(:func:`bedside.intervals.case_bootstrap`: percentile, 2,000 resamples, seed 0), cut to [0, the scale's
width]. No MDD below 2 cases; s_d = 0 (one difference on every case) gives 0.

**Is an observed difference real?** Not the MDD's to say, but the interval's (``bedside compare``: the
bootstrap interval of the mean difference) or the test's. Over the k(k − 1)/2 pairs of k models ranked on
one key (the leaderboard) each pair gets the two-sided paired t-test of its per-case differences — the test
the MDD is stated for (:func:`scipy.stats.ttest_1samp`; no spread: p = 0 for a nonzero difference, 1 for
none) — and the pairs' p-values are adjusted together by **Holm**'s step-down method
(:func:`statsmodels.stats.multitest.multipletests`, ``method="holm"``), so that the chance of calling any pair
of equally good models different stays at most α however many pairs there are. A pair is distinguishable
when its Holm-adjusted p-value is below α; a pair without two shared cases is not tested and left out of the
family.

**Cases and epochs for a wanted MDD** (``bedside estimate --detect D``). The SD of a case's paired
difference when each model runs k epochs is

    s_d(k) = √(σ²_Δ + 2 σ²_e / k)

σ²_e, the within-case (run-to-run) variance of one model, is the mean over (model, case) of the variance
over the pilot's epochs (needs a pilot with ≥ 2 epochs; else 0: epochs then do not help, and the output
says so). σ²_Δ, the variance over cases of the true paired difference, comes from the pilot: with two or
more models on the same cases, the variance of their per-case differences (epoch means) minus 2 σ²_e / k₀
(k₀ the pilot's epochs), the largest over pairs of models; with one model, 2 σ²_c (σ²_c: the variance over
cases of its case means minus σ²_e / k₀), which assumes that two models' per-case scores are uncorrelated
— conservative when models find the same cases hard, as they usually do. ``--sd S`` states s_d instead
(the same for every k). The cases needed are the smallest n whose MDD at s_d(k) is at most D (statsmodels'
``solve_power``, rounded up; at least 2), for each k; their 95 % interval comes from the case bootstrap of
s_d(k) over the pilot's cases (percentile, 2,000 resamples, seed 0; the cases needed grow with s_d, so
the bounds of s_d give those of the cases).
"""

from __future__ import annotations

import functools
import gc
import itertools
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bedside.benchmarks import DERIVED_SCORERS
from bedside.intervals import Scale, case_bootstrap, clip

POWER = 0.8
ALPHA = 0.05
#: fewest cases a paired test can use
MIN_CASES = 2
#: the source of a plan from ``--sd``
STATED = "stated --sd (the same for any number of epochs)"


def probability(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1 (``--power``, ``--alpha``)."""
    import argparse

    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a number above 0 (``--detect``)."""
    import argparse

    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--pass-k``)."""
    import argparse

    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not 1 or more")
    return value


def add_options(parser: Any, subject: str, pass_k: bool = True) -> None:
    """A command's ``--power`` and ``--alpha`` of ``subject`` (e.g. "the leaderboard's minimum detectable
    differences") and, with ``pass_k``, ``--pass-k`` (argparse)."""
    parser.add_argument("--power", type=probability, default=POWER, help=f"power of {subject} (default {POWER})")
    parser.add_argument(
        "--alpha", type=probability, default=ALPHA, help=f"two-sided level of {subject} (default {ALPHA})"
    )
    if pass_k:
        parser.add_argument(
            "--pass-k",
            type=positive,
            metavar="K",
            help="logs with epochs: also pass^K of each yes/no verdict (the chance that K epochs all pass)",
        )


@functools.lru_cache(maxsize=4096)
def effect(n: int, power: float = POWER, alpha: float = ALPHA) -> float:
    """δ*: the standardised mean difference a two-sided paired t-test of ``n`` cases detects with ``power``
    at level ``alpha`` (NaN below 2 cases). Kept per (n, power, alpha): solving it takes ~3 ms, and a sweep's
    leaderboard asks it hundreds of times for the same n."""
    if n < MIN_CASES:
        return math.nan
    from statsmodels.stats.power import TTestPower

    return float(np.ravel(TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power))[0])


def mdd(sd: float, n: int, power: float = POWER, alpha: float = ALPHA) -> float:
    """The minimum detectable difference of a paired comparison of ``n`` cases whose differences have SD ``sd``."""
    return effect(n, power, alpha) * sd


def paired_p(differences: Sequence[float] | np.ndarray) -> float:
    """The two-sided p-value of the paired t-test that the per-case ``differences`` (NaN left out) have mean 0;
    NaN below 2 cases; without spread 0 for a nonzero difference (detected at any n), 1 for none."""
    d = np.asarray([float(v) for v in differences], dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < MIN_CASES:
        return math.nan
    if np.ptp(d) == 0:
        return 1.0 if d[0] == 0 else 0.0
    from scipy import stats

    return float(stats.ttest_1samp(d, 0.0).pvalue)


def holm(p_values: Sequence[float] | np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """``p_values`` of one family of tests adjusted by Holm's method (module docstring); NaN (a pair not
    tested) is left out of the family and stays NaN."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    tested = np.isfinite(p)
    if tested.any():
        from statsmodels.stats.multitest import multipletests

        gc.freeze()  # multipletests' Holm runs a full gc.collect(): over the objects made since, not the logs read
        try:
            adjusted[tested] = multipletests(p[tested], alpha=alpha, method="holm")[1]
        finally:
            gc.unfreeze()
    return adjusted


def width_of(scale: Scale) -> float | None:
    """The width of a bounded scale (the largest possible difference of two values on it); None if unbounded."""
    return scale.upper - scale.lower if scale.lower is not None and scale.upper is not None else None


def detectable(
    differences: Sequence[float] | np.ndarray, scale: Scale, power: float = POWER, alpha: float = ALPHA
) -> dict[str, float]:
    """``sd`` of the per-case ``differences`` (NaN left out), ``mdd`` with its 95 % interval ``mdd_low`` /
    ``mdd_high`` cut to [0, the width of ``scale``], and ``n`` (module docstring)."""
    d = np.asarray([float(v) for v in differences], dtype=float)
    d = d[np.isfinite(d)]
    n = len(d)
    out = {"n": n, "sd": math.nan, "mdd": math.nan, "mdd_low": math.nan, "mdd_high": math.nan}
    if n < MIN_CASES:
        return out
    factor = effect(n, power, alpha)
    sd = float(np.std(d, ddof=1)) if np.ptp(d) > 0 else 0.0  # one value on every case: no spread, not dust
    bounds = Scale(0.0, width_of(scale), name="difference")
    interval = case_bootstrap(n, lambda idx: np.std(d[idx], axis=-1, ddof=1)) if sd > 0 else (0.0, 0.0)
    low, high = clip(factor * interval[0], factor * interval[1], bounds) if interval else (math.nan, math.nan)
    out.update(sd=sd, mdd=clip(factor * sd, factor * sd, bounds)[0], mdd_low=low, mdd_high=high)
    return out


def describe(power: float, alpha: float) -> str:
    """One line naming the rule (captions, Markdown summaries)."""
    return (
        f"MDD: this comparison can reliably detect true differences ≥ MDD, the smallest true difference a "
        f"two-sided paired t-test at α = {alpha:g} detects with {power * 100:g} % power at this n (δ*(n) × the SD "
        "of the per-case differences; 95 % interval: case bootstrap of that SD). It describes the comparison, "
        "not the observed difference: whether that is real is its interval's to say, whatever its size"
    )


# -- planning: the cases and epochs a wanted MDD needs -------------------------------------------


def cases_for(detect: float, sd: float, power: float = POWER, alpha: float = ALPHA) -> float:
    """The fewest cases (at least 2) whose MDD at paired-difference SD ``sd`` is at most ``detect``."""
    if not sd > 0:
        return float(MIN_CASES)
    if effect(MIN_CASES, power, alpha) * sd <= detect:
        return float(MIN_CASES)
    from statsmodels.stats.power import TTestPower

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = TTestPower().solve_power(effect_size=detect / sd, nobs=None, alpha=alpha, power=power)
    return float(max(MIN_CASES, math.ceil(float(np.ravel(n)[0]) - 1e-9)))


def components(values: dict[str, np.ndarray]) -> tuple[float, float, str]:
    """(σ²_Δ, σ²_e, source) from ``values``: model -> (cases × epochs) array of one key (NaN: not scored),
    the same cases in every model (module docstring)."""
    means = {m: np.nanmean(v, axis=1) for m, v in values.items()}
    counts = {m: np.sum(np.isfinite(v), axis=1) for m, v in values.items()}
    within = [np.nanvar(v[c >= 2], axis=1, ddof=1) for m, v in values.items() if (c := counts[m]).max() >= 2]
    sigma_e = float(np.mean(np.concatenate(within))) if within and sum(len(w) for w in within) else 0.0
    k0 = float(np.mean([np.mean(c[c >= 1]) for c in counts.values()]))
    if len(values) >= 2:
        spreads = [np.nanvar(means[a] - means[b], ddof=1) for a, b in itertools.combinations(sorted(values), 2)]
        sigma_delta = max(0.0, float(np.nanmax(spreads)) - 2 * sigma_e / k0)
        return sigma_delta, sigma_e, f"{len(values)} models' paired differences"
    [only] = means.values()
    sigma_c = max(0.0, float(np.nanvar(only, ddof=1)) - sigma_e / k0)
    return 2 * sigma_c, sigma_e, "one model (assumes two models' per-case scores uncorrelated)"


def plan(
    values: dict[str, np.ndarray],
    detect: float,
    epochs: Sequence[int],
    power: float = POWER,
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """For each planned epoch count k: s_d(k) and the cases needed to detect ``detect`` [95 % CI] (module
    docstring); ``values``: model -> (cases × epochs) array of one key on the pilot's cases."""
    sigma_delta, sigma_e, source = components(values)
    n_cases = len(next(iter(values.values())))
    has_epochs = any(np.sum(np.isfinite(v), axis=1).max() >= 2 for v in values.values())
    drawn: list[tuple[float, float, str]] = []  # the components of each bootstrap resample, computed once

    def sd_at(k: int) -> Any:
        def statistic(idx: np.ndarray) -> np.ndarray:
            if not drawn:
                drawn.extend(components({m: v[row] for m, v in values.items()}) for row in idx)
            return np.asarray([math.sqrt(d + 2 * e / k) for d, e, _ in drawn])

        return statistic

    rows = []
    for k in epochs:
        sd = math.sqrt(sigma_delta + 2 * sigma_e / k)
        # cases_for grows with the SD: the bounds of the SD's interval give those of the cases
        interval = case_bootstrap(n_cases, sd_at(k)) if n_cases >= MIN_CASES else None
        rows.append(
            {
                "epochs": k,
                "sd_difference": sd,
                "cases": cases_for(detect, sd, power, alpha),
                "cases_ci_lower": cases_for(detect, interval[0], power, alpha) if interval else math.nan,
                "cases_ci_upper": cases_for(detect, interval[1], power, alpha) if interval else math.nan,
                "sigma_delta": math.sqrt(sigma_delta),
                "sigma_within": math.sqrt(sigma_e),
                "pilot_cases": n_cases,
                "source": source + ("" if has_epochs else "; no pilot epochs: run-to-run noise unmeasured, taken as 0"),
            }
        )
    return pd.DataFrame(rows)


def stated(detect: float, sd: float, epochs: Sequence[int], power: float = POWER, alpha: float = ALPHA) -> pd.DataFrame:
    """The cases needed at a stated SD of the per-case paired difference (``--sd``), the same for every k."""
    return pd.DataFrame(
        [
            {
                "epochs": k,
                "sd_difference": sd,
                "cases": cases_for(detect, sd, power, alpha),
                "cases_ci_lower": math.nan,
                "cases_ci_upper": math.nan,
                "source": STATED,
            }
            for k in epochs
        ]
    )


def pilot_values(frame: pd.DataFrame, key: str) -> dict[str, np.ndarray]:
    """model -> (cases × epochs) values of ``key`` (``frame``: :func:`bedside.reporting.load.scores_frame`'s
    rows, the health block's copies left out), on the cases every model has scored."""
    part = frame[(frame["key"] == key) & ~frame["scorer"].isin(DERIVED_SCORERS)]
    scored = part.dropna(subset=["value"])
    cases = set.intersection(*(set(g["id"]) for _, g in scored.groupby("label"))) if len(scored) else set()
    ids = sorted(cases)
    epochs = int(part["epoch"].max()) if len(part) else 0
    out: dict[str, Any] = {}
    for model, group in part[part["id"].isin(cases)].groupby("label", sort=True):
        wide = group.pivot_table(index="id", columns="epoch", values="value", aggfunc="mean", dropna=False)
        out[str(model)] = wide.reindex(index=ids, columns=range(1, epochs + 1)).to_numpy(dtype=float)
    return out


#: epoch counts every plan shows (with the planned ``--epochs``)
PLANNED_EPOCHS = (1, 2, 3, 5)


def needs(
    frame: pd.DataFrame,
    detect: float,
    keys: Sequence[str],
    epochs: Sequence[int] = PLANNED_EPOCHS,
    sd: float | None = None,
    power: float = POWER,
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """Per score key of ``keys`` and planned epoch count: the cases needed to detect ``detect`` (module
    docstring), from the pilot ``frame`` (:func:`bedside.reporting.load.scores_frame`'s rows) or, with ``sd``,
    from that stated SD."""
    parts = []
    for key in keys:
        values = pilot_values(frame, key)
        if sd is not None:
            table = stated(detect, sd, epochs, power, alpha)
        elif values and len(next(iter(values.values()))) >= MIN_CASES:
            table = plan(values, detect, epochs, power, alpha)
        else:
            continue
        parts.append(table.assign(key=key, models=len(values)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def render(table: pd.DataFrame, detect: float, power: float, alpha: float) -> str:
    """The plan as ``bedside estimate`` prints it."""
    lines = [
        f"cases needed to detect a difference of {detect:g} between two models on the same cases "
        f"({power * 100:g} % power, two-sided α = {alpha:g}; paired t-test; "
        "95 % intervals: case bootstrap of the pilot):"
    ]
    for key, part in table.groupby("key", sort=False):
        first = part.iloc[0]
        spread = (
            f"SD between cases of the paired difference {first['sigma_delta']:.3f}, within-case SD over epochs "
            f"{first['sigma_within']:.3f}, from {int(first['pilot_cases'])} pilot cases"
            if "sigma_delta" in part and first["sigma_delta"] == first["sigma_delta"]
            else f"SD of the paired difference {first['sd_difference']:g}"
        )
        lines.append(f"\n  {key}: {spread}; {first['source']}")
        if first["source"] == STATED:  # epochs are not modelled: one line
            lines.append(f"    any epochs: {first['cases']:,.0f} cases")
            continue
        for r in part.to_dict("records"):
            interval = (
                f" [{r['cases_ci_lower']:,.0f}, {r['cases_ci_upper']:,.0f}]"
                if r["cases_ci_lower"] == r["cases_ci_lower"]
                else ""
            )
            lines.append(
                f"    {int(r['epochs'])} epoch(s): {r['cases']:,.0f} cases{interval} "
                f"(SD of a case's paired difference {r['sd_difference']:.3f})"
            )
    return "\n".join(lines)
