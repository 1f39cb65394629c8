"""Case schema, loader errors and the shipped synthetic demo set."""

from __future__ import annotations

import json

import pytest
from inspect_ai.util import Store

from bedside.discharge.records import ICD_CHAPTER_LABELS, TOPIC_CHECKLIST_IDS, CaseFileError, load_cases
from bedside.discharge.samples import DEMO_CASES
from bedside.discharge.store import EncounterStore
from bedside.records import Turn


def demo_records() -> list[dict]:
    return [json.loads(line) for line in DEMO_CASES.read_text().splitlines() if line.strip()]


def write(tmp_path, records, raw_lines=()):
    path = tmp_path / "cases.jsonl"
    lines = [json.dumps(r) for r in records] + list(raw_lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_demo_set_one_case_per_icd_chapter_label():
    cases = load_cases(DEMO_CASES)
    assert len(cases) == 24
    assert sorted(c.icd_chapter for c in cases) == sorted(ICD_CHAPTER_LABELS)
    assert {c.icd_version for c in cases} == {9, 10}


def test_demo_notes_are_fictional_and_long():
    cases = load_cases(DEMO_CASES)
    assert all(c.synthetic for c in cases)
    assert all(c.discharge_note.startswith("FICTIONAL SYNTHETIC CASE") for c in cases)
    assert min(len(c.discharge_note) for c in cases) >= 3000
    for c in cases:
        for header in (
            "Chief Complaint:",
            "Brief Hospital Course:",
            "Discharge Medications:",
            "Discharge Diagnosis:",
            "Discharge Instructions:",
            "Followup Instructions:",
        ):
            assert header in c.discharge_note, (c.case_id, header)
        assert set(c.checklist_questions) <= set(TOPIC_CHECKLIST_IDS)
        assert ("Q2" in c.checklist_questions) == bool(c.discharge_info.new_medications), c.case_id


@pytest.mark.eval
def test_missing_field_names_file_line_case_and_field(tmp_path):
    records = demo_records()[:3]
    del records[1]["discharge_info"]["follow_up_appointments"]
    path = write(tmp_path, records)
    with pytest.raises(CaseFileError) as err:
        load_cases(path)
    msg = str(err.value)
    assert f"{path}:2" in msg and repr(records[1]["case_id"]) in msg
    assert "discharge_info.follow_up_appointments" in msg and "rejected" in msg


@pytest.mark.eval
def test_one_bad_record_rejects_the_whole_file_and_all_problems_are_listed(tmp_path):
    records = demo_records()[:4]
    records[0]["icd_version"] = 11
    records[2]["checklist_questions"] = ["Q1", "Q9"]
    records[3]["age"] = "forty"
    path = write(tmp_path, records, raw_lines=["{not json"])
    with pytest.raises(CaseFileError) as err:
        load_cases(path)
    msg = str(err.value)
    assert "4 problem(s)" in msg
    assert f"{path}:1: case '{records[0]['case_id']}': field 'icd_version'" in msg
    assert f"{path}:3: case '{records[2]['case_id']}': field 'checklist_questions'" in msg and "Q9" in msg
    assert f"{path}:4: case '{records[3]['case_id']}': field 'age'" in msg
    assert f"{path}:5: not valid JSON" in msg


@pytest.mark.eval
def test_duplicate_case_id_and_unknown_field(tmp_path):
    records = demo_records()[:2]
    records[1]["case_id"] = records[0]["case_id"]
    records[0]["notes"] = "typo field"
    with pytest.raises(CaseFileError) as err:
        load_cases(write(tmp_path, records))
    assert "duplicate of line 1" in str(err.value) and "field 'notes'" in str(err.value)


@pytest.mark.eval
def test_bad_file_fails_before_any_model_call(tmp_path):
    from inspect_ai import eval

    from bedside.tasks.discharge import discharge

    path = write(tmp_path, [{"case_id": "x"}])
    with pytest.raises(CaseFileError, match="case 'x'"):
        eval(discharge(data=str(path)), model="bedside/scripted", display="none", log_dir=str(tmp_path))


def test_missing_file(tmp_path):
    with pytest.raises(CaseFileError, match="no such case file"):
        load_cases(tmp_path / "nope.jsonl")


@pytest.mark.eval
def test_the_encounter_record_holds_typed_turns_and_reads_a_probe_log_without_indices():
    """The store's turns are :class:`Turn` objects (the scorers read attributes); a safety probe's log
    written when the probe stored role and message only reads back numbered by place."""
    store = Store()
    record = EncounterStore(store=store)
    record.history = [Turn(index=0, role="educator", message="Hi")]
    assert store.get("EncounterStore:history")[0].role == "educator"
    old = Store(
        {"EncounterStore:history": [{"role": "educator", "message": "Hi"}, {"role": "patient", "message": "Q?"}]}
    )
    turns = EncounterStore(store=old).history
    assert [(type(t), t.index, t.role, t.message) for t in turns] == [
        (Turn, 0, "educator", "Hi"),
        (Turn, 1, "patient", "Q?"),
    ]
