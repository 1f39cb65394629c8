"""The ratings ``bedside agreement`` compares (:mod:`bedside.discharge.agreement`, whose docstring gives
the annotation CSV's format): the physicians' from the annotation file (:func:`read_annotations`, every
rating checked), the judge's from the logs (:func:`judge_values`), each item on its axis (:class:`Axis`:
its scale and κ weighting) and coded as the statistics use it (:func:`code`). The judge-calibrated
estimates (:mod:`bedside.discharge.calibrated`) read the same ratings."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from bedside import benchmarks
from bedside.reporting.load import LoadedLog

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
    return on_scale(float(text), axis.name)


def on_scale(number: float, key: str) -> float:
    """A continuous rating of score key ``key`` (e.g. ``tcs``), checked against the scale its scorer declares
    (:func:`bedside.benchmarks.score_key`; an undeclared key: any finite number); ``ValueError`` otherwise."""
    scale = benchmarks.score_key(key).scale
    low = -math.inf if scale.lower is None else scale.lower
    high = math.inf if scale.upper is None else scale.upper
    if not math.isfinite(number):
        raise ValueError(f"{key}: {number} is not a finite number")
    if not low <= number <= high:
        raise ValueError(f"{key}: {number:g} is outside its scale, {low:g} to {high:g}")
    return number


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
        if row["model"] is not None and row["model"] == row["model"]:  # a label first, else a model name
            labelled = match[match["label"] == row["model"]]
            match = labelled if len(labelled) else match[match["model_name"] == row["model"]]
        labels = match["label"].unique()
        if len(labels) > 1:
            raise ValueError(
                f"case {row['case_id']} is in several logs ({', '.join(labels)}): add a 'model' column "
                "to the annotations"
            )
        out.append(float(match["judge"].iloc[0]) if len(match) else math.nan)
    return annotations.assign(judge=out)
