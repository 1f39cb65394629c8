"""Judge-calibrated headline estimates (``bedside agreement --annotations ...``): for every headline
metric, the prediction-powered estimate (Angelopoulos et al., 2023, with power tuning; the maintained
reference implementation, :func:`ppi_py.ppi_mean_ci`) of the mean the physicians would have given:
the judge's values on every case, corrected by the physician - judge difference on the annotated
cases, with its 95 % interval, next to the judge-only mean (and its interval) and the judge's measured
bias (mean of judge - physician on the annotated cases).

Per case, the physician value of a metric is the mean over the physicians who rated it: a Likert axis
directly; ``tcs`` as the share of "yes" over the checklist questions the judge answered for that case;
``comprehension`` as the mean grade (incorrect 0, partially correct 0.5, correct 1) over the items the
judge graded. The estimate assumes the annotated cases are a random sample of the judged ones. With
fewer than :data:`MIN_ANNOTATED` annotated cases no interval is given: the row says so. Both intervals
(the judge-only t interval and ppi-python's) are intersected with the metric's declared scale (1-5 for a
Likert axis, [0, 1] for ``tcs`` and ``comprehension``), as every bedside interval stays inside its
scale: the mean lies in the scale, so the intersection covers it whenever the interval does; the
calibrated point estimate (the judge's mean plus a correction, which can leave the scale) is cut to it too.

Power tuning weighs the judge by cov(physician, judge) / var(judge), which is 0 / 0 when the judge gives
every case the same score (ppi-python then returns NaN). Such a judge carries no information about the
cases, and the estimate is the physicians' own mean with its classical interval (ppi-python with
``lam=1``, which then equals the classical estimate); the row's note says so.

The same table is printed by ``bedside agreement`` (:func:`print_calibrated`) and shown in DischargeBench's
section of ``bedside report --annotations FILE`` (:func:`section`, named by its tools' ``calibrated``;
``calibrated.csv``), on the samples of the population its Table 1 averages.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from bedside import benchmarks
from bedside.discharge.ratings import LIKERT, axis_of, code, judge_values, normalise_item
from bedside.discharge.ratings import read_annotations as read_annotations  # the file format bedside report reads
from bedside.intervals import UNBOUNDED, Scale, clip

#: the headline metrics that can be calibrated (DischargeBench Table 1's judge-scored columns)
HEADLINE = (*LIKERT, "tcs", "comprehension")
#: fewest annotated cases for an interval
MIN_ANNOTATED = 10
TOO_FEW = "too few annotated cases for an interval (n_annotated < {minimum})"
CONSTANT_JUDGE = (
    "the judge gave every case {value:g}, so this is the physicians' own mean: "
    "the classical estimate (ppi-python, lam=1)"
)


def physician_case_values(annotations: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """One row per (case key, metric): the physicians' mean value, on the judge's scale."""
    rows = []
    for _, r in annotations.iterrows():
        item = normalise_item(r["item"])
        axis = axis_of(item)
        metric = axis.name if axis.kind in ("likert", "binary", "ordinal3") else item
        if metric not in HEADLINE:
            continue
        value = code(r["value"], axis)
        if math.isnan(value):
            continue
        if axis.kind == "ordinal3":
            value /= 2  # 0 / 0.5 / 1, as the judge's items
        if axis.kind != "likert" and not _judged(judge, r, item):
            continue  # only the questions / items the judge answered for this case
        rows.append({"key": _key(r["case_id"], r["epoch"]), "annotator": r["annotator"], "metric": metric, "v": value})
    frame = pd.DataFrame(rows, columns=["key", "annotator", "metric", "v"])
    per_annotator = frame.groupby(["key", "metric", "annotator"])["v"].mean().reset_index()
    return per_annotator.groupby(["key", "metric"])["v"].mean().rename("physician").reset_index()


def _key(case_id: Any, epoch: Any) -> str:
    return f"{case_id}|{int(epoch)}"


def _judged(judge: pd.DataFrame, r: pd.Series, item: str) -> bool:
    match = judge[(judge["case_id"] == r["case_id"]) & (judge["epoch"] == int(r["epoch"])) & (judge["item"] == item)]
    return bool(len(match)) and not match["judge"].isna().all()


def judge_interval(values: np.ndarray, alpha: float = 0.05) -> tuple[float, tuple[float, float]]:
    """The judge-only mean and its t interval."""
    from scipy import stats

    if len(values) < 2:
        return (float(np.mean(values)) if len(values) else math.nan), (math.nan, math.nan)
    half = float(stats.t.ppf(1 - alpha / 2, len(values) - 1) * stats.sem(values))
    mean = float(np.mean(values))
    return mean, (mean - half, mean + half)


def estimate(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_unannotated: np.ndarray,
    alpha: float = 0.05,
    scale: Scale = UNBOUNDED,
) -> dict[str, Any]:
    """PPI mean and interval from the annotated cases (physician ``y``, judge ``yhat``) and the judge on
    the other cases; the judge-only mean and interval (over all cases) and the judge's bias; both
    intervals and the calibrated mean inside ``scale``. ``note``: why there is no interval (below
    :data:`MIN_ANNOTATED` annotated cases; none without unannotated cases either), or that a judge of one
    score gave the classical estimate (module docstring)."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    n, big_n = len(y), len(yhat_unannotated)
    judge_mean, bounds = judge_interval(np.concatenate([yhat, yhat_unannotated]), alpha)
    lower, upper = clip(*bounds, scale)
    out = {
        "n_annotated": n,
        "n_judged": n + big_n,
        "judge_mean": judge_mean,
        "judge_ci_lower": lower,
        "judge_ci_upper": upper,
        "judge_bias": float(np.mean(yhat - y)) if n else math.nan,
        "calibrated": math.nan,
        "calibrated_ci_lower": math.nan,
        "calibrated_ci_upper": math.nan,
        "note": TOO_FEW.format(minimum=MIN_ANNOTATED) if n < MIN_ANNOTATED else "",
    }
    if n < MIN_ANNOTATED or big_n < 1:
        return out
    # power tuning weighs the judge by cov(physician, judge) / var(judge): 0 / 0 for a judge that gives every
    # case one score; such a judge carries no information, and lam=1 gives the classical estimate
    constant = bool(np.ptp(np.concatenate([yhat, yhat_unannotated])) == 0)
    lam = 1.0 if constant else None
    point = float(np.ravel(ppi_mean_pointestimate(y, yhat, yhat_unannotated, lam=lam))[0])
    lower, upper = ppi_mean_ci(y, yhat, yhat_unannotated, alpha=alpha, lam=lam)
    out["calibrated"] = clip(point, point, scale)[0]
    out["calibrated_ci_lower"], out["calibrated_ci_upper"] = clip(
        float(np.ravel(lower)[0]), float(np.ravel(upper)[0]), scale
    )
    out["note"] = CONSTANT_JUDGE.format(value=float(yhat[0])) if constant else ""
    return out


