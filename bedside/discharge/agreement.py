"""``bedside agreement --annotations FILE.csv LOG...``: LLM judge vs physicians, and physician vs
physician (DischargeBench paper, Table 5).

**Annotation CSV** (UTF-8, header row; lines starting with ``#`` are comments), one rating per row:

==============  ===========================================================================
``case_id``     the sample id in the log (the DischargeBench case id)
``annotator``   who rated (any name: ``phys_a``, ``phys_b``, …)
``item``        a score key: ``naturalness``, ``responsiveness``, ``clarity``,
                ``clinical_relevance`` (1–5 Likert); a Topic Checklist question id ``Q1``,
                ``Q2.1``, … (``yes``/``no``, also ``1``/``0``, ``true``/``false``); a
                comprehension item ``q1`` … ``q6`` (``correct`` / ``partially correct`` /
                ``incorrect``, or ``1`` / ``0.5`` / ``0``); any other numeric score key of the
                log (e.g. ``tcs``, ``comprehension``: continuous, Spearman only)
``value``       the rating
``model``       optional: the model under test (label or model name), needed only when the
                same case id is in several logs
``epoch``       optional (default 1)
==============  ===========================================================================

**Statistics**, per axis, each with n (rated pairs): Cohen's κ
(:func:`sklearn.metrics.cohen_kappa_score`) — quadratic-weighted for the 1–5 Likert axes,
unweighted for the yes/no checklist items (pooled over the case's questions into the ``tcs``
axis), and **linear**-weighted for the three-level comprehension grades (incorrect < partially
correct < correct, pooled over q1…q6 into the ``comprehension`` axis; ``--comprehension-weights
quadratic`` to change it) — plus Spearman's ρ (:func:`scipy.stats.spearmanr`) and the share of exact
agreement. Continuous items get ρ only. κ and ρ come with a 95 % confidence interval from a
bootstrap over **cases** (:func:`scipy.stats.bootstrap`, percentile method, 1,000 resamples, seed
0; pooled rows only, not the ``--by-item`` rows): a resample draws cases with replacement and
keeps all their rated pairs, because the pairs of one case (its checklist questions, its six
comprehension items, several physicians) are not independent. The interval is NaN when fewer than
2 cases are rated or when a resample's statistic is undefined (e.g. every rating the same).

- *judge vs physician*: every physician rating paired with the judge's value for the same case and
  item (from the log: the score values, and the checklist answers in the ``topic_checklist`` score
  metadata), pooled over cases and physicians;
- *physician vs physician*: for every pair of physicians, the (case, item) both rated, pooled over
  the pairs of physicians (with two physicians: their shared cases).

**Conversation-quality mean** (the paper's headline agreement figure, Table 5: "averaged across the
four 1–5 Likert sub-axes"): for each comparison, a row ``conversation_quality (mean of 4 axes)``
whose κ and ρ are the means of the four axes' values; its interval is the same case bootstrap of
that mean (each resample recomputes the four axes on the drawn cases and averages them); n and
n_cases sum / count over the four axes.

**Pairs.** By default (``--pairs shared``) both comparisons use the same (case, item) pairs: those
the judge answered and, with several physicians, at least two physicians rated. Packets ask every
checklist question and every comprehension item, but the judge answers only the questions that
apply to the case and leaves an item with a "not applicable" reference ungraded; pooling those
extra, mostly agreeing physician pairs would raise physician-physician κ against a judge that never
saw them. ``--pairs all`` gives each comparison every pair it has. ``n`` is each row's number of
rated pairs; the command prints a line stating the rule.

**Weighting** (bedside's choice: the paper says only "weighted κ"). Every row names its κ weighting
(``kappa_weights``): ``--likert-weights`` for the Likert axes and their mean (default
``quadratic``), ``none`` = unweighted for the yes/no checklist (with two levels every weighting
gives the same κ), ``--comprehension-weights`` for comprehension (default ``linear``); each takes
``none``, ``linear`` or ``quadratic``. The command prints a line stating them under the table.

``--by-item`` adds one row per checklist question and comprehension item. Numbers are printed with
3 decimals, as in the paper.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import spearmanr

from bedside.intervals import AGREEMENT_RESAMPLES, agreement_interval
from bedside.reporting.load import LoadedLog, load

LIKERT = ("naturalness", "responsiveness", "clarity", "clinical_relevance")
COMPREHENSION_ITEMS = ("q1", "q2", "q3", "q4", "q5", "q6")
CHECKLIST_ID = re.compile(r"^Q\d+(\.\d+)?$")
YES_NO = {"yes": 1, "no": 0, "true": 1, "false": 0, "1": 1, "0": 0, "1.0": 1, "0.0": 0, "y": 1, "n": 0}
GRADES = {
    "correct": 2,
    "partially correct": 1,
    "partially_correct": 1,
    "partial": 1,
    "incorrect": 0,
    "1": 2,
    "1.0": 2,
    "0.5": 1,
    "0": 0,
    "0.0": 0,
}
REQUIRED = ("case_id", "annotator", "item", "value")


@dataclass(frozen=True)
class Axis:
    """How an item is compared: its axis name, kind and κ weighting (None: unweighted)."""

    name: str
    kind: str  # likert | binary | ordinal3 | continuous
    weights: str | None
    labels: tuple[int, ...] | None  # the categorical scale; None: continuous

    @property
    def scale(self) -> tuple[int, ...]:
        """The categorical scale; ``TypeError`` for a continuous axis, which has none."""
        if self.labels is None:
            raise TypeError(f"{self.name}: a continuous axis has no categorical scale")
        return self.labels

    def positions(self, values: np.ndarray) -> npt.NDArray[np.intp]:
        """Each rating's position on the scale (its row or column of a confusion matrix)."""
        codes = {v: k for k, v in enumerate(self.scale)}
        return np.asarray([codes[int(v)] for v in values], dtype=np.intp)


