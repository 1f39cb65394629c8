"""A clinician study as Label Studio projects, and their JSON exports read back as ratings.

    bedside study label-studio export STUDY --out ls/
    bedside study label-studio import STUDY ls-export-ann.json ... --out ratings.csv

``export`` writes ``label_config.xml`` (one labelling interface for every rater) and ``<rater>.tasks.json``, one
Label Studio task per study task of that rater, in their order: one project per rater (Label Studio's community
edition does not assign tasks to people), made with the config and the rater's tasks. A task holds what the
rater's packet holds and nothing more: the task, case and transcript codes, the two blinded transcripts (the case
as the clinician saw it, then the conversation in Label Studio's dialogue layout) and the questions of the case's
items; left and right as the design drew them.

The interface puts each item beside each transcript as single-choice buttons: item *i* of a case is the control
``left__i`` / ``right__i`` (the case's own question shown above it: a benchmark's items may differ between
cases, so the controls are slots, each with its scale), then ``left__guess`` / ``right__guess`` (the blinding
check) and ``preference`` below both. ``import`` maps each answer of each annotation of a Label Studio JSON export
back to (rater, task, transcript, item, value) and checks it as a ratings file is
(:mod:`bedside.study.ratings`); it writes the ratings CSV ``bedside study report`` reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from bedside.study.build import RATING_COLUMNS, StudyError
from bedside.study.items import GUESS, PREFERENCE, Item
from bedside.study.ratings import Study, frame

SIDES = ("left", "right")


def slots(study: Study) -> list[Item]:
    """The scale of each item position over every case (the first case's item at that position; cases must agree
    on the scale of a position)."""
    found: list[Item] = []
    for case, items in study.items.items():
        for i, item in enumerate(items.values()):
            if i == len(found):
                found.append(item)
            elif found[i].choices != item.choices:
                raise StudyError(
                    f"{study.folder}: case {case}: item {item.id} has scale {item.choices}, but item {found[i].id} "
                    f"at the same position has {found[i].choices}; Label Studio's controls are one scale per position"
                )
    return found


def _choices(name: str, to: str, item: Item) -> str:
    options = "".join(f"<Choice value={quoteattr(c)}/>" for c in item.choices)
    return f'<Choices name="{name}" toName="{to}" choice="single" showInLine="true">{options}</Choices>'


def label_config(study: Study) -> str:
    """The labelling interface (module docstring)."""
    columns = []
    for side in SIDES:
        controls = "".join(
            f'<Header value="${side}__q{i}" size="6"/>{_choices(f"{side}__{i}", side, item)}'
            for i, item in enumerate(slots(study))
        )
        columns.append(
            '<View style="flex: 1; min-width: 0">'
            f'<Header value="{side.capitalize()}: $' + f'{side}_transcript"/>'
            f'<Text name="{side}_context" value="${side}_context"/>'
            f'<Paragraphs name="{side}" value="${side}_turns" layout="dialogue" nameKey="speaker" textKey="text"/>'
            f"{controls}"
            f'<Header value={quoteattr(GUESS.question)} size="6"/>{_choices(f"{side}__{GUESS.id}", side, GUESS)}'
            "</View>"
        )
    return (
        "<View>"
        '<Header value="Task $task, case $case"/>'
        f'<View style="display: flex; gap: 1em">{"".join(columns)}</View>'
        f"<Header value={quoteattr(PREFERENCE.question)}/>{_choices(PREFERENCE.id, 'left', PREFERENCE)}"
        "</View>"
    )


def tasks(study: Study, rater: str) -> list[dict[str, Any]]:
    """The rater's Label Studio tasks (``{"data": ...}``), in the order of their packet."""
    out = []
    for task in study.design["tasks"]:
        if task["rater"] != rater:
            continue
        items = list(study.items[task["case"]].values())
        data: dict[str, Any] = {"task": task["code"], "case": task["case"], "rater": rater}
        data["item_ids"] = [item.id for item in items]
        for side in SIDES:
            code = task[side]
            shown = json.loads((study.folder / "transcripts" / f"{code}.json").read_text(encoding="utf-8"))
            data[f"{side}_transcript"] = code
            data[f"{side}_context"] = "\n\n".join(f"{c['title']}\n{c['text']}" for c in shown["context"])
            data[f"{side}_turns"] = shown["turns"]
            for i, item in enumerate(items):
                data[f"{side}__q{i}"] = item.question
        out.append({"data": data})
    return out


def export(study: Study, out: Path) -> list[Path]:
    """``label_config.xml`` and each rater's tasks into ``out``; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "label_config.xml"]
    written[0].write_text(label_config(study) + "\n", encoding="utf-8")
    for rater in study.design["raters"]:
        path = out / f"{rater}.tasks.json"
        path.write_text(json.dumps(tasks(study, rater), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written


def records(path: str | Path) -> Iterable[tuple[str, dict[str, str]]]:
    """(where, rating record) of every answer of a Label Studio JSON export (module docstring)."""
    try:
        exported = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as ex:
        raise StudyError(f"{path}: not a Label Studio JSON export ({ex})") from ex
    if not isinstance(exported, list):
        raise StudyError(f"{path}: not a Label Studio JSON export (a list of tasks)")
    for n, task in enumerate(exported):
        data = task.get("data") or {}
        code = str(data.get("task", ""))
        for annotation in task.get("annotations") or []:
            if annotation.get("was_cancelled"):
                continue
            for result in annotation.get("result") or []:
                name = str(result.get("from_name", ""))
                where = f"{path}: task {n + 1} ({code}), control {name!r}"
                side, _, slot = name.partition("__")
                if name == PREFERENCE.id:
                    transcript, item = "", PREFERENCE.id
                elif side in SIDES and slot == GUESS.id:
                    transcript, item = str(data.get(f"{side}_transcript", "")), GUESS.id
                elif side in SIDES and slot.isdigit() and int(slot) < len(data.get("item_ids") or []):
                    transcript, item = str(data.get(f"{side}_transcript", "")), str(data["item_ids"][int(slot)])
                else:
                    raise StudyError(f"{where}: field 'from_name': no item of the study's interface")
                chosen = (result.get("value") or {}).get("choices") or []
                if len(chosen) != 1:
                    raise StudyError(f"{where}: field 'value': {len(chosen)} choices, one expected")
                record = dict(zip(RATING_COLUMNS, (str(data.get("rater", "")), code, transcript, item, str(chosen[0]))))
                yield where, record


def import_ratings(study: Study, paths: Sequence[str | Path]) -> pd.DataFrame:
    """The checked ratings of Label Studio JSON exports (:func:`bedside.study.ratings.frame`)."""
    return frame(study, (r for path in paths for r in records(path)))