def calibrated_table(annotations: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, headline metric): the judge-only and the calibrated estimate (annotations with
    a ``model`` column count for that model's log only)."""
    rows = []
    judged = judge[judge["item"].isin(HEADLINE)].dropna(subset=["judge"])
    for (label, metric), part in judged.groupby(["label", "item"], sort=True):
        names = {label, *part["model_name"]}
        mine = annotations[[m is None or m != m or m in names for m in annotations["model"]]]
        physicians = physician_case_values(mine, judge[judge["label"] == label])
        keyed = part.assign(key=[_key(c, e) for c, e in zip(part["case_id"], part["epoch"])])
        values: pd.Series = keyed.groupby("key")["judge"].mean()
        paired = physicians[physicians["metric"] == metric].merge(
            values.rename("judge"), left_on="key", right_index=True
        )
        unannotated = values[~values.index.isin(paired["key"])]
        scale = benchmarks.score_key(str(metric)).scale
        row = estimate(paired["physician"].to_numpy(), paired["judge"].to_numpy(), unannotated.to_numpy(), scale=scale)
        row["n_judged"] = len(values)
        row["judge_mean"], bounds = judge_interval(values.to_numpy())
        row["judge_ci_lower"], row["judge_ci_upper"] = clip(*bounds, scale)
        rows.append({"model": label, "metric": metric, **row})
    return pd.DataFrame(rows)


COLUMNS = [
    "model",
    "metric",
    "n_judged",
    "judge_mean",
    "judge_ci_lower",
    "judge_ci_upper",
    "n_annotated",
    "judge_bias",
    "calibrated",
    "calibrated_ci_lower",
    "calibrated_ci_upper",
    "note",
]


def _interval(mean: float, lower: float, upper: float) -> str:
    return f"{mean:.3f} [{lower:.3f}, {upper:.3f}]"


def _calibrated(r: dict) -> str:
    if math.isnan(r["calibrated"]):
        return r["note"]
    estimate = _interval(r["calibrated"], r["calibrated_ci_lower"], r["calibrated_ci_upper"])
    return f"{estimate} ({r['note']})" if r["note"] else estimate


def _bias(r: dict) -> str:
    return "–" if math.isnan(r["judge_bias"]) else f"{r['judge_bias']:+.3f}"


def section(page: Any, benchmark: Any, logs: list, annotations: pd.DataFrame, csv: Any) -> None:
    """The judge-calibrated block of ``bedside report --annotations``: :func:`calibrated_table` of ``logs``
    (DischargeBench's, restricted to the population shown), shown per model and metric and written to
    ``calibrated.csv``."""
    table = calibrated_table(annotations, judge_values(logs)).reindex(columns=COLUMNS)
    page.heading("Judge-calibrated estimates (physician annotations)", 3)
    shown = pd.DataFrame(
        {
            "model": table["model"],
            "metric": table["metric"],
            "n_judged": table["n_judged"],
            "judge-only": [
                _interval(r["judge_mean"], r["judge_ci_lower"], r["judge_ci_upper"]) for r in table.to_dict("records")
            ],
            "n_annotated": table["n_annotated"],
            "judge bias": [_bias(r) for r in table.to_dict("records")],
            "calibrated": [_calibrated(r) for r in table.to_dict("records")],
        }
    )
    page.table(
        shown,
        csv(table, "calibrated.csv"),
        "Per model and headline metric: the judge-only mean [95 % t interval] over the n_judged judged cases, the "
        "judge's bias (judge − physician, mean over the n_annotated cases physicians rated) and the "
        "prediction-powered estimate of the physicians' mean [95 % CI] (ppi-python's ppi_mean_ci: the judge on "
        "every case corrected by the physician − judge difference on the annotated ones, which must be a random "
        f"sample of the judged cases), on the sessions Table 1 averages; both intervals cut to the metric's scale. "
        f"Below {MIN_ANNOTATED} annotated cases no interval is given. The same numbers as bedside agreement "
        "--annotations.",
    )
    if len(table) and not table["n_annotated"].any():
        page.note("No annotated case matches a judged case of these logs (case ids, epochs or the model column?).")


def print_calibrated(annotations: pd.DataFrame, judge: pd.DataFrame) -> None:
    """The ``bedside agreement`` block: per model and headline metric, judge-only vs calibrated."""
    table = calibrated_table(annotations, judge)
    if table.empty:
        return
    print("\njudge-calibrated headline estimates (prediction-powered inference, ppi-python; 95 % intervals):")
    lines = []
    for r in table.to_dict("records"):
        judge_only = _interval(r["judge_mean"], r["judge_ci_lower"], r["judge_ci_upper"])
        lines.append(
            f"  {r['model']}  {r['metric']}: judge-only {judge_only} (n={r['n_judged']}); judge bias {_bias(r)} "
            f"(n_annotated={r['n_annotated']}); calibrated {_calibrated(r)}"
        )
    print("\n".join(lines))
