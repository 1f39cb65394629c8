"""A built study as the analysis reads it (:class:`Study`: its design and its key) and raters' ratings, checked
against it (:func:`read_ratings`: ratings files, and the journals of bedside's rating page in the study folder):
one line naming the file, the record and the field for an unknown rater, task, transcript or item, a value outside
its item's scale, or a rating given twice."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from bedside.study.build import PHYSICIAN, RATING_COLUMNS, StudyError
from bedside.study.items import GUESS, PREFERENCE, Item
from bedside.study.journal import journal_records


@dataclass
class Study:
    folder: Path
    design: dict[str, Any]
    key: dict[str, Any]

    @classmethod
    def load(cls, folder: str | Path) -> Study:
        folder = Path(folder)
        try:
            design = json.loads((folder / "study.json").read_text(encoding="utf-8"))
            key = json.loads((folder / "key" / "key.json").read_text(encoding="utf-8"))
        except FileNotFoundError as ex:
            raise StudyError(
                f"{folder}: not a study folder ({ex.filename} missing; bedside study build writes one)"
            ) from ex
        return cls(folder, design, key)

    @cached_property
    def tasks(self) -> dict[str, dict[str, Any]]:
        return {t["code"]: t for t in self.design["tasks"]}

    @cached_property
    def items(self) -> dict[str, dict[str, Item]]:
        """case code -> item id -> item (the case's own items)."""
        return {case: {i["id"]: Item.from_dict(i) for i in items} for case, items in self.design["cases"].items()}

    def condition(self, transcript: str) -> str:
        return str(self.key["transcripts"][transcript]["condition"])

    def is_physician(self, condition: str) -> bool:
        return bool(self.key["conditions"][condition]["kind"] == PHYSICIAN)

    @property
    def conditions(self) -> list[str]:
        return sorted(self.key["conditions"])


#: the ratings frame's columns: what was rated, by whom, the value as given and its number, and from the key the
#: case, the condition of the transcript (absolute items) or of the left and right transcripts (the preference)
FRAME_COLUMNS = (
    "rater",
    "task",
    "transcript",
    "item",
    "value",
    "number",
    "measure",
    "level",
    "case",
    "condition",
    "left",
    "right",
    "source",
)


def check(study: Study, record: dict[str, str], where: str) -> dict[str, Any] | None:
    """The checked row of one rating (None: no value given yet); :class:`StudyError` naming ``where`` and the field."""
    rater, code, transcript, item_id, value = (str(record.get(c) or "").strip() for c in RATING_COLUMNS)
    if rater not in study.design["raters"]:
        raise StudyError(
            f"{where}: field 'rater': unknown rater {rater!r} (the study's: {', '.join(study.design['raters'])})"
        )
    task = study.tasks.get(code)
    if task is None or task["rater"] != rater:
        raise StudyError(f"{where}: field 'task': {code!r} is not a task of rater {rater!r}")
    if item_id == PREFERENCE.id:
        item = PREFERENCE
        if transcript:
            raise StudyError(f"{where}: field 'transcript': the preference is of the task's pair; leave it empty")
    else:
        if transcript not in (task["left"], task["right"]):
            raise StudyError(
                f"{where}: field 'transcript': {transcript!r} is not in task {code} ({task['left']}, {task['right']})"
            )
        found = GUESS if item_id == GUESS.id else study.items[task["case"]].get(item_id)
        if found is None:
            raise StudyError(f"{where}: field 'item': unknown item {item_id!r} for case {task['case']}")
        item = found
    if not value:
        return None
    try:
        number = item.value(value)
    except ValueError as ex:
        raise StudyError(f"{where}: field 'value': {ex}") from ex
    return {
        "rater": rater,
        "task": code,
        "transcript": transcript,
        "item": item_id,
        "value": value,
        "number": number,
        "measure": item.measure,
        "level": item.level,
        "case": task["case"],
        "condition": study.condition(transcript) if transcript else "",
        "left": study.condition(task["left"]),
        "right": study.condition(task["right"]),
        "source": where,
    }


def frame(study: Study, records: Iterable[tuple[str, dict[str, str]]]) -> pd.DataFrame:
    """The checked ratings of ``(where, record)`` pairs; a rating given twice is refused naming both places."""
    rows: list[dict[str, Any]] = []
    first: dict[tuple[str, str, str, str], str] = {}
    for where, record in records:
        row = check(study, record, where)
        if row is None:
            continue
        key = (row["rater"], row["task"], row["transcript"], row["item"])
        if key in first:
            raise StudyError(f"{where}: rating given twice (also {first[key]}): {', '.join(key)}")
        first[key] = where
        rows.append(row)
    return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))


def read_ratings(study: Study, paths: Sequence[str | Path] = (), journals: bool = True) -> pd.DataFrame:
    """Every rating of the ratings CSV files ``paths`` (the templates filled in) and, with ``journals``, of the
    raters' journals of bedside's rating page (:mod:`bedside.study.journal`: each task's latest answers), checked
    (module docstring): a rating in a file and in a journal is a rating given twice."""

    def records() -> Iterable[tuple[str, dict[str, str]]]:
        for path in paths:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                absent = [c for c in RATING_COLUMNS if c not in (reader.fieldnames or [])]
                if absent:
                    raise StudyError(
                        f"{path}: line 1: field {absent[0]!r} missing (columns: {', '.join(RATING_COLUMNS)})"
                    )
                for record in reader:
                    yield f"{path}: line {reader.line_num}", record
        if journals:
            yield from journal_records(study.folder, study.design["raters"])

    return frame(study, records())


def template_paths(study: Study) -> list[Path]:
    """The raters' templates in the study folder (``raters/<rater>/ratings.csv``), where raters filled them in."""
    return [study.folder / "raters" / rater / "ratings.csv" for rater in study.design["raters"]]


def read_study(folder: str | Path, paths: Sequence[str | Path] = ()) -> tuple[Study, pd.DataFrame]:
    """The study at ``folder`` and its ratings, read from ``paths`` (none: the raters' templates in the folder) and
    from the rating page's journals in the folder, checked (module docstring); :class:`StudyError` also when no
    rating is given yet."""
    study = Study.load(folder)
    paths = list(paths) or template_paths(study)
    try:
        ratings = read_ratings(study, paths)
    except FileNotFoundError as ex:
        raise StudyError(f"{ex.filename}: no such ratings file") from ex
    if ratings.empty:
        raise StudyError(f"{', '.join(str(p) for p in paths)}: no rating given yet (nor on the rating page)")
    return study, ratings


def truth(study: Study, condition: str) -> float:
    """The blinding check's right answer for a condition (:data:`GUESS`'s number: physician 1, model 0)."""
    return GUESS.value(PHYSICIAN if study.is_physician(condition) else "model")


def is_missing(number: float) -> bool:
    return isinstance(number, float) and math.isnan(number)
