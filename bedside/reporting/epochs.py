"""Consistency over epochs: a run's own run-to-run noise, measured from its epochs (``inspect eval
--epochs K``, K ≥ 2), never assumed.

Per log (runs of one model pooled, as the report labels them) and score key, over the cases scored in
at least two epochs:

- **within-case SD** (every reported per-case key): the square root of the mean, over cases, of each
  case's variance over its scored epochs (``ddof=1``): how far one epoch's value lies from its case's
  mean, the noise of a single run. Interval: the case bootstrap of that statistic
  (:func:`bedside.intervals.case_bootstrap`, percentile, 2,000 resamples, seed 0), cut to [0, the key's
  scale width]; n = cases.
- **flips** (every yes/no verdict): a *verdict unit* is a case × a yes/no outcome — a per-case key
  declared binary (a failure, an overreaction, ...), or one item of a key that is a share of yes/no items
  (:attr:`bedside.score_keys.ScoreKey.items`, declared by the scorer that writes the key: a checklist's
  answers, a rubric's items met). A unit *flips* when its verdict is
  not the same in every epoch it was judged in. Shown: the share of units that flip, with n units and n
  cases; interval: Wilson (:func:`bedside.intervals.wilson`) when each case is one unit, else the case
  bootstrap of the pooled share (a case's items resampled together: they are not independent). If each
  epoch gave a unit's verdict independently with probability p, it would flip with probability
  1 − p^K − (1 − p)^K over K epochs (2p(1 − p) for K = 2).
- **pass^k** (``--pass-k K``): per unit, the probability that all k of its epochs pass, by Inspect's own
  ``pass_k`` reducer (:func:`inspect_ai.scorer.pass_k`, the unbiased C(c, k) / C(n, k) over a unit's n
  scored epochs of which c pass; a unit judged in fewer than k epochs has none); *pass* is the good
  outcome — no failure for a lower-is-better key (``failure``), yes / met for an item. Per case: the
  mean over its units; shown: the mean over cases [bedside's interval rule on [0, 1]] next to pass^1,
  the share of the units' judged epochs that pass (the mean; its 95 % interval the case bootstrap of that
  pooled share, n the units and cases). The task's own summary can use Inspect's reducers too
  (``--epochs-reducer mean,pass_k_2``), but they reduce the score value's keys, where a lower-is-better
  key such as ``failure`` is 1 for the bad outcome and the items are not keys at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bedside import benchmarks
from bedside.benchmarks import DERIVED_SCORERS
from bedside.intervals import UNIT, Scale, case_bootstrap, clip, mean_interval, wilson
from bedside.reporting.detectable import width_of
from bedside.reporting.load import LoadedLog

#: shown roles: the keys a table of run-to-run noise lists
SHOWN_ROLES = ("headline", "summary")


def epochs_of(log: Any) -> int:
    """The most epochs a sample of ``log`` has."""
    return max((s.epoch for s in log.samples or []), default=0)


def _declared(scorer: str, key: str) -> Any:
    """The declaration of ``key`` as ``scorer`` writes it; None when no registered benchmark declares it."""
    try:
        declared = {k.name: k for k in benchmarks.scorer_keys(scorer)}
    except LookupError:
        return None
    return declared.get(key)


def verdicts(items: Sequence[LoadedLog]) -> pd.DataFrame:
    """One row per (model, case, epoch, verdict, item): ``passed`` (1.0 the good outcome, 0.0 the bad one,
    NaN not judged) of every yes/no verdict of the logs (module docstring); ``item`` is ``""`` for a key that
    is a verdict of its own."""
    rows = []
    for loaded in items:
        for sample in loaded.log.samples or []:
            for scorer, score in (sample.scores or {}).items():
                if scorer in DERIVED_SCORERS or not isinstance(score.value, dict):
                    continue
                for key, value in score.value.items():
                    declared = _declared(scorer, key)
                    if declared is None or declared.role not in SHOWN_ROLES:
                        continue
                    base = {"model": loaded.label, "id": str(sample.id), "epoch": sample.epoch, "verdict": key}
                    if declared.items is not None:
                        for item, verdict in declared.items(score.metadata or {}).items():
                            passed = math.nan if verdict is None else float(bool(verdict))
                            rows.append({**base, "item": item, "passed": passed})
                    elif declared.scale.binary and isinstance(value, int | float) and value in (0, 1):
                        passed = float(value == (0 if declared.lower_is_better else 1))
                        rows.append({**base, "item": "", "passed": passed})
                    elif declared.scale.binary:  # unscored (NaN)
                        rows.append({**base, "item": "", "passed": math.nan})
    return pd.DataFrame(rows, columns=["model", "id", "epoch", "verdict", "item", "passed"])


def pass_hat_k(passes: Sequence[float], k: int) -> float:
    """Inspect's ``pass_k`` reducer over one unit's scored epochs (1.0 pass, 0.0 not): the probability that k
    epochs drawn without replacement all pass; NaN below k epochs."""
    from inspect_ai.scorer import Score, pass_k

    return float(pass_k(k)([Score(value=v) for v in passes]).value)  # type: ignore[arg-type]


def _case_sums(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Per case: the sum of ``column`` over its units, and its number of units."""
    grouped = frame.groupby("id", sort=True)[column]
    return grouped.sum().to_numpy(dtype=float), grouped.size().to_numpy(dtype=float)


