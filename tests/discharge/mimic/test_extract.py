"""Assembling a case from an extraction (cleaning, fallbacks, validation, audit rows), the Topic-Checklist
rule, the scripted extractor, the reply protocol and the data-use guard."""

from __future__ import annotations

import json

import pytest
from inspect_ai.model import ChatMessageUser, get_model

from bedside.discharge.mimic.checklist_rule import applicable_questions, clean
from bedside.discharge.mimic.data_use import DataUseRefused, check_endpoint, endpoint_problem, is_loopback
from bedside.discharge.mimic.extract import assemble, excerpt_for, note_sections
from bedside.discharge.mimic.protocol import EXTRACT, EXTRACTED_FIELDS, CaseExtraction
from bedside.discharge.mimic.scripted import extract_fields
from bedside.discharge.records import DischargeCase, load_cases
from bedside.discharge.samples import DEMO_CASES
from bedside.prompts import render
from bedside.providers.scripted import ScriptedEngine
from bedside.solvers.discharge.build_cases import extraction_prompt
from tests.conftest import scripted
from tests.discharge.mimic.fixture import note_text


def record(**over):
    base = {
        "case_id": "mimic-1",
        "subject_id": 1,
        "hadm_id": 1,
        "note_id": "1-DS-1",
        "age": 40,
        "gender": "F",
        "race": "WHITE",
        "icd_code": "I21.4",
        "icd_code_mimic": "I214",
        "icd_version": 10,
        "icd_chapter": "Diseases of the Circulatory System",
        "icd_title": "Non-ST elevation (NSTEMI) myocardial infarction",
        "discharge_note": note_text("t", "circ10"),
    }
    return {**base, **over}


def extraction(**over) -> CaseExtraction:
    return CaseExtraction.model_validate({**extract_fields(note_text("t", "circ10")), **over})


# ---------------------------------------------------------------------------------------------
# the reply protocol and prompt


@pytest.mark.eval
def test_prompt_carries_the_note_and_the_coded_diagnosis():
    prompt = extraction_prompt(record())
    assert prompt.startswith(
        "You are extracting a patient's profile and discharge information from a hospital discharge note"
    )
    assert "<discharge_note>\nSYNTHETIC TEST NOTE" in prompt and "ICD-10 I21.4 (Non-ST elevation" in prompt
    for name in EXTRACTED_FIELDS:
        assert f'"{name}"' in prompt
    untitled = render(
        "discharge/mimic/extract_fields.j2", discharge_note="n", icd_version=9, icd_code="401.9", icd_title=""
    )
    assert "is ICD-9 401.9.\n" in untitled


def test_reply_model_requires_every_field_and_joins_lists():
    parsed = EXTRACT.parse(
        json.dumps({**{k: "" for k in EXTRACTED_FIELDS}, "new_medications": ["A 1 mg", "B 2 mg"], "allergies": None})
    )
    assert parsed.new_medications == "A 1 mg; B 2 mg" and parsed.allergies == ""
    with pytest.raises(ValueError, match="follow_up_appointments"):
        EXTRACT.parse(json.dumps({k: "" for k in EXTRACTED_FIELDS[:-1]}))
    schema = EXTRACT.json_schema()
    assert sorted(schema["required"]) == sorted(EXTRACTED_FIELDS)


@pytest.mark.eval
def test_scripted_extractor_reads_the_mimic_sections():
    note = note_text("t", "circ10")
    messages = EXTRACT.tag([ChatMessageUser(content=extraction_prompt(record()))])
    situation = {"discharge_note": record()["discharge_note"]}  # in a sample: the sample's metadata
    got = json.loads(ScriptedEngine().reply_for(EXTRACT.name, messages, 0, situation))
    assert got == extract_fields(note)
    assert got["chief_complaint"] == "Symptoms of heart attack (NSTEMI)"
    assert got["main_diagnosis"] == "heart attack (NSTEMI)"
    assert got["new_medications"] == "Amoxicillin 500 mg PO TID Duration: 7 Days"  # lisinopril was taken before
    assert got["allergies"] == "Penicillins" and got["family_history"].startswith("Mother with hypertension")
    assert got["return_to_hospital_signs"].startswith("Please return to the emergency department")
    assert (
        "Stop taking ibuprofen." in got["post_discharge_treatment"] and "return" not in got["post_discharge_treatment"]
    )
    assert got["follow_up_appointments"].startswith("Please follow up with your PCP")
    bad = ScriptedEngine(mimic_invalid_on="heart attack")
    with pytest.raises(ValueError):
        EXTRACT.parse(bad.reply_for(EXTRACT.name, messages, 0, situation))


