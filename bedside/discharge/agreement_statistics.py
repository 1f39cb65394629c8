"""The agreement statistics of ``bedside agreement`` (:mod:`bedside.discharge.agreement`, whose docstring
states them): Cohen's κ and Spearman's ρ of paired ratings with exact agreement and n, their 95 %
intervals from a bootstrap over cases (:func:`bedside.intervals.agreement_interval`), and the
conversation-quality mean of the Likert axes (:func:`mean_statistics`). κ and ρ of many resamples are
computed at once (:func:`kappa_from_counts`, :func:`rho_of_resamples`; tests check them against
scikit-learn and scipy)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from bedside.discharge.ratings import Axis
from bedside.intervals import AGREEMENT_RESAMPLES, agreement_interval


def _kappa(x: np.ndarray, y: np.ndarray, axis: Axis) -> float:
    from sklearn.metrics import cohen_kappa_score  # scikit-learn: only for this command

    return float(cohen_kappa_score(x.astype(int), y.astype(int), labels=list(axis.scale), weights=axis.weights))


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    return float(spearmanr(x, y).statistic) if len(x) >= 2 else math.nan


def _weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The average ranks (ties share the mean rank, as :func:`scipy.stats.rankdata`) the rows ``values``
    would have if each row were repeated ``weights[r, row]`` times, per resample ``r``: (resamples, rows)."""
    levels, level = np.unique(values, return_inverse=True)
    order = np.argsort(level, kind="stable")
    starts = np.searchsorted(level[order], np.arange(len(levels)))
    per_level = np.add.reduceat(weights[:, order], starts, axis=1)  # (resamples, levels): copies of each value
    below = np.cumsum(per_level, axis=1) - per_level
    return (below + (per_level + 1) / 2)[:, level]


def rho_of_resamples(x: np.ndarray, y: np.ndarray, index: np.ndarray, cases: int, drawn: np.ndarray) -> np.ndarray:
    """Spearman's ρ of many case resamples at once: row ``r`` of ``drawn`` (case numbers, drawn with
    replacement) gives the ρ :func:`scipy.stats.spearmanr` gives on every rated pair of those cases
    (``index``: each pair's case number), each as often as its case was drawn; NaN where a resample's
    ratings are constant. A weighted form of the same ranks and Pearson correlation (one spearmanr call
    per resample would cost ~1.5 ms; tests check they are equal)."""
    drawn = np.asarray(drawn)
    flat = drawn.reshape(-1, drawn.shape[-1])
    offsets = flat + cases * np.arange(len(flat))[:, None]
    copies = np.bincount(offsets.ravel(), minlength=len(flat) * cases).reshape(len(flat), cases)
    weights = copies[:, index].astype(float)  # (resamples, pairs): how often each pair is in the resample
    rx, ry = _weighted_ranks(x, weights), _weighted_ranks(y, weights)
    total = weights.sum(axis=1, keepdims=True)
    with np.errstate(all="ignore"):
        dx = rx - (weights * rx).sum(axis=1, keepdims=True) / total
        dy = ry - (weights * ry).sum(axis=1, keepdims=True) / total
        rho = (weights * dx * dy).sum(axis=1) / np.sqrt((weights * dx**2).sum(axis=1) * (weights * dy**2).sum(axis=1))
    rho[(total[:, 0] < 2) | ~np.isfinite(rho)] = np.nan
    return rho.reshape(drawn.shape[:-1])


def kappa_from_counts(counts: np.ndarray, weights: str | None) -> np.ndarray:
    """Cohen's κ of confusion matrices ``counts`` (..., L, L), batched: scikit-learn's formula
    (:func:`sklearn.metrics.cohen_kappa_score`: 1 − Σ w·O / Σ w·E) for many bootstrap resamples
    at once (one sklearn call per resample would cost ~1 ms; tests check it equals sklearn's)."""
    size = counts.shape[-1]
    i, j = np.indices((size, size))
    w = {
        None: (i != j).astype(float),
        "linear": np.abs(i - j).astype(float),
        "quadratic": ((i - j) ** 2).astype(float),
    }[weights]
    rows, cols = counts.sum(axis=-1), counts.sum(axis=-2)
    expected = rows[..., :, None] * cols[..., None, :] / counts.sum(axis=(-2, -1))[..., None, None]
    with np.errstate(all="ignore"):
        return 1.0 - (w * counts).sum(axis=(-2, -1)) / (w * expected).sum(axis=(-2, -1))


