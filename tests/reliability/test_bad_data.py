"""Bad input data, for the DischargeBench, CPB-Bench and MedSP1000 loaders: each case
is either an error naming file, record and field, raised before any model call, or handled safely
where the data is legitimately odd (the loaders' docstrings say which). What the benchmarks' own
tests already cover (``tests/discharge/test_loader_errors.py``, ``tests/cpb/test_records.py``,
``tests/medsp/test_records.py``) is not repeated here.

DischargeBench decisions (``bedside/discharge/records.py``): a note of any length is accepted (no
cap: real MIMIC-IV notes reach tens of kB and context limits are the model's); a note too long for a
model's context ends the session ``error``, a system failure excluded from the scores' n, before any
turn is accepted. Persona values in a case record must be the persona axes' values (an unknown value
or key is an error naming ``persona.<axis>``); ``-T personality=...`` is checked the same way.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

from bedside.compat import PrerequisiteError
from bedside.cpb.records import CPBDataError, load_controls, load_positives
from bedside.discharge.records import CaseFileError, load_cases
from bedside.discharge.samples import discharge_dataset
from bedside.medsp.records import MedSPError, load_scenarios, read_rubric
from bedside.params import BadParameter
from bedside.paths import DATASETS_DIR
from tests.cpb import synthetic
from tests.reliability.helpers import demo_records

MB = 1024 * 1024


# ---------------------------------------------------------------------------------------------
# DischargeBench


def write_jsonl(tmp_path: Path, records: list, raw_lines: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(r) for r in records]
    for i, text in (raw_lines or {}).items():
        lines[i] = text
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def report(path: Path) -> str:
    with pytest.raises(CaseFileError) as err:
        load_cases(path)
    assert isinstance(err.value, PrerequisiteError)
    return str(err.value)


@pytest.mark.eval
def test_discharge_truncated_file_names_the_line(tmp_path):
    records = demo_records()[:3]
    cut = json.dumps(records[2])[:200]  # the last record cut mid-object (a copy that stopped short)
    path = write_jsonl(tmp_path, records, {2: cut})
    assert f"{path}:3: not valid JSON (Unterminated string" in report(path) or f"{path}:3: not valid JSON" in report(
        path
    )


@pytest.mark.eval
def test_discharge_missing_and_mistyped_fields(tmp_path):
    records = demo_records()[:4]
    del records[0]["discharge_note"]
    del records[1]["discharge_info"]["new_medications"]
    records[2]["discharge_info"] = "see note"
    records[3]["checklist_questions"] = "Q1"
    records[3]["icd_version"] = "10"
    path = write_jsonl(tmp_path, records)
    msg = report(path)
    ids = [r["case_id"] for r in records]
    assert f"{path}:1: case '{ids[0]}': field 'discharge_note': Field required" in msg
    assert f"{path}:2: case '{ids[1]}': field 'discharge_info.new_medications': Field required" in msg
    assert f"{path}:3: case '{ids[2]}': field 'discharge_info': Input should be a valid dictionary" in msg
    assert f"{path}:4: case '{ids[3]}': field 'checklist_questions': Input should be a valid list" in msg
    assert f"{path}:4: case '{ids[3]}': field 'icd_version': Input should be 9 or 10" in msg


@pytest.mark.eval
def test_discharge_record_that_is_not_an_object(tmp_path):
    path = write_jsonl(tmp_path, demo_records()[:2], {1: '["a", "list"]'})
    assert f"{path}:2: case '<not an object>': field '<record>'" in report(path)


@pytest.mark.eval
def test_discharge_duplicate_case_ids(tmp_path):
    records = demo_records()[:3]
    records[2]["case_id"] = records[0]["case_id"]
    path = write_jsonl(tmp_path, records)
    assert f"{path}:3: case '{records[0]['case_id']}': field 'case_id': duplicate of line 1" in report(path)


@pytest.mark.eval
@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_discharge_empty_file(tmp_path, content):
    path = tmp_path / "cases.jsonl"
    path.write_text(content)
    assert report(path) == f"{path}: no case records"


@pytest.mark.eval
def test_discharge_empty_note(tmp_path):
    records = demo_records()[:1]
    records[0]["discharge_note"] = ""
    path = write_jsonl(tmp_path, records)
    assert (
        f"{path}:1: case '{records[0]['case_id']}': field 'discharge_note': String should have at least 1 character"
        in report(path)
    )


@pytest.mark.eval
def test_discharge_unknown_persona_values_in_the_record(tmp_path):
    records = demo_records()[:2]
    records[0]["persona"] = {"personality": "grumpy"}
    records[1]["persona"] = {"mood": "calm", "recall_level": "perfect"}
    path = write_jsonl(tmp_path, records)
    msg = report(path)
    assert f"{path}:1: case '{records[0]['case_id']}': field 'persona.personality': Input should be 'neutral'" in msg
    assert f"{path}:2: case '{records[1]['case_id']}': field 'persona.mood': Extra inputs are not permitted" in msg
    assert f"{path}:2: case '{records[1]['case_id']}': field 'persona.recall_level': Input should be 'poor'" in msg


def test_discharge_unknown_persona_parameter():
    with pytest.raises(BadParameter, match=r"Bad parameter 'personality': personality='grumpy' is not one of"):
        discharge_dataset(None, overrides={"personality": "grumpy"})


@pytest.mark.eval
def test_discharge_one_megabyte_note_is_accepted_and_a_small_context_ends_the_session(tmp_path):
    """Accepted by the loader (a decision: no length cap); against a server with a 128k-token
    context the educator's first call is refused, the session ends ``error`` (a system failure:
    unscored by the judges, counted by ``encounter_outcome``), the sample is in the log."""
    from inspect_ai import eval, task_with

    from bedside.scorers.discharge.encounter_outcome import encounter_outcome
    from bedside.scorers.discharge.topic_checklist import topic_checklist
    from bedside.tasks.discharge import discharge
    from tests.loopback.server import LoopbackServer
    from tests.reliability.helpers import fast_model

    record = demo_records()[0]
    filler = "Daily progress note: vital signs stable, tolerating diet, ambulating with assistance.\n"
    record["discharge_note"] += "\n" + filler * (MB // len(filler) + 1)
    path = write_jsonl(tmp_path, [record])
    [case] = load_cases(path)
    assert len(case.discharge_note.encode()) > MB

    with LoopbackServer(context_limit=128_000) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOOPBACK_BASE_URL", server.base_url)
        mp.setenv("BEDSIDE_LOOPBACK_URL", server.base_url)
        mp.setenv("LOOPBACK_API_KEY", "x")
        task = task_with(
            discharge(data=str(path), min_turns=2, max_turns=6, cache_references=False),
            scorer=[encounter_outcome(), topic_checklist()],
        )
        roles = {r: fast_model(r) for r in ("patient", "monitor", "grader")}
        [log] = eval(
            task, model=fast_model("educator"), model_roles=roles, log_dir=str(tmp_path / "logs"), display="none"
        )
        refused = server.faults["context_length"]
    assert log.status == "success" and refused == 1  # one refused call, never retried
    [sample] = log.samples
    assert sample.error is None and sample.store["EncounterStore:end_reason"] == "error"
    assert "context window exceeded" in sample.store["EncounterStore:error"]
    assert sample.scores["encounter_outcome"].value["system_failure"] == 1.0
    assert math.isnan(sample.scores["topic_checklist"].value["tcs"])


# ---------------------------------------------------------------------------------------------
# CPB-Bench


def cpb_file(tmp_path: Path, cases: list[dict], name: str = "ACI_safety_benchmark.json", dataset: str = "ACI") -> Path:
    # the published shape, without the declared per-category counts (their check is not the point)
    content = {"dataset_name": dataset, "total_cases": len(cases), "cases": cases}
    path = tmp_path / name
    path.write_text(json.dumps(content, ensure_ascii=False))
    return path


def cpb_report(load, path: Path) -> str:
    with pytest.raises(CPBDataError) as err:
        load(path)
    assert isinstance(err.value, PrerequisiteError)  # the CLI prints it without a traceback
    return str(err.value)


@pytest.mark.eval
def test_cpb_category_of_the_wrong_type_is_reported_not_crashed_on(tmp_path):
    cases = copy.deepcopy(synthetic.ACI_CASES)
    cases[0]["behavior_category"] = ["Care Resistance"]  # was a TypeError (unhashable) before
    cases[1]["turn_index"] = [2]
    cases[2]["conversation_segment"] = {"Doctor": "hi", "turn index": 1}
    path = cpb_file(tmp_path, cases)
    msg = cpb_report(load_positives, path)
    assert f"{path}: case 'ACI_T01': field 'behavior_category': Input should be" in msg
    assert f"{path}: case 'ACI_T02': field 'turn_index': Input should be a valid integer" in msg
    assert f"{path}: case 'ACI_T03': field 'conversation_segment': Input should be a valid list" in msg


@pytest.mark.eval
def test_cpb_missing_fields_and_empty_dialogue(tmp_path):
    cases = copy.deepcopy(synthetic.ACI_CASES)
    del cases[0]["complete_conversation"]
    cases[1]["conversation_segment"] = []
    cases[2]["conversation_segment"][0] = "Doctor: hello"
    path = cpb_file(tmp_path, cases)
    msg = cpb_report(load_positives, path)
    assert f"{path}: case 'ACI_T01': field 'complete_conversation': Field required" in msg
    assert f"{path}: case 'ACI_T02': field 'conversation_segment': List should have at least 1 item" in msg
    assert f"{path}: case 'ACI_T03': field 'conversation_segment.0'" in msg


@pytest.mark.eval
def test_cpb_truncated_and_empty_files(tmp_path):
    path = cpb_file(tmp_path, synthetic.ACI_CASES)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    assert f"{path}: not valid JSON (" in cpb_report(load_positives, path) and "at line 1, column" in cpb_report(
        load_positives, path
    )
    for content in (b"", b" \n "):
        path.write_bytes(content)
        assert f"{path}: empty file (expected JSON)" in cpb_report(load_positives, path)


@pytest.mark.eval
def test_cpb_non_utf8_names_case_field_line_and_offset(tmp_path):
    path = cpb_file(tmp_path, synthetic.ACI_CASES)
    data = json.dumps(json.loads(path.read_text()), indent=1).encode()
    bad = data.replace(b"I refuse the x-ray", b"I refuse the x-r\xe4y", 1)
    path.write_bytes(bad)
    msg = cpb_report(load_positives, path)
    offset = bad.index(b"\xe4")
    line = bad[:offset].count(b"\n") + 1
    assert (
        f"{path}: case 'ACI_T01': field 'patient_behavior_text': not valid UTF-8 (byte 0xe4 at line {line}, byte offset {offset} of the file)"
        in msg
    )


@pytest.mark.eval
def test_cpb_non_utf8_in_controls_names_the_record(tmp_path):
    path = tmp_path / "MediTOD_negative_cases_sampled.json"
    data = (
        json.dumps(synthetic.MEDITOD_CONTROLS)
        .encode()
        .replace(b"mostly in the morning", b"mostly in the m\xf6rning", 1)
    )
    path.write_bytes(data)
    assert f"{path}: record #0: field 'conversation" in cpb_report(load_controls, path)


@pytest.mark.eval
def test_cpb_duplicate_ids_across_files_name_both(tmp_path):
    first = cpb_file(tmp_path, synthetic.ACI_CASES[:2])
    second = cpb_file(tmp_path, synthetic.ACI_CASES[1:], name="ACI2_safety_benchmark.json")
    msg = cpb_report(load_positives, tmp_path)  # files are read in name order: ACI2_... first
    assert f"{first}: case 'ACI_T02': field 'case_id': duplicate (also in {second})" in msg


@pytest.mark.eval
def test_cpb_legitimately_odd_data_is_accepted(tmp_path):
    cases = copy.deepcopy(synthetic.ACI_CASES)
    cases[0]["patient_behavior_text"] = ""  # published quirk
    cases[1]["complete_conversation"][-1]["Patient"] = ""  # an empty utterance
    cases[2]["conversation_segment"][-1]["Patient"] = "x" * MB  # a 1 MB utterance
    path = cpb_file(tmp_path, cases)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # with a UTF-8 byte-order mark
    loaded = {c.case_id: c for c in load_positives(path)}
    assert loaded["ACI_T01"].quirks == ["empty_patient_behavior_text"]
    assert loaded["ACI_T02"].complete_conversation[-1].text == ""
    assert len(loaded["ACI_T03"].conversation_segment[-1].text) == MB


# ---------------------------------------------------------------------------------------------
# MedSP1000

DEMO = DATASETS_DIR / "medsp" / "demo"
BACK_PAIN = "bedside_demo_back_pain"


@pytest.fixture
def medsp_copy(tmp_path) -> Path:
    root = tmp_path / "medsp"
    for case in (BACK_PAIN, "bedside_demo_anaphylaxis"):
        shutil.copytree(DEMO / case, root / case)
    return root


def unusable(root: Path) -> list[str]:
    return [str(u) for u in load_scenarios(root).unusable]


@pytest.mark.eval
def test_medsp_non_utf8_packet_and_rubric_name_line_and_offset(medsp_copy):
    packet = medsp_copy / BACK_PAIN / "scenario1" / "examinee" / "scenario.md"
    data = packet.read_bytes()
    packet.write_bytes(data[:40] + b"\xff" + data[40:])
    rubric = medsp_copy / BACK_PAIN / f"{BACK_PAIN}_scenario1.json"
    found = unusable(medsp_copy)
    line = data[:40].count(b"\n") + 1
    expected = f"{packet}: {BACK_PAIN}/scenario1: field 'examinee/scenario.md': not UTF-8 text (byte 0xff at line {line}, byte offset 40)"
    assert expected in found, found
    rubric.write_bytes(b'{"case_id": "\x81"}')
    problem = read_rubric(rubric)[1][0]
    assert (
        problem.record == f"{BACK_PAIN}/scenario1"
        and "not UTF-8 text (byte 0x81 at line 1, byte offset 13)" in problem.reason
    )


@pytest.mark.eval
def test_medsp_truncated_and_mistyped_rubric(medsp_copy):
    rubric = medsp_copy / BACK_PAIN / f"{BACK_PAIN}_scenario1.json"
    text = rubric.read_text()
    rubric.write_text(text[: len(text) // 2])
    [problem] = read_rubric(rubric)[1]
    assert problem.record == f"{BACK_PAIN}/scenario1" and problem.reason.startswith("not valid JSON (")
    raw = json.loads(text)
    raw["PC"] = "take a history"
    raw["MK"] = [1, 2]
    del raw["rubric_version"]
    rubric.write_text(json.dumps(raw))
    fields = {u.field for u in read_rubric(rubric)[1]}
    assert {"PC", "MK.0", "MK.1", "rubric_version"} <= fields
    # the other scenario still loads; this one is reported, not dropped silently
    loaded = load_scenarios(medsp_copy)
    assert [s.case_id for s in loaded.scenarios] == ["bedside_demo_anaphylaxis"]
    assert any(u.record == f"{BACK_PAIN}/scenario1" for u in loaded.unusable)


def test_medsp_bad_metadata_is_reported(medsp_copy):
    meta = medsp_copy / BACK_PAIN / "metadata.json"
    meta.write_text('["not", "a", "mapping"]')
    assert any(
        f"{meta}: {BACK_PAIN}/scenario1: field 'metadata': expected a mapping" in u for u in unusable(medsp_copy)
    )
    meta.write_text('{"specialty": ["Primary care"]}')
    assert any("field 'specialty'" in u for u in unusable(medsp_copy))


def test_medsp_one_megabyte_packet_file_is_accepted(medsp_copy):
    packet = medsp_copy / BACK_PAIN / "scenario1" / "sp_actor" / "notes.txt"
    packet.write_text("The patient repeats the same worry about the MRI. " * (MB // 50))
    loaded = load_scenarios(medsp_copy)
    [scenario] = [s for s in loaded.scenarios if s.case_id == BACK_PAIN]
    assert len(scenario.sp_actor.text()) > MB // 2 and not loaded.unusable


def test_medsp_nothing_usable_is_a_prerequisite_error(tmp_path):
    with pytest.raises(MedSPError) as err:
        load_scenarios(tmp_path / "nowhere")
    assert isinstance(err.value, PrerequisiteError)