# ---------------------------------------------------------------------------------------------
# assembling a case


@pytest.mark.eval
def test_assembled_case_is_schema_valid_with_audit_rows_for_every_field():
    result = assemble(record(), extraction())
    case = DischargeCase.model_validate(result.case)
    assert case.icd_chapter == "Diseases of the Circulatory System" and case.icd_code == "I21.4" and not case.synthetic
    assert case.discharge_note == record()["discharge_note"]
    assert case.checklist_questions == applicable_questions(case.discharge_info.model_dump())
    fields = [row["field"] for row in result.audit]
    assert fields == [*EXTRACTED_FIELDS, "checklist_questions"]
    rows = {row["field"]: row for row in result.audit}
    assert rows["allergies"]["source_section"] == "Allergies" and rows["allergies"]["source_excerpt"] == "Penicillins"
    assert rows["new_medications"]["source_section"] == "Discharge Medications + Medications on Admission"
    assert "Amoxicillin" in rows["new_medications"]["source_excerpt"] and rows["new_medications"]["support"] == 1.0
    assert (
        rows["treatment_during_stay"]["source_section"]
        == "Major Surgical or Invasive Procedure + Brief Hospital Course"
    )
    assert all(row["status"] == "valid" for row in result.audit)


@pytest.mark.eval
def test_not_stated_answers_become_empty_and_are_flagged():
    result = assemble(
        record(),
        extraction(
            new_medications="None", follow_up_appointments="not applicable", allergies="N/A", family_history="None"
        ),
    )
    case = result.case
    assert case["discharge_info"]["new_medications"] == "" and case["discharge_info"]["follow_up_appointments"] == ""
    assert case["allergies"] == "" and case["family_history"] == "None"  # "None" is kept for profile fields
    assert not {"Q2", "Q2.1", "Q6", "Q6.1"} & set(case["checklist_questions"])
    rows = {row["field"]: row for row in result.audit}
    assert rows["new_medications"]["flags"] == "empty"


@pytest.mark.eval
def test_empty_main_diagnosis_falls_back_to_the_icd_title_and_says_so():
    result = assemble(record(), extraction(main_diagnosis="not stated"))
    assert result.case["main_diagnosis"] == "Non-ST elevation (NSTEMI) myocardial infarction"
    assert "d_icd_diagnoses long_title used" in {r["field"]: r for r in result.audit}["main_diagnosis"]["flags"]
    invalid = assemble(record(icd_title=""), extraction(main_diagnosis=""))
    assert invalid.case is None and invalid.stage == "schema" and "main_diagnosis" in invalid.problem
    assert all(row["status"] == "invalid" and row["problem"] for row in invalid.audit)


@pytest.mark.eval
def test_unusable_reply_is_an_invalid_record_not_a_dropped_one():
    result = assemble(record(), None, problem="unreadable extraction reply after 3 tries", last_reply="prose")
    assert result.case is None and result.stage == "extraction" and result.last_reply == "prose"
    assert result.audit[0]["status"] == "invalid" and result.audit[0]["problem"].startswith("unreadable")


@pytest.mark.eval
def test_low_support_and_missing_sections_are_flagged():
    result = assemble(record(), extraction(chief_complaint="Completely unrelated words here"))
    row = {r["field"]: r for r in result.audit}["chief_complaint"]
    assert "low support" in row["flags"] and row["support"] == 0.0
    where, excerpt = excerpt_for(
        "Some intro.\n\nShe takes warfarin daily.\n\nOther.", "medications_on_admission", "warfarin"
    )
    assert where.startswith("(section not found") and excerpt == "She takes warfarin daily."


def test_clean_and_sections():
    assert (
        clean("  n/a ", "allergies") == ""
        and clean("None.", "new_medications") == ""
        and clean("None", "allergies") == "None"
    )
    sections = note_sections("chief complaint: cough\nALLERGIES:\nNKDA\nFollowup Instructions:\nPCP in 1 week")
    assert sections == {"Chief Complaint": "cough", "Allergies": "NKDA", "Followup Instructions": "PCP in 1 week"}


# ---------------------------------------------------------------------------------------------
# the Topic-Checklist rule