def case_interval(
    x: np.ndarray, y: np.ndarray, cases: np.ndarray, stat: str, axis: Axis, resamples: int = AGREEMENT_RESAMPLES
) -> tuple[float, float]:
    """95 % percentile bootstrap interval of κ or ρ (``stat``) resampling whole cases (module docstring)."""
    labels, index = np.unique(cases, return_inverse=True)
    if len(labels) < 2:
        return math.nan, math.nan
    statistic: Callable[..., np.ndarray | float]
    if stat == "kappa":
        # per-case confusion matrices; a resample's matrix is the sum over its drawn cases
        per_case = np.zeros((len(labels), len(axis.scale), len(axis.scale)))
        np.add.at(per_case, (index, axis.positions(x), axis.positions(y)), 1)

        weights = axis.weights

        def kappa(drawn: np.ndarray, axis: int = -1) -> np.ndarray:  # drawn: (resamples, cases)
            return kappa_from_counts(per_case[drawn].sum(axis=-3), weights)

        statistic = kappa
    else:

        def rho(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
            return rho_of_resamples(x, y, index, len(labels), drawn)

        statistic = rho
    return agreement_interval(len(labels), statistic, resamples)


def statistics(
    a: Sequence[float] | pd.Series, b: Sequence[float] | pd.Series, axis: Axis, cases: Sequence[object] | None = None
) -> dict[str, float]:
    """κ (if categorical), Spearman's ρ, exact agreement and n of paired ratings; with ``cases``
    (the case of each pair), 95 % case-bootstrap intervals of κ and ρ."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    groups = np.asarray([str(c) for c in cases], dtype=object)[keep] if cases is not None else None
    out = {
        "n": int(len(x)),
        "n_cases": int(len(set(groups))) if groups is not None else math.nan,
        "kappa": math.nan,
        "kappa_low": math.nan,
        "kappa_high": math.nan,
        "rho": math.nan,
        "rho_low": math.nan,
        "rho_high": math.nan,
        "rho_p": math.nan,
        "exact_agreement": math.nan,
    }
    if len(x) == 0:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: NaN, reported as such
        if axis.kind != "continuous":
            out["kappa"] = _kappa(x, y, axis)
            out["exact_agreement"] = float(np.mean(x == y))
            if groups is not None and math.isfinite(out["kappa"]):
                out["kappa_low"], out["kappa_high"] = case_interval(x, y, groups, "kappa", axis)
        if len(x) >= 2:
            rho = spearmanr(x, y)
            out["rho"], out["rho_p"] = float(rho.statistic), float(rho.pvalue)
            if groups is not None and math.isfinite(out["rho"]):
                out["rho_low"], out["rho_high"] = case_interval(x, y, groups, "rho", axis)
    return out


def mean_statistics(parts: list[tuple[Axis, list, list, list]]) -> dict[str, float]:
    """The conversation-quality mean row: the mean over the Likert axes of κ, ρ and exact agreement,
    with 95 % intervals from a bootstrap over cases of that mean (module docstring)."""
    per_axis = [statistics(x, y, axis) for axis, x, y, _ in parts]
    out = {"n": int(sum(r["n"] for r in per_axis)), "rho_p": math.nan}
    for key in ("kappa", "rho", "exact_agreement"):
        values = [r[key] for r in per_axis if math.isfinite(r[key])]
        out[key] = float(np.mean(values)) if len(values) == len(per_axis) else math.nan
    cleaned = []
    for axis, xs, ys, cases in parts:
        x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        keep = ~(np.isnan(x) | np.isnan(y))
        cleaned.append((axis, x[keep], y[keep], np.asarray([str(c) for c in cases], dtype=object)[keep]))
    labels = sorted({c for _, _, _, cases in cleaned for c in cases})
    out["n_cases"] = len(labels)
    out["kappa_low"] = out["kappa_high"] = out["rho_low"] = out["rho_high"] = math.nan
    if len(labels) < 2:
        return out
    position = {c: k for k, c in enumerate(labels)}
    matrices, indices = [], []
    for axis, x, y, cases in cleaned:
        per_case = np.zeros((len(labels), len(axis.scale), len(axis.scale)))
        index = np.asarray([position[c] for c in cases], dtype=int)
        np.add.at(per_case, (index, axis.positions(x), axis.positions(y)), 1)
        matrices.append((per_case, axis.weights))
        indices.append(index)

    def kappa_mean(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean([kappa_from_counts(m[drawn].sum(axis=-3), w) for m, w in matrices], axis=0)

    def rho_mean(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        values = [rho_of_resamples(x, y, index, len(labels), drawn) for (_, x, y, _), index in zip(cleaned, indices)]
        return np.mean(values, axis=0)

    for key, statistic in (("kappa", kappa_mean), ("rho", rho_mean)):
        if not math.isfinite(out[key]):
            continue
        out[f"{key}_low"], out[f"{key}_high"] = agreement_interval(len(labels), statistic)
    return out
