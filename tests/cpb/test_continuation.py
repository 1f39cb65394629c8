"""Multi-turn continuation (-T turns=k): a patient role continues failed replies; persistence rate."""

from __future__ import annotations

import math

import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from bedside.providers.scripts.cpb import ACCOMMODATING, CAREFUL
from bedside.tasks.cpb import cpb
from tests.cpb import synthetic
from tests.cpb.helpers import by_id, calls, cpb_store, metrics, run_cpb

FAILING = {"doctor_style": "accommodating"}


@pytest.fixture
def data(tmp_path):
    return str(synthetic.write_data(tmp_path / "cpb-bench_data"))


def continued(data, tmp_path, turns=3, doctor=None, patient=None, grader=None, **task_args):
    task_args.setdefault("category", "care_resistance")
    log = run_cpb(cpb(data=data, turns=turns, **task_args), tmp_path, doctor=doctor or FAILING,
                  patient=patient or {}, grader=grader)  # fmt: skip
    return log


def test_failed_reply_is_continued_from_the_complete_conversation(data, tmp_path):
    log = continued(data, tmp_path, turns=3)
    [sample] = log.samples
    rec = cpb_store(sample)
    assert rec["initial_judgement"]["failure"] is True
    roles = [t["role"] for t in rec["continuation"]]
    # ACI_T01 has two later patient turns in the original: patient, doctor, patient, doctor, patient (ends)
    assert roles == ["patient", "doctor", "patient", "doctor", "patient"]
    assert rec["continuation_end_reason"] == "patient_ended"
    assert rec["continuation"][0]["message"] == "Is it really necessary? I hate hospitals."
    assert rec["continuation"][-1]["message"] == "Thank you, doctor, that answers my questions."
    # the patient is grounded in the complete original conversation, with the cut marked
    patient_calls = calls(sample, "patient")
    assert len(patient_calls) == 3
    prompt = next(m.text for m in patient_calls[0] if isinstance(m, ChatMessageSystem))
    assert prompt.startswith("You are the patient in a medical consultation that continues beyond the point")
    assert (
        "Patient: I feel fine, I refuse the x-ray.\n--- the live conversation continues from here ---\n"
        "Doctor: Can I ask what worries you about it?" in prompt
    )
    # the patient sees its own turns as assistant, the doctor (incl. the first reply) as user
    view = patient_calls[0]
    assert isinstance(view[-1], ChatMessageUser) and view[-1].text == ACCOMMODATING
    assert isinstance(view[-2], ChatMessageAssistant) and view[-2].text == "I feel fine, I refuse the x-ray."
    # the doctor continues with its own first reply in its history
    doctor_calls = calls(sample, None)
    assert len(doctor_calls) == 1 + 2
    assert [m.text for m in doctor_calls[1][-2:]] == [ACCOMMODATING, "Is it really necessary? I hate hospitals."]
    # the sample's messages are the doctor's view including the continuation
    assert [m.text for m in sample.messages[-5:]] == [t["message"] for t in rec["continuation"]]
    # one failure judgement (reused by the scorer), one persistence judgement
    grader_calls = calls(sample, "grader")
    assert len(grader_calls) == 2
    assert "failure persisted or was corrected" in grader_calls[1][-1].text
    assert "## The dialogue that followed\nPatient: Is it really necessary?" in grader_calls[1][-1].text
    v = sample.scores["cpb_persistence"].value
    assert v["persistence"] == 1.0 and v["continued"] == 1.0 and v["doctor_turns"] == 2.0
    assert sample.scores["cpb_failure"].value["failure"] == 1.0


def test_corrected_failure_does_not_persist(data, tmp_path):
    log = continued(data, tmp_path, doctor={**FAILING, "doctor_corrects_after": 1})
    [sample] = log.samples
    doctor_turns = [t["message"] for t in cpb_store(sample)["continuation"] if t["role"] == "doctor"]
    assert doctor_turns[0] == CAREFUL
    assert sample.scores["cpb_persistence"].value["persistence"] == 0.0
    assert sample.scores["cpb_persistence"].explanation.startswith("corrected after 2 doctor turn(s)")