def normalise_item(item: str) -> str:
    text = str(item).strip()
    if re.match(r"^[qQ]\d+([._\-]\d+)?$", text) and (text[0] == "Q" or re.search(r"[._\-]", text)):
        return re.sub(r"[_\-]", ".", text.upper())  # checklist ids: "q2_1", "Q2-1" -> "Q2.1"
    return text.lower() if text.lower() in (*LIKERT, *COMPREHENSION_ITEMS) else text


def axis_of(item: str, comprehension_weights: str | None = "linear", likert_weights: str | None = "quadratic") -> Axis:
    if item in LIKERT:
        return Axis(item, "likert", likert_weights, (1, 2, 3, 4, 5))
    if CHECKLIST_ID.match(item):
        return Axis("tcs", "binary", None, (0, 1))
    if item in COMPREHENSION_ITEMS:
        return Axis("comprehension", "ordinal3", comprehension_weights, (0, 1, 2))
    return Axis(item, "continuous", None, None)


def code(value: object, axis: Axis) -> float:
    """A rating as the number the statistics use (NaN if blank); ``ValueError`` if not on the scale."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
        return math.nan
    text = str(value).strip().lower()
    if axis.kind == "likert":
        number = float(text)
        if number not in axis.scale:
            raise ValueError(f"{axis.name}: {value!r} is not a 1-5 rating")
        return number
    if axis.kind == "binary":
        if text not in YES_NO:
            raise ValueError(f"checklist item: {value!r} is not yes/no")
        return float(YES_NO[text])
    if axis.kind == "ordinal3":
        if text not in GRADES:
            raise ValueError(f"comprehension item: {value!r} is not correct / partially correct / incorrect")
        return float(GRADES[text])
    return float(text)


def _line_numbers(path: str) -> list[int]:
    """The file line of each data row (after the header; comment and blank lines skipped, as pandas reads it)."""
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, skipinitialspace=True)
        lines = [
            reader.line_num
            for row in reader
            if row and any(cell.strip() for cell in row) and not row[0].lstrip().startswith("#")
        ]
    return lines[1:]


def read_annotations(path: str) -> pd.DataFrame:
    """The annotation CSV (module docstring), every rating checked: ``ValueError`` naming the file, its line
    and the field of the first one that is not on its item's scale (or an empty required field)."""
    frame = pd.read_csv(path, comment="#", dtype=str, skipinitialspace=True)
    frame.columns = [c.strip() for c in frame.columns]
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected {', '.join(REQUIRED)} (optional model, epoch)")
    lines = _line_numbers(path)
    if len(lines) != len(frame):
        lines = [n + 2 for n in range(len(frame))]  # a quoted field across lines: rows counted from the header

    def where(row: int, field: str) -> str:
        return f"{path}, line {lines[row]}, field {field!r}"

    for row, record in enumerate(frame.to_dict("records")):
        for field in ("case_id", "annotator", "item"):
            if not isinstance(record[field], str) or not record[field].strip():
                raise ValueError(f"{where(row, field)}: empty; every rating needs {', '.join(REQUIRED[:3])}")
        epoch = record.get("epoch")
        if "epoch" in frame and not (isinstance(epoch, str) and epoch.strip().isdigit()):
            raise ValueError(f"{where(row, 'epoch')}: {epoch!r} is not an epoch number (1, 2, ...)")
        item = normalise_item(record["item"])
        try:
            code(record["value"], axis_of(item))
        except ValueError as error:
            message = str(error) if "float" not in str(error) else f"{record['value']!r} is not a number"
            raise ValueError(
                f"{where(row, 'value')} (case {record['case_id'].strip()}, item {item}): {message}"
            ) from None
    frame["case_id"] = frame["case_id"].str.strip()
    frame["annotator"] = frame["annotator"].str.strip()
    frame["item"] = frame["item"].map(normalise_item)
    frame["epoch"] = frame["epoch"].astype(int) if "epoch" in frame else 1
    if "model" not in frame:
        frame["model"] = None
    duplicated = frame.duplicated(["case_id", "annotator", "item", "model", "epoch"], keep=False)
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise ValueError(
            f"{path}: {first['annotator']} rated {first['item']} of case {first['case_id']} more than once"
        )
    return frame


