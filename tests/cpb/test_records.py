"""CPB-Bench loaders: both published shapes, type normalisation, errors naming file, case and field."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from bedside.cpb.records import CPBDataError, load_controls, load_positives
from tests.conftest import shared_path
from tests.cpb import synthetic


@pytest.mark.eval
@pytest.mark.shared
def test_real_positive_set_counts():
    cases = load_positives(shared_path("data", "cpb-bench"))
    assert len(cases) == 692
    assert Counter(c.behavior_category for c in cases) == {
        "Self-diagnosis": 275,
        "Care Resistance": 261,
        "Information Contradiction": 92,
        "Factual Inaccuracy": 64,
    }
    assert Counter(c.dataset for c in cases) == {"ACI": 28, "IMCS": 286, "MedDG": 309, "MediTOD": 69}
    assert Counter(c.language for c in cases) == {"en": 28 + 69, "zh": 286 + 309}
    assert len({c.case_id for c in cases}) == 692
    # every segment is a prefix of its complete conversation
    assert all(c.complete_conversation[: len(c.conversation_segment)] == c.conversation_segment for c in cases)
    # MediTOD's closing dialogue-state marker is moved out of the dialogue, never shown as a turn
    meditod = [c for c in cases if c.dataset == "MediTOD"]
    assert all(c.annotations and c.annotations[0].get("control") for c in meditod)
    # the six published quirks are kept and flagged
    quirky = {c.case_id: c.quirks for c in cases if c.quirks}
    assert len(quirky) == 6
    assert sum("segment_ends_with_doctor" in q for q in quirky.values()) == 4


@pytest.mark.shared
def test_real_control_set_counts():
    cases = load_controls(shared_path("data", "cpb-bench"))
    assert len(cases) == 352
    assert Counter(c.dataset for c in cases) == {"ACI": 68, "IMCS21": 97, "MedDG": 92, "MediTOD": 95}
    assert len({c.case_id for c in cases}) == 352
    assert all(isinstance(c.turn_index, int) and c.conversation_segment[-1].index == c.turn_index for c in cases)
    assert all(c.conversation_segment[-1].speaker == "Patient" for c in cases)


@pytest.mark.eval
def test_both_shapes_load_and_types_are_normalised(tmp_path):
    data = synthetic.write_data(tmp_path / "cpb-bench_data")
    positives = {c.case_id: c for c in load_positives(data)}
    assert set(positives) == {"ACI_T01", "ACI_T02", "ACI_T03", "MedDG_T01"}
    assert positives["ACI_T02"].dialog_id == "1234"  # int id → str
    assert positives["MedDG_T01"].language == "zh" and positives["ACI_T01"].language == "en"
    first = positives["ACI_T01"].conversation_segment[0]
    assert (first.speaker, first.index) == ("Doctor", 1)
    controls = {c.dataset + c.dialog_id: c for c in load_controls(data)}
    literal = controls["MediTOD902"]  # stored as Python-literal strings with a string turn_index
    assert literal.turn_index == 2 and isinstance(literal.turn_index, int)
    assert [t.speaker for t in literal.conversation_segment] == ["Doctor", "Patient"]
    assert len(literal.complete_conversation) == 4
    assert literal.case_id == "MediTOD_ctrl_902_t2"
    assert controls["IMCS2177"].language == "zh"
    # the same data loads from the repository-root layout and from a single file
    assert len(load_positives(data / "Pos_behavior_692" / "ACI_safety_benchmark.json")) == 3
    assert len(load_controls(data / "Neg_behavior_352")) == 3


def _write(path, content):
    path.write_text(json.dumps(content, ensure_ascii=False))
    return path


@pytest.mark.eval
def test_malformed_positive_records_name_file_case_and_field(tmp_path):
    cases = copy.deepcopy(synthetic.ACI_CASES)
    del cases[0]["patient_behavior_text"]
    cases[1]["behavior_category"] = "Rudeness"
    cases[2]["conversation_segment"][1] = {"Nurse": "hello", "turn index": 2}
    content = synthetic.positive_file("ACI", cases)
    content["behavior_categories"] = {}  # keep the declared-count check quiet for this test
    path = _write(tmp_path / "ACI_safety_benchmark.json", content)
    with pytest.raises(CPBDataError) as err:
        load_positives(path)
    msg = str(err.value)
    assert "rejected, 3 problem(s)" in msg
    assert f"{path}: case 'ACI_T01': field 'patient_behavior_text': Field required" in msg
    assert f"{path}: case 'ACI_T02': field 'behavior_category'" in msg and "Rudeness" in msg
    assert f"{path}: case 'ACI_T03': field 'conversation_segment.1.speaker'" in msg and "(got 'Nurse')" in msg


@pytest.mark.eval
def test_declared_counts_and_duplicate_ids_are_checked(tmp_path):
    cases = copy.deepcopy(synthetic.ACI_CASES)
    cases[2]["case_id"] = "ACI_T01"
    content = synthetic.positive_file("ACI", cases)
    content["total_cases"] = 5
    path = _write(tmp_path / "ACI_safety_benchmark.json", content)
    with pytest.raises(CPBDataError) as err:
        load_positives(path)
    msg = str(err.value)
    assert "field 'total_cases': declares 5 cases, the file holds 3" in msg
    assert "case 'ACI_T01': field 'case_id': duplicate" in msg


@pytest.mark.eval
def test_unknown_dataset_and_wrong_shape(tmp_path):
    path = _write(tmp_path / "X_safety_benchmark.json", synthetic.positive_file("PubMedQA", synthetic.ACI_CASES[:1]))
    with pytest.raises(CPBDataError, match=r"case 'ACI_T01': field 'dataset': .*unknown source dataset 'PubMedQA'"):
        load_positives(path)
    with pytest.raises(CPBDataError, match="expected a JSON list of control cases"):
        load_controls(path)


def test_malformed_control_records_name_file_record_and_field(tmp_path):
    records = copy.deepcopy(synthetic.MEDITOD_CONTROLS)
    records[0]["conversation_segment"] = "[{'Doctor': 'unterminated"  # broken Python literal
    records[1]["turn_index"] = "late"
    path = _write(tmp_path / "MediTOD_negative_cases_sampled.json", records)
    with pytest.raises(CPBDataError) as err:
        load_controls(path)
    msg = str(err.value)
    assert f"{path}: record #0 (MediTOD_ctrl_901_t2): field 'conversation_segment'" in msg
    assert "not a Python-literal list" in msg
    assert f"{path}: record #1 (MediTOD_ctrl_902_tlate): field 'turn_index'" in msg


def test_invalid_json_and_missing_data_explain_how_to_get_it(tmp_path):
    bad = tmp_path / "ACI_safety_benchmark.json"
    bad.write_text("{not json")
    with pytest.raises(CPBDataError, match=r"not valid JSON \(.* at line 1"):
        load_positives(bad)
    with pytest.raises(CPBDataError, match="no such file or folder.*git clone https://github.com/yli-z/cpb-bench"):
        load_positives(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CPBDataError, match=r"no \*_negative_cases_sampled.json files here"):
        load_controls(tmp_path / "empty")


@pytest.mark.eval
def test_obsolete_emotional_pressure_cases_are_left_out(tmp_path):
    cases = copy.deepcopy(synthetic.ACI_CASES)
    extra = copy.deepcopy(cases[0])
    extra.update(case_id="ACI_T99", behavior_category="Emotional Pressure")
    content = synthetic.positive_file("ACI", [*cases, extra])  # declares the obsolete category too
    assert content["behavior_categories"]["Emotional Pressure"] == 1 and content["total_cases"] == 4
    path = _write(tmp_path / "ACI_safety_benchmark.json", content)
    loaded = load_positives(path)
    assert {c.case_id for c in loaded} == {"ACI_T01", "ACI_T02", "ACI_T03"}
    # any other unknown category is still an error naming file, case and field
    extra["behavior_category"] = "Rudeness"
    content = synthetic.positive_file("ACI", [*cases, extra])
    content["behavior_categories"] = {}
    path = _write(tmp_path / "ACI_safety_benchmark.json", content)
    with pytest.raises(CPBDataError, match=r"case 'ACI_T99': field 'behavior_category'"):
        load_positives(path)


@pytest.mark.shared
def test_shared_data_already_holds_the_control_cut():
    """The packaged controls carry the upstream truncation (one cut per dialogue, seed 42): the segment
    is the complete conversation up to and including ``turn_index`` (a patient turn); nothing to re-sample."""
    cases = load_controls(shared_path("data", "cpb-bench"))
    for c in cases:
        assert c.conversation_segment == [t for t in c.complete_conversation if t.index <= c.turn_index]
        assert c.conversation_segment[-1].index == c.turn_index and c.target_pct is not None
    assert len({(c.dataset, c.dialog_id) for c in cases}) == len(cases) == 352


@pytest.mark.eval
@pytest.mark.parametrize("bad", [-1, True, "-3"])
def test_negative_or_boolean_turn_index_is_refused(tmp_path, bad):
    cases = copy.deepcopy(synthetic.ACI_CASES)
    cases[0]["turn_index"] = bad
    path = _write(tmp_path / "ACI_safety_benchmark.json", synthetic.positive_file("ACI", cases))
    with pytest.raises(CPBDataError) as err:
        load_positives(path)
    assert f"{path}: case 'ACI_T01': field 'turn_index'" in str(err.value) and "whole number >= 0" in str(err.value)
    records = copy.deepcopy(synthetic.MEDITOD_CONTROLS)
    records[0]["turn_index"] = bad
    path = _write(tmp_path / "MediTOD_negative_cases_sampled.json", records)
    with pytest.raises(CPBDataError, match=r"record #0 .*field 'turn_index'.*whole number >= 0"):
        load_controls(path)
    cases = copy.deepcopy(synthetic.ACI_CASES)
    cases[1]["conversation_segment"][0]["turn index"] = bad  # a turn's own index too
    path = _write(tmp_path / "ACI_safety_benchmark.json", synthetic.positive_file("ACI", cases))
    with pytest.raises(CPBDataError, match=r"case 'ACI_T02': field 'conversation_segment.0"):
        load_positives(path)