def test_checklist_rule_parents_and_subquestions():
    full = {
        "discharge_diagnosis": "NSTEMI",
        "new_medications": "Aspirin 81 mg PO daily",
        "treatment_during_stay": "Cardiac catheterization with stent; troponin peaked at 2.1; IV heparin",
        "post_discharge_treatment": "Walk daily; stop ibuprofen; cardiac rehabilitation scheduled",
        "return_to_hospital_signs": "Chest pain lasting more than 5 minutes",
        "follow_up_appointments": "Cardiology Dr. ___ in 2 weeks",
    }
    assert applicable_questions(full) == [
        "Q1",
        "Q2",
        "Q2.1",
        "Q2.2",
        "Q2.3",
        "Q2.4",
        "Q3",
        "Q3.1",
        "Q3.2",
        "Q3.3",
        "Q4",
        "Q4.1",
        "Q4.2",
        "Q4.3",
        "Q5",
        "Q5.1",
        "Q5.2",
        "Q5.3",
        "Q6",
        "Q6.1",
        "Q6.2",
    ]
    assert applicable_questions({k: "" for k in full}) == ["Q1", "Q3", "Q5", "Q5.2"]
    thin = applicable_questions(
        {
            **full,
            "new_medications": "aspirin",
            "return_to_hospital_signs": "chest pain",
            "follow_up_appointments": "see someone",
            "post_discharge_treatment": "",
        }
    )
    assert {"Q2", "Q5.1", "Q6"} <= set(thin) and not {"Q2.2", "Q5.3", "Q6.1", "Q6.2", "Q4", "Q4.1", "Q4.3"} & set(thin)


def test_checklist_rule_agrees_with_the_hand_curated_demo_cases():
    cases = load_cases(DEMO_CASES)
    same = sum(applicable_questions(c.discharge_info.model_dump()) == c.checklist_questions for c in cases)
    assert same >= 22, f"{same}/24"


# ---------------------------------------------------------------------------------------------
# the data-use guard


@pytest.mark.parametrize(
    "name,base_url",
    [
        ("bedside/scripted", "scripted:"),
        ("bedside/local", "/models/x.gguf"),
        ("vllm/meta-llama/Llama-3.3-70B-Instruct", None),
        ("hf/Qwen/Qwen3-4B", None),
        ("llama-cpp-python/default", None),
        ("ollama/llama3", None),
        ("openai-api/local/qwen", "http://127.0.0.1:8000/v1"),
        ("openai-api/local/qwen", "http://localhost:8000/v1"),
        ("openai-api/local/qwen", "http://[::1]:8000/v1"),
        ("openai/gpt-5.5", "http://127.0.0.2:4000"),
    ],
)
def test_local_endpoints_are_accepted(name, base_url):
    assert endpoint_problem(name, base_url, zero_retention=False) is None


@pytest.mark.parametrize(
    "name,base_url",
    [
        ("openai/gpt-5.5", None),
        ("anthropic/claude-sonnet-4-6", None),
        ("openai-api/together/x", "https://api.together.xyz/v1"),
        ("openai-api/gpu/x", "http://10.0.0.5:8000/v1"),
        ("openai-api/x/y", "http://127.0.0.1.example.com/v1"),
        ("vllm/meta-llama/Llama-3.3-70B-Instruct", "http://gpu-host.example.org:8000/v1"),  # VLLM_BASE_URL elsewhere
        ("mockllm/model", None),
        ("google/gemini-3", "https://localhost.example.com"),
    ],
)
def test_non_local_endpoints_are_refused_unless_zero_retention_is_declared(name, base_url):
    problem = endpoint_problem(name, base_url, zero_retention=False)
    assert problem is not None and problem.startswith(f"Refusing to send MIMIC-IV-Note text to {name}")
    assert "Data Use Agreement" in problem and "zero_retention=true" in problem and "localhost" in problem
    assert endpoint_problem(name, base_url, zero_retention=True) is None


def test_guard_on_real_model_objects(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    api = get_model("openai/gpt-5.5", memoize=False)
    with pytest.raises(DataUseRefused, match="openai/gpt-5.5"):
        check_endpoint(api, zero_retention=False)
    check_endpoint(api, zero_retention=True)
    check_endpoint(
        get_model("openai-api/lab/qwen", base_url="http://127.0.0.1:9/v1", api_key="x", memoize=False), False
    )
    check_endpoint(scripted(), False)
    assert is_loopback("127.0.0.1:8000") and not is_loopback("") and not is_loopback("http://")