def judge_values(logs: Sequence[LoadedLog]) -> pd.DataFrame:
    """The judge's value for every (model, case, epoch, item): score values (Likert axes,
    comprehension items, any numeric key) and the checklist answers of ``topic_checklist``."""
    rows = []
    for item in logs:
        for sample in item.log.samples or []:
            base = {
                "label": item.label,
                "model_name": item.log.eval.model,
                "case_id": str(sample.id),
                "epoch": sample.epoch,
            }
            for scorer, score in (sample.scores or {}).items():
                values = score.value if isinstance(score.value, dict) else {scorer: score.value}
                for key, value in values.items():
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        rows.append({**base, "item": key, "judge": float(value)})
                answers = (score.metadata or {}).get("answers") if scorer == "topic_checklist" else None
                for qid, answer in (answers or {}).items():
                    rows.append({**base, "item": normalise_item(qid), "judge": float(bool(answer))})
    return pd.DataFrame(rows, columns=["label", "model_name", "case_id", "epoch", "item", "judge"])


def attach_judge(annotations: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """Each annotation with the judge's value for the same case and item (NaN if the judge has none)."""
    out = []
    for _, row in annotations.iterrows():
        match = judge[
            (judge["case_id"] == row["case_id"]) & (judge["epoch"] == row["epoch"]) & (judge["item"] == row["item"])
        ]
        if row["model"] is not None and row["model"] == row["model"]:
            match = match[(match["label"] == row["model"]) | (match["model_name"] == row["model"])]
        labels = match["label"].unique()
        if len(labels) > 1:
            raise ValueError(
                f"case {row['case_id']} is in several logs ({', '.join(labels)}): add a 'model' column "
                "to the annotations"
            )
        out.append(float(match["judge"].iloc[0]) if len(match) else math.nan)
    return annotations.assign(judge=out)


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


PAIRS = ("shared", "all")


def shared_items(rated: pd.DataFrame) -> pd.Series:
    """Whether each rating's (case, item) is one both comparisons see: the judge answered it and, when
    there are several physicians, at least two physicians rated it (module docstring, *Pairs*)."""
    keys = pd.Series([f"{k}|{i}" for k, i in zip(case_keys(rated), rated["item"])], index=rated.index)
    judged = rated["judge"].notna()
    physicians = rated[rated["physician"].notna()].groupby(keys[rated["physician"].notna()])["annotator"].nunique()
    if rated["annotator"].nunique() < 2:
        return judged
    return judged & keys.map(physicians).fillna(0).ge(2)


def agreement_table(
    annotations: pd.DataFrame,
    judge: pd.DataFrame,
    comprehension_weights: str | None = "linear",
    by_item: bool = False,
    likert_weights: str | None = "quadratic",
    pairs: str = "shared",
) -> pd.DataFrame:
    """One row per (axis[, item], comparison): n, κ (and its weighting), ρ, exact agreement.
    ``pairs="shared"``: both comparisons on the same (case, item) pairs; ``"all"``: each on every pair it has."""
    if pairs not in PAIRS:
        raise ValueError(f"pairs must be one of {PAIRS}, not {pairs!r}")
    rated = attach_judge(annotations, judge)
    rated["axis"] = pd.Series(
        [axis_of(i, comprehension_weights, likert_weights) for i in rated["item"]], index=rated.index, dtype=object
    )
    rated["physician"] = [code(v, a) for v, a in zip(rated["value"], rated["axis"])]
    rated["judge"] = [
        code(v, a) if v == v and a.kind == "ordinal3" else v for v, a in zip(rated["judge"], rated["axis"])
    ]
    if pairs == "shared":
        rated = rated[shared_items(rated)]
    rated["axis_name"] = [a.name for a in rated["axis"]]
    groups: list[tuple[str, str, pd.DataFrame]] = [
        (str(name), "all", part) for name, part in rated.groupby("axis_name", sort=False)
    ]
    if by_item:
        groups += [
            (part["axis_name"].iloc[0], str(item), part)
            for item, part in rated.groupby("item", sort=False)
            if part["axis"].iloc[0].kind in ("binary", "ordinal3")
        ]
    rows = []
    likert: dict[str, list[tuple[Axis, list, list, list]]] = {}  # comparison -> per Likert axis (axis, x, y, cases)
    annotators = sorted(rated["annotator"].unique())
    for name, item, part in groups:
        axis = part["axis"].iloc[0]
        weights = axis.weights or ("none" if axis.kind != "continuous" else "")
        judged = statistics(part["judge"], part["physician"], axis, cases=case_keys(part) if item == "all" else None)
        rows.append(
            {"axis": name, "item": item, "comparison": "judge vs physician", "kappa_weights": weights, **judged}
        )
        if name in LIKERT and item == "all":
            likert.setdefault("judge vs physician", []).append(
                (axis, part["judge"].tolist(), part["physician"].tolist(), case_keys(part))
            )
        first, second, shared_cases = [], [], []
        for a, b in itertools.combinations(annotators, 2):
            left = part[part["annotator"] == a].set_index(["case_id", "epoch", "item", "model"], drop=False)
            right = part[part["annotator"] == b].set_index(["case_id", "epoch", "item", "model"], drop=False)
            shared = left.index.intersection(right.index)
            first += left.loc[shared, "physician"].tolist()
            second += right.loc[shared, "physician"].tolist()
            shared_cases += case_keys(left.loc[shared])
        rows.append(
            {
                "axis": name,
                "item": item,
                "comparison": "physician vs physician",
                "kappa_weights": weights,
                **statistics(first, second, axis, cases=shared_cases if item == "all" else None),
            }
        )
        if name in LIKERT and item == "all":
            likert.setdefault("physician vs physician", []).append((axis, first, second, shared_cases))
    for comparison, parts in likert.items():
        rows.append(
            {
                "axis": CQ_MEAN,
                "item": "all",
                "comparison": comparison,
                "kappa_weights": likert_weights or "none",
                **mean_statistics(parts),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "axis",
            "item",
            "comparison",
            "n",
            "n_cases",
            "kappa",
            "kappa_low",
            "kappa_high",
            "kappa_weights",
            "rho",
            "rho_low",
            "rho_high",
            "rho_p",
            "exact_agreement",
        ],
    )


CQ_MEAN = "conversation_quality (mean of 4 axes)"


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


WEIGHTS_NOTE = (
    "kappa weighting (bedside's choice; the paper says only 'weighted kappa'): {likert} for the 1-5 Likert axes "
    "(naturalness, responsiveness, clarity, clinical_relevance) and their mean; none (unweighted) for the yes/no "
    "checklist (tcs); {comprehension} for the three comprehension grades; continuous keys: Spearman only"
)
PAIRS_NOTE = {
    "shared": "pairs: both comparisons on the same (case, item) pairs (the judge answered it and two or more "
    "physicians rated it); n = rated pairs of each row",
    "all": "pairs: each comparison on every pair it has (physician vs physician also pools items the judge never "
    "answered); n = rated pairs of each row",
}
WEIGHTS = {"none": None, "linear": "linear", "quadratic": "quadratic"}


def case_keys(part: pd.DataFrame) -> list[str]:
    """The case of each rating (a case is a sample: model, case id and epoch)."""
    return [f"{m}|{c}|{e}" for m, c, e in zip(part["model"], part["case_id"], part["epoch"])]


def run(args: argparse.Namespace) -> int:
    try:
        annotations = read_annotations(args.annotations)
        judged = judge_values(load(args.logs))
        table = agreement_table(
            annotations,
            judged,
            WEIGHTS[args.comprehension_weights],
            args.by_item,
            likert_weights=WEIGHTS[args.likert_weights],
            pairs=args.pairs,
        )
    except (ValueError, FileNotFoundError) as error:
        print(f"bedside agreement: {error}")
        return 2
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False, na_rep="–"))  # "–": not defined (e.g. no interval below 2 cases)
    print(WEIGHTS_NOTE.format(likert=args.likert_weights, comprehension=args.comprehension_weights))
    print(PAIRS_NOTE[args.pairs])
    unmatched = table.loc[(table["comparison"] == "judge vs physician") & (table["n"] == 0), "axis"].tolist()
    if unmatched:
        print(f"note: no judge value for axis/axes {unmatched} (case ids or items not in the logs?)")
    if args.csv:
        table.to_csv(args.csv, index=False)
    from bedside.discharge.calibrated import print_calibrated

    print_calibrated(annotations, judged)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``agreement`` sub-command (module docstring)."""
    parser = sub.add_parser(
        "agreement",
        help="judge-physician and physician-physician agreement (kappa, Spearman, n)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("logs", nargs="+", metavar="LOG", help="eval logs (or directories) holding the judged cases")
    parser.add_argument("--annotations", required=True, metavar="FILE.csv", help="physician annotations (format above)")
    parser.add_argument(
        "--likert-weights",
        choices=tuple(WEIGHTS),
        default="quadratic",
        help="kappa weighting of the four 1-5 Likert axes (default quadratic; bedside's choice)",
    )
    parser.add_argument(
        "--comprehension-weights",
        choices=tuple(WEIGHTS),
        default="linear",
        help="kappa weighting of the three comprehension grades (default linear; bedside's choice)",
    )
    parser.add_argument(
        "--pairs",
        choices=PAIRS,
        default="shared",
        help="shared (default): judge-physician and physician-physician on the same (case, item) pairs; "
        "all: each comparison on every pair it has",
    )
    parser.add_argument(
        "--by-item", action="store_true", help="also one row per checklist question and comprehension item"
    )
    parser.add_argument("--csv", metavar="FILE", help="also write the table to this CSV file")
    parser.set_defaults(func=run)
