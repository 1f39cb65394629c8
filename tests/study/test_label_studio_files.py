"""``bedside study label-studio export`` / ``import`` without a server (the round trip through a real Label
Studio: test_label_studio.py): the labelling config has one control per item position and side, each with its
item's scale; an export's answers map back to the study's ratings, and a bad one is named in one line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from bedside.discharge.records import TOPIC_CHECKLIST_IDS
from bedside.study.label_studio import slots
from bedside.study.ratings import Study
from tests.conftest import bedside_command
from tests.study.test_build import build


def export(runs: list[str], tmp_path: Path) -> tuple[Path, Path]:
    assert build(runs, tmp_path / "study")[0] == 0
    done = bedside_command("study", "label-studio", "export", str(tmp_path / "study"), "--out", str(tmp_path / "ls"))
    assert done.returncode == 0, done.stdout
    return tmp_path / "study", tmp_path / "ls"


def test_the_config_has_each_items_scale_beside_each_side(runs: list[str], tmp_path: Path) -> None:
    study, ls = export(runs, tmp_path)
    root = ET.fromstring((ls / "label_config.xml").read_text())
    controls = {c.get("name"): [x.get("value") for x in c] for c in root.iter("Choices")}
    n = 4 + len(TOPIC_CHECKLIST_IDS)
    assert len(controls) == 2 * (n + 1) + 1
    assert controls["left__0"] == ["1", "2", "3", "4", "5"] and controls["right__4"] == ["yes", "no"]
    assert controls["preference"][0] == "left, strongly" and controls["left__guess"] == [
        "model",
        "physician",
        "cannot tell",
    ]
    assert [i.id for i in slots(Study.load(study))][:5] == [
        "naturalness",
        "responsiveness",
        "clarity",
        "clinical_relevance",
        "Q1",
    ]
    tasks = json.loads((ls / "ann.tasks.json").read_text())
    assert (
        tasks[0]["data"]["left__q0"].startswith("Naturalness")
        and tasks[0]["data"]["left_turns"][0]["speaker"] == "Educator"
    )


def test_an_export_maps_back_and_a_bad_answer_is_named(runs: list[str], tmp_path: Path) -> None:
    study, ls = export(runs, tmp_path)
    tasks = json.loads((ls / "ann.tasks.json").read_text())
    first = tasks[0]["data"]
    result = [
        {"from_name": "left__0", "to_name": "left", "type": "choices", "value": {"choices": ["5"]}},
        {"from_name": "right__guess", "to_name": "right", "type": "choices", "value": {"choices": ["physician"]}},
        {"from_name": "preference", "to_name": "left", "type": "choices", "value": {"choices": ["right"]}},
    ]
    exported = [{"id": 1, "data": first, "annotations": [{"result": result, "was_cancelled": False}]}]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(exported))
    done = bedside_command("study", "label-studio", "import", str(study), str(path), "--out", str(tmp_path / "r.csv"))
    assert done.returncode == 0, done.stdout
    rows = (tmp_path / "r.csv").read_text().splitlines()
    assert rows[1:] == [
        f"ann,{first['task']},{first['left_transcript']},naturalness,5",
        f"ann,{first['task']},{first['right_transcript']},guess,physician",
        f"ann,{first['task']},,preference,right",
    ]
    result[0]["value"]["choices"] = ["9"]
    path.write_text(json.dumps(exported))
    done = bedside_command("study", "label-studio", "import", str(study), str(path), "--out", str(tmp_path / "x.csv"))
    assert done.returncode == 2 and not (tmp_path / "x.csv").exists()
    assert done.stdout.strip() == (
        f"bedside study label-studio import: {path}: task 1 ({first['task']}), control 'left__0': field 'value': "
        "'9' is not on the scale of naturalness (1 / 2 / 3 / 4 / 5)"
    )