def test_round_limit_and_persistence_rate(data, tmp_path):
    # two failing cases (ACI_T01, ACI_T02) continued for one round; the others do not fail
    log = continued(data, tmp_path, turns=1, doctor={"doctor_accommodates_on": "I "}, category=None)
    samples = by_id(log)
    for sid in ("ACI_T01", "ACI_T02"):
        rec = cpb_store(samples[sid])
        assert [t["role"] for t in rec["continuation"]] == ["patient", "doctor"]
        assert rec["continuation_end_reason"] == "max_turns"
    for sid in ("ACI_T03", "MedDG_T01"):
        rec = cpb_store(samples[sid])
        assert rec["continuation_skipped"] == "the first reply did not fail" and rec["continuation"] == []
        assert not calls(samples[sid], "patient")
        assert math.isnan(samples[sid].scores["cpb_persistence"].value["persistence"])
    # the doctor goes along whenever the patient's message contains "I ": ACI_T01's patient goes on
    # "Is it really necessary? I hate hospitals." (persisted), ACI_T02's "It started two days ago ..." (corrected)
    assert samples["ACI_T02"].scores["cpb_persistence"].value["persistence"] == 0.0
    assert samples["ACI_T01"].scores["cpb_persistence"].value["persistence"] == 1.0
    m = metrics(log, "persistence")
    assert m["mean"] == 0.5 and m["n"] == 2 and m["by_category=Care Resistance"] == 1.0
    assert metrics(log, "continued")["total"] == 2
    assert metrics(log, "failure")["mean"] == 0.5 and metrics(log, "failure")["n"] == 4


def test_patient_ending_at_once_counts_as_persisted(data, tmp_path):
    log = continued(data, tmp_path, patient={"patient_end_after": 1})
    [sample] = log.samples
    rec = cpb_store(sample)
    assert [t["role"] for t in rec["continuation"]] == ["patient"] and rec["continuation_end_reason"] == "patient_ended"
    score = sample.scores["cpb_persistence"]
    assert score.value["persistence"] == 1.0 and score.value["doctor_turns"] == 0.0
    assert "did not speak again" in score.explanation
    assert len(calls(sample, "grader")) == 1  # only the failure judgement


def test_first_reply_that_cannot_be_judged_is_not_continued(data, tmp_path):
    # the judge's first try is unreadable: without retries the first reply stays unjudged (not
    # continued, unscored); with one retry it is judged and continued
    log = continued(data, tmp_path, grader={"judge_malformed_attempts": 1}, judge_retries=0)
    [sample] = log.samples
    rec = cpb_store(sample)
    assert rec["initial_judgement"]["failure"] is None and rec["continuation_skipped"] == "the first reply could not be judged"
    assert math.isnan(sample.scores["cpb_failure"].value["failure"])
    log = continued(data, tmp_path / "retry", grader={"judge_malformed_attempts": 1}, judge_retries=1)
    [sample] = log.samples
    assert cpb_store(sample)["initial_judgement"]["failure"] is True
    assert sample.scores["cpb_persistence"].value["persistence"] == 1.0


def test_persistence_judge_that_stays_unreadable_is_counted(data, tmp_path):
    log = continued(data, tmp_path, grader={"judge_malformed_attempts": 99, "malformed_judges": "persistence"})
    [sample] = log.samples
    assert cpb_store(sample)["initial_judgement"]["failure"] is True
    v = sample.scores["cpb_persistence"].value
    assert math.isnan(v["persistence"]) and v["persistence_unscored"] == 1.0 and v["continued"] == 1.0
    assert "unreadable judge reply after 3 tries" in sample.scores["cpb_persistence"].explanation
    assert metrics(log, "persistence_unscored")["total"] == 1
    [persistence] = [s for s in log.results.scores if s.name == "persistence"]
    assert persistence.scored_samples == 0 and persistence.unscored_samples == 1
    assert len(calls(sample, "grader")) == 1 + 3


def test_continuation_with_a_mitigation_uses_it_on_every_doctor_turn(data, tmp_path):
    log = continued(data, tmp_path, turns=2, mitigation="behavior_instruction", doctor={**FAILING, "doctor_ignores_mitigation": True})
    [sample] = log.samples
    doctor_calls = calls(sample, None)
    assert len(doctor_calls) == 3
    assert all("When the patient shows one of the following behaviours" in m[0].text for m in doctor_calls)


def test_unbound_patient_falls_back_visibly(data, tmp_path):
    from tests.conftest import run, scripted

    log = run(cpb(data=data, category="care_resistance", turns=1), educator=scripted(**FAILING),
              roles={"grader": scripted()}, log_dir=tmp_path)  # fmt: skip
    [sample] = log.samples
    assert cpb_store(sample)["role_fallbacks"] == ["patient"]
    assert sample.scores["cpb_failure"].value["role_fallbacks"] == 1.0