def _pooled_share(hits: np.ndarray, units: np.ndarray) -> tuple[float, float, float]:
    """The share sum(hits) / sum(units) and its 95 % interval: Wilson when each case is one unit, else the
    case bootstrap of the pooled share."""
    total = float(units.sum())
    share = float(hits.sum()) / total if total else math.nan
    if len(units) < 2:
        return share, math.nan, math.nan
    if np.all(units == 1):
        low, high = wilson(int(hits.sum()), int(total))
        return share, low, high

    def statistic(idx: np.ndarray) -> np.ndarray:
        return hits[idx].sum(axis=-1) / units[idx].sum(axis=-1)

    interval = case_bootstrap(len(units), statistic, UNIT)
    return (share, *interval) if interval else (share, math.nan, math.nan)


def flips(table: pd.DataFrame, pass_k: int | None = None) -> pd.DataFrame:
    """Per model and verdict: units judged in ≥ 2 epochs, the share that flip [95 % CI], pass^1 (the share
    of passing epochs) and, with ``pass_k``, pass^k [95 % CI] (module docstring)."""
    rows = []
    for (model, verdict), part in table.dropna(subset=["passed"]).groupby(["model", "verdict"], sort=True):
        grouped = part.groupby(["id", "item"], sort=True)["passed"]
        units = grouped.agg(["count", "min", "max", "mean"]).reset_index()
        units = units[units["count"] >= 2]
        if units.empty:
            continue
        units["flipped"] = (units["min"] != units["max"]).astype(float)
        hits, sizes = _case_sums(units, "flipped")
        share, low, high = _pooled_share(hits, sizes)
        units["passes"] = units["mean"] * units["count"]
        passed = units.groupby("id", sort=True)["passes"].sum().to_numpy(dtype=float)
        judged = units.groupby("id", sort=True)["count"].sum().to_numpy(dtype=float)
        pass_1, pass_1_low, pass_1_high = _pooled_share(passed, judged)  # judged epochs: never one per case
        row: dict[str, Any] = {
            "model": model,
            "verdict": verdict,
            "unit": "item" if (units["item"] != "").any() else "case",
            "n_cases": len(sizes),
            "n_units": int(sizes.sum()),
            "epochs": int(units["count"].max()),
            "pass_1": pass_1,
            "pass_1_ci_lower": pass_1_low,
            "pass_1_ci_upper": pass_1_high,
            "flip_share": share,
            "flip_ci_lower": low,
            "flip_ci_upper": high,
        }
        if pass_k is not None:
            passes = {key: list(values) for key, values in grouped}
            units["pass_k"] = [pass_hat_k(passes[(i, item)], pass_k) for i, item in zip(units["id"], units["item"])]
            per_case = units.dropna(subset=["pass_k"]).groupby("id")["pass_k"].mean().to_numpy(dtype=float)
            interval = mean_interval(per_case, UNIT)
            row |= {
                "k": pass_k,
                "pass_k": float(per_case.mean()) if len(per_case) else math.nan,
                "pass_k_ci_lower": interval[0] if interval else math.nan,
                "pass_k_ci_upper": interval[1] if interval else math.nan,
                "pass_k_cases": len(per_case),
            }
        rows.append(row)
    return pd.DataFrame(rows)


