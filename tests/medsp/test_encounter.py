"""The MedSP closed loop through ``eval()``: roles, order, environment resolution, end reasons."""

from __future__ import annotations

import json

import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from bedside.protocols.medsp import EXAMINEE_MARKER
from bedside.providers.scripts.medsp import action_results
from bedside.tasks.medsp import medsp
from tests.conftest import model_inputs, run, scripted
from tests.medsp.helpers import BACK_PAIN, roles, run_one, scenario_of, score, store


def test_full_encounter_end_to_end(anaphylaxis_run):
    log, sample = anaphylaxis_run
    rec = store(sample)
    history = rec["history"]
    # environment opens, then examinee -> patient -> environment each turn
    assert [t["role"] for t in history] == ["environment"] + ["examinee", "patient", "environment"] * 3
    assert rec["end_reason"] == "environment_end" and rec["examinee_turns"] == 3
    assert history[-1]["data"]["should_end"] is True and history[-1]["data"]["after_turn"] == 3
    # opening scene from the environment materials, the team present at the start
    opening = history[0]["data"]
    assert "Resuscitation bay 2" in opening["feedback"] and opening["actors_present"] == ["Nurse"]
    # the examinee's turn is {"speak", "actions", "eos"}; the environment resolves its actions
    first = history[1]["data"]
    assert first["turn"] == 1 and first["eos"] is False and "Intramuscular epinephrine" in first["actions"]
    results = {o.keys[0]: o.text for o in action_results(scenario_of(sample).environment_controller.text())}
    assert results["epinephrine"] in history[3]["data"]["feedback"]
    # the patient answers in character from its script (opening statement first)
    assert history[2]["message"].startswith("My throat feels tight")
    # a team member joins only when called (the pharmacist is on request)
    assert history[9]["data"]["actors_present"] == ["Nurse", "Pharmacist"]
    # the sample's messages are the examinee's own view
    msgs = sample.messages
    assert isinstance(msgs[0], ChatMessageSystem) and EXAMINEE_MARKER in msgs[0].text
    assert isinstance(msgs[1], ChatMessageUser) and msgs[1].text.startswith("[Environment: opening scene]")
    assert isinstance(msgs[2], ChatMessageAssistant) and json.loads(msgs[2].text)["actions"] == first["actions"]
    # scored by the evaluator over the whole trajectory
    result = score(sample)
    assert result.value["completion"] == pytest.approx(3 / 13)
    assert result.metadata["counts"]["PC"] == [3, 6] and result.answer == "environment_end"
    assert len(result.metadata["items"]) == 13 and all(i["justification"] for i in result.metadata["items"])
    assert rec["role_fallbacks"] == [] and result.value["role_fallbacks"] == 0


def test_examinee_eos_ends_the_encounter(back_pain_run):
    _, sample = back_pain_run
    rec = store(sample)
    assert rec["end_reason"] == "examinee_end" and rec["examinee_turns"] == 4
    last = rec["history"][-1]
    assert last["role"] == "examinee" and last["data"]["eos"] is True


def test_turn_cap_counts_examinee_turns(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_never_end=True), max_turns=3)
    rec = store(sample)
    assert rec["end_reason"] == "max_turns" and rec["examinee_turns"] == 3
    # the last allowed turn is still answered and resolved
    assert [t["role"] for t in rec["history"][-3:]] == ["examinee", "patient", "environment"]
    assert rec["history"][-1]["data"]["after_turn"] == 3
    assert score(sample).answer == "max_turns"


def test_default_turn_cap_is_12(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_never_end=True))
    rec = store(sample)
    assert rec["end_reason"] == "max_turns" and rec["examinee_turns"] == 12 and rec["max_turns"] == 12


def test_out_of_scope_action_is_reported_as_unsupported_only(tmp_path):
    action = "Order a whole-body PET-CT"
    _, sample = run_one(tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_extra_action=action))
    env = store(sample)["history"][3]["data"]
    assert env["unsupported"] == [{"action": action, "rationale": "This action is not available in this simulation."}]
    assert "PET" not in env["feedback"] and "PET" not in env["patient_status"] and not any("PET" in e for e in env["events"])
    # the examinee reads it back; the count is scored
    second_call = model_inputs(sample, None)[1]
    assert f"Unsupported actions:\n- {action}" in second_call[-1].text
    assert score(sample).value["unsupported_actions"] == 1


def test_timed_event_fires_when_due_and_conditional_event_is_averted(anaphylaxis_run):
    _, sample = anaphylaxis_run
    history = store(sample)["history"]
    events = {t["data"]["after_turn"]: t["data"]["events"] for t in history if t["role"] == "environment"}
    assert events[2] == ["The hives spread to the neck and the patient's voice becomes hoarse."]
    assert events[0] == events[1] == events[3] == []  # the T+4 hypotension never happens: epinephrine was given


def test_unreadable_environment_reply_is_retried_then_errors(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(environment=scripted(medsp_env_malformed_attempts=1)))
    rec = store(sample)
    env_calls = sum(1 for t in rec["history"] if t["role"] == "environment")
    assert rec["end_reason"] == "examinee_end"
    assert rec["agent_stats"]["environment"]["unparsed"] == env_calls == rec["agent_stats"]["environment"]["calls"] / 2
    # beyond the retry budget: the encounter ends with error, the sample is kept and still scored
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(environment=scripted(medsp_env_malformed_attempts=3)))
    rec = store(sample)
    assert rec["end_reason"] == "error" and "no readable reply after 3 tries" in rec["error"]
    assert rec["history"] == [] and sample.error is None
    assert score(sample).value["erroneous"] == 1.0 and score(sample).value["completion"] == 0.0


def test_examinee_reply_repair_and_retry(tmp_path):
    _, sample = run_one(
        tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_prose_turns=[2], medsp_examinee_malformed_attempts=1)
    )
    rec = store(sample)
    stats = rec["agent_stats"]["examinee"]
    assert stats["unparsed"] == 4 and stats["repaired"] == 1  # every turn retried once; turn 2 in prose
    second = [t for t in rec["history"] if t["role"] == "examinee"][1]["data"]
    assert second["actions"] == [] and second["speak"].startswith("Do you have any allergies")
    assert rec["end_reason"] == "examinee_end"


def test_environment_can_end_the_encounter(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(environment=scripted(medsp_env_end_turn=2)))
    rec = store(sample)
    assert rec["end_reason"] == "environment_end" and rec["examinee_turns"] == 2


def test_unbound_roles_fall_back_and_are_recorded(tmp_path):
    log = run(medsp(), roles={}, log_dir=tmp_path, sample_id=BACK_PAIN)
    sample = log.samples[0]
    assert store(sample)["role_fallbacks"] == ["patient", "environment"]
    assert score(sample).metadata["role_fallbacks"] == ["patient", "environment", "grader"]
    assert score(sample).value["role_fallbacks"] == 3
    infos = {e.data["role_fallback"] for e in sample.events if e.event == "info" and e.source == "roles"}
    assert infos == {"patient", "environment", "grader"}


def test_task_parameters_are_checked():
    with pytest.raises(ValueError, match="scaling='best_of_3'"):
        medsp(scaling="best_of_3")
    with pytest.raises(ValueError, match="max_turns=0"):
        medsp(max_turns=0)
    with pytest.raises(ValueError, match="n=0"):
        medsp(scaling="best_of_n", n=0)
    with pytest.raises(ValueError, match="panel_size=9"):
        medsp(scaling="panel", panel_size=9)