def within_case_sd(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model and score key (``frame``: :func:`bedside.reporting.load.scores_frame`'s rows): the
    within-case SD over epochs [95 % CI] and its n cases (module docstring)."""
    rows = []
    frame = frame[~frame["scorer"].isin(DERIVED_SCORERS)].dropna(subset=["value"])
    for (model, scorer, key), part in frame.groupby(["label", "scorer", "key"], sort=True):
        declared = _declared(str(scorer), str(key))
        if declared is None or declared.role not in SHOWN_ROLES or declared.pooled:
            continue
        by_case = part.groupby("id", sort=True)["value"]
        counts = by_case.count()
        variances = by_case.var(ddof=1)[counts >= 2].to_numpy(dtype=float)
        if len(variances) == 0:
            continue
        interval = case_bootstrap(len(variances), _root_mean(variances))
        bounds = Scale(0.0, width_of(declared.scale), name="SD")
        low, high = clip(*interval, bounds) if interval else (math.nan, math.nan)
        rows.append(
            {
                "model": model,
                "key": key,
                "n_cases": len(variances),
                "epochs": int(counts.max()),
                "mean": float(part["value"].mean()),
                "within_sd": float(np.sqrt(variances.mean())),
                "within_sd_ci_lower": low,
                "within_sd_ci_upper": high,
            }
        )
    return pd.DataFrame(rows)


def _root_mean(variances: np.ndarray) -> Any:
    """The statistic of the within-case SD's bootstrap: the root of the mean variance of the drawn cases."""
    return lambda idx: np.sqrt(variances[idx].mean(axis=-1))


def section(page: Any, logs: Sequence[LoadedLog], frame: pd.DataFrame, csv: Any, pass_k: int | None = None) -> None:
    """The report's block on run-to-run noise (nothing when no log has two epochs of a case): the within-case
    SD per key (``epoch_noise.csv``) and the flips and pass^k per verdict (``epoch_flips.csv``)."""
    repeated = [i for i in logs if epochs_of(i.log) >= 2]
    if not repeated:
        return
    labels = {i.label for i in repeated}
    page.heading("Run-to-run noise: consistency over epochs")
    noise = within_case_sd(frame[frame["label"].isin(labels)])
    if not noise.empty:
        page.table(
            noise.assign(
                **{
                    "within-case SD [95 % CI]": [
                        f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
                        for v, lo, hi in zip(
                            noise["within_sd"], noise["within_sd_ci_lower"], noise["within_sd_ci_upper"]
                        )
                    ]
                }
            )[["model", "key", "n_cases", "epochs", "mean", "within-case SD [95 % CI]"]],
            csv(noise, "epoch_noise.csv"),
            "Per score key, the SD of one epoch's value around its case's mean over epochs (the root of the mean "
            "within-case variance, over the n_cases cases scored in two or more epochs; 95 % case-bootstrap "
            "interval): the noise of a single run, measured.",
        )
    table = flips(verdicts(repeated), pass_k)
    if table.empty:
        return
    shown = table.assign(
        **{
            "flips [95 % CI]": [
                f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
                for v, lo, hi in zip(table["flip_share"], table["flip_ci_lower"], table["flip_ci_upper"])
            ]
        }
    )
    shown["pass^1 [95 % CI]"] = [
        f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        for v, lo, hi in zip(table["pass_1"], table["pass_1_ci_lower"], table["pass_1_ci_upper"])
    ]
    columns = ["model", "verdict", "unit", "n_cases", "n_units", "epochs", "pass^1 [95 % CI]", "flips [95 % CI]"]
    if pass_k is not None:
        shown[f"pass^{pass_k} [95 % CI]"] = [
            f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
            for v, lo, hi in zip(table["pass_k"], table["pass_k_ci_lower"], table["pass_k_ci_upper"])
        ]
        columns.append(f"pass^{pass_k} [95 % CI]")
    page.table(
        shown[columns],
        csv(table, "epoch_flips.csv"),
        "Per yes/no verdict (a case-level key, or each item of a checklist or rubric): the share of the n_units "
        "units judged in two or more epochs whose verdict is not the same in every epoch (95 % interval: Wilson "
        "for one unit per case, else a case bootstrap); pass^1: the share of the units' judged epochs with the "
        "good outcome (no failure; yes / met; 95 % case-bootstrap interval)"
        + (
            f"; pass^{pass_k}: the chance that {pass_k} epochs all give it (Inspect's pass_k reducer per unit, "
            "mean over cases)."
            if pass_k is not None
            else "; --pass-k K adds pass^K."
        ),
    )
