"""The MedSP closed loop through ``eval()``: turn order, eos as "state done", the last turn resolved, should_end,
per-action statuses, SP utterance lists, errors and role fallbacks."""

from __future__ import annotations

import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from bedside.params import BadParameter
from bedside.protocols import tag_of
from bedside.tasks.medsp import medsp
from tests.conftest import run, scripted
from tests.medsp.helpers import ANAPHYLAXIS, BACK_PAIN, PEDS, calls, roles, run_one, score, store, turns_of

pytestmark = pytest.mark.eval

PET = "Order a whole-body PET-CT"


def test_full_encounter_end_to_end(anaphylaxis_run):
    _, sample = anaphylaxis_run
    rec = store(sample)
    # no environment call before the first examinee turn; then examinee -> SP -> environment every turn
    assert [t["role"] for t in rec["history"]] == ["examinee", "patient", "environment"] * 3
    first = [e for e in sample.events if e.event == "model"][0]
    assert first.role is None and tag_of(first.input).name == "medsp.examinee"
    assert [tag_of(e.input).name for e in calls(sample)] == (
        ["medsp.examinee", "medsp.patient", "medsp.environment"] * 3 + ["medsp.evaluator"]
    )  # every call is tagged with its protocol
    # the observation bed is the scenario's hand-over point: the environment ends it (no eos was said)
    env = turns_of(sample, "environment")
    assert rec["end_reason"] == "environment_end" and rec["examinee_turns"] == 3
    assert env[-1]["should_end"] is True and env[-1]["end_reason"] == "environment_end"
    assert not any(t["eos"] for t in turns_of(sample, "examinee"))
    # the environment's fields: feedback and events lists, medical team present, statuses, state
    assert "Epinephrine 0.5 mg IM given into the anterolateral thigh by the nurse." in env[0]["feedback"]
    assert env[1]["events"] == ["The hives spread to the neck and the patient's voice becomes hoarse."]
    assert list(env[0]["actors_present"]) == ["Nurse"] and list(env[2]["actors_present"]) == ["Nurse", "Pharmacist"]
    assert "Pharmacist: I'm here. How can I help?" in env[2]["feedback"]  # a team member speaks with a role prefix
    assert [(a["raw"], a["status"]) for a in env[2]["action_log"]] == [
        ("Serum tryptase level", "pending"),
        ("Pharmacist (by phone)", "executed"),
        ("Observation bed in the emergency department", "executed"),
    ]
    assert rec["action_statuses"] == {"executed": 8, "pending": 1, "unsupported": 0}
    assert all(e["state_label_after"] == "initial_assessment" and e["progress_index_after"] == 0 for e in env)
    # the SP answers with a list of utterances and the patient-side people present
    sp = turns_of(sample, "patient")
    assert sp[0]["speak"][0].startswith("My throat feels tight") and isinstance(sp[0]["speak"], list)
    assert list(sp[0]["actors_present"]) == ["Patient", "Partner"] and sp[0]["warnings"] == []
    # the sample's messages are the examinee's own chat: system, then each turn's prompt and its raw reply
    msgs = sample.messages
    assert (
        isinstance(msgs[0], ChatMessageSystem)
        and "You are the clinician being assessed in a standardized-patient (SP) encounter" in msgs[0].text
    )
    assert [type(m) for m in msgs[1:]] == [ChatMessageUser, ChatMessageAssistant] * 3
    assert "Nothing has been reported yet" in msgs[1].text
    assert msgs[2].text == store(sample)["history"][0]["raw"]
    # scored by the evaluator over the whole encounter
    result = score(sample)
    assert result.answer == "environment_end" and result.value["examinee_turns"] == 3
    assert 0 < result.value["micro"] < 1 and result.value["micro"] == result.value["scenario_mean"]
    assert len(result.metadata["items"]) == 13 and all(i["evidence"] for i in result.metadata["items"])
    assert rec["role_fallbacks"] == [] and result.value["role_fallbacks"] == 0


def test_eos_advances_one_state_and_the_session_goes_on(back_pain_run):
    """eos = "this state is done": the environment moves to the next state; the session ends only when the
    environment finds no state left (should_end on an eos turn: scenario_complete)."""
    _, sample = back_pain_run
    rec = store(sample)
    exam, env = turns_of(sample, "examinee"), turns_of(sample, "environment")
    assert [t["eos"] for t in exam] == [False, False, False, True, True]
    assert rec["end_reason"] == "scenario_complete" and rec["examinee_turns"] == 5
    # turn 4 (eos): one state ahead, its objective change reported, the session continues
    assert (
        env[3]["progress_index"] == 1 and env[3]["state_label"] == "plan_discussion" and env[3]["should_end"] is False
    )
    assert env[3]["state_moved"] is True and "asks once more whether an MRI" in env[3]["feedback"][0]
    assert "[Signal: eos=true]" in env[3]["prompt"] and not any("eos=true" in e["prompt"] for e in env[:3])
    # the examinee's next turn is told the new state and what changed
    assert "Current stage of the scenario: plan_discussion" in exam[4]["prompt"]
    assert "[The situation has changed]" in exam[4]["prompt"] and "asks once more whether an MRI" in exam[4]["prompt"]
    assert exam[4]["state_label"] == "plan_discussion" and exam[3]["state_label"] == "initial_assessment"
    # turn 5 (eos again): no state left
    assert env[4]["should_end"] is True and env[4]["completion_reason"] == "No scenario state after plan_discussion."
    sim = rec["sim_state"]
    assert sim["phase_history"] == ["0:initial_assessment", "1:plan_discussion"]
    assert sim["progress_index"] == 1 and sim["current_phase_id"] == "plan_discussion" and sim["total_turns"] == 5
    assert sim["completion_reason"] == "No scenario state after plan_discussion."
    assert (rec["progress_index"], rec["state_label"], rec["phase_history"]) == (
        1,
        "plan_discussion",
        sim["phase_history"],
    )
    assert rec["progression_anomalies"] == []
    assert score(sample).value["scenario_complete"] == 1.0


def test_eos_alone_never_ends_the_session(tmp_path):
    # eos on the very first turn: the environment moves to the second state and the examinee goes on
    _, sample = run_one(tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_plan=1))
    exam = turns_of(sample, "examinee")
    assert exam[0]["eos"] is True and len(exam) == 2
    assert store(sample)["end_reason"] == "scenario_complete"
    # a single-state scenario: eos makes the environment end it after resolving that turn
    _, sample = run_one(tmp_path, "bedside_demo_preeclampsia/scenario1")
    assert store(sample)["end_reason"] == "scenario_complete"
    assert [t["role"] for t in store(sample)["history"][-3:]] == ["examinee", "patient", "environment"]


def test_last_examinee_turn_is_always_resolved(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_never_end=True), max_turns=3)
    rec = store(sample)
    assert rec["end_reason"] == "max_turns" and rec["examinee_turns"] == 3
    # the SP answers and the environment resolves the last allowed turn, then the session ends
    assert [t["role"] for t in rec["history"][-3:]] == ["examinee", "patient", "environment"]
    last_env = turns_of(sample, "environment")[-1]
    assert last_env["turn"] == 3 and last_env["end_reason"] == "max_turns"
    assert [a["raw"] for a in last_env["action_log"]] == ["Work note"]
    # the examinee is not called again: it never sees that last reply
    assert len(calls(sample, "medsp.examinee", role=None)) == 3
    assert last_env["feedback"][0] not in "\n".join(m.text for m in sample.messages)
    assert score(sample).answer == "max_turns"


def test_default_turn_cap_is_12(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_never_end=True))
    rec = store(sample)
    assert rec["end_reason"] == "max_turns" and rec["examinee_turns"] == 12 and rec["max_turns"] == 12


def test_should_end_is_obeyed_whatever_eos_was(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(environment=scripted(medsp_env_end_turn=2)))
    rec = store(sample)
    assert rec["end_reason"] == "environment_end" and rec["examinee_turns"] == 2
    assert turns_of(sample, "examinee")[-1]["eos"] is False
    assert turns_of(sample, "environment")[-1]["should_end"] is True


def test_per_action_statuses_and_the_action_log(tmp_path):
    _, sample = run_one(tmp_path, ANAPHYLAXIS, examinee=scripted(medsp_examinee_extra_action=PET))
    rec = store(sample)
    env = turns_of(sample, "environment")[0]
    [pet] = [a for a in env["action_assessments"] if a["raw"] == PET]
    assert pet["status"] == "unsupported" and pet["rationale"] == "Not among this scenario's action results."
    # an out-of-scope action is never reflected in the in-story fields
    in_story = " ".join(env["feedback"] + env["events"] + [env["patient_status"]])
    assert "PET" not in in_story
    log = rec["sim_state"]["action_history"]
    assert log[3] == {
        "turn": 1,
        "raw": PET,
        "canonical_id": PET.lower(),
        "status": "unsupported",
        "rationale": "Not among this scenario's action results.",
    }
    assert log[0]["status"] == "executed" and log[0]["canonical_id"] == "vital signs"
    assert rec["action_statuses"] == {"executed": 8, "pending": 1, "unsupported": 1}
    assert score(sample).value["unsupported_actions"] == 1


def test_assessments_are_matched_to_actions_as_the_official_code_does(tmp_path):
    # without "raw", the i-th action takes the i-th assessment
    _, sample = run_one(
        tmp_path, ANAPHYLAXIS, role_models=roles(environment=scripted(medsp_env_unnamed_assessments=True))
    )
    first = turns_of(sample, "environment")[2]["action_log"]
    assert [(a["raw"], a["status"]) for a in first] == [
        ("Serum tryptase level", "pending"),
        ("Pharmacist (by phone)", "executed"),
        ("Observation bed in the emergency department", "executed"),
    ]
    # an action without any assessment is unsupported, with an empty rationale
    _, sample = run_one(
        tmp_path, ANAPHYLAXIS, role_models=roles(environment=scripted(medsp_env_drop_last_assessment=True))
    )
    last = turns_of(sample, "environment")[0]["action_log"][-1]
    assert last == {
        "turn": 1,
        "raw": "IV access and normal saline bolus",
        "canonical_id": None,
        "status": "unsupported",
        "rationale": "",
    }


def test_progression_rules_are_recorded_not_enforced(tmp_path):
    # the environment moves the state without eos at turn 2: accepted (as in the official code), recorded
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(environment=scripted(medsp_env_advance_turn=2)))
    rec = store(sample)
    assert rec["sim_state"]["phase_history"] == ["0:initial_assessment", "1:plan_discussion"]
    assert rec["progression_anomalies"] == [
        {"turn": 2, "kind": "moved_without_eos", "from": "0:initial_assessment", "to": "1:plan_discussion"}
    ]
    # the eos of turn 4 then finds no state left
    assert rec["end_reason"] == "scenario_complete" and rec["examinee_turns"] == 4


def test_sp_speaks_for_the_patient_side_with_role_prefixes(tmp_path):
    _, sample = run_one(tmp_path, PEDS)
    sp = turns_of(sample, "patient")
    assert all(len(t["speak"]) == 1 and t["speak"][0].startswith("Father: ") for t in sp)
    assert list(sp[0]["actors_present"]) == ["Patient", "Father"] and all(t["warnings"] == [] for t in sp)
    # the examinee reads the utterances (with their prefixes), one per line
    assert "What the patient side said last: Father: He's been wheezing" in turns_of(sample, "examinee")[1]["prompt"]
    # a speaker who is not present is recorded as a warning, never removed (official behaviour)
    _, sample = run_one(tmp_path, PEDS, role_models=roles(patient=scripted(medsp_patient_stray_speaker=True)))
    sp = turns_of(sample, "patient")[0]
    assert sp["speak"][-1].startswith("Neighbour: ") and sp["warnings"] == [
        "speaker 'Neighbour' is not in actors_present"
    ]


def test_sp_answers_every_turn_even_without_speech(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_plan=1))
    # turn 2's speech is a question, the SP is called each turn: as many SP turns as examinee turns
    assert len(turns_of(sample, "patient")) == len(turns_of(sample, "examinee")) == 2


def test_unreadable_environment_reply_is_retried_then_the_case_is_unscored(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(environment=scripted(medsp_env_malformed_attempts=1)))
    rec = store(sample)
    env_turns = len(turns_of(sample, "environment"))
    assert rec["end_reason"] == "scenario_complete"
    assert rec["agent_stats"]["environment"]["unparsed"] == env_turns == rec["agent_stats"]["environment"]["calls"] / 2
    # beyond the retry budget: the encounter ends with error, the sample is kept, not evaluated, counted
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(environment=scripted(medsp_env_malformed_attempts=3)))
    rec = store(sample)
    assert rec["end_reason"] == "error" and "no readable reply after 3 tries" in rec["error"]
    assert [t["role"] for t in rec["history"]] == ["examinee", "patient"] and sample.error is None
    result = score(sample)
    assert result.value["erroneous"] == 1.0 and result.value["judge_unscored"] == 0.0
    assert result.value["micro"] != result.value["micro"]  # NaN: unscored, never 0
    assert result.explanation.startswith("UNSCORED: not evaluated: the encounter ended with an error")
    assert calls(sample, "medsp.evaluator") == []


def test_examinee_reply_repair_and_retry(tmp_path):
    _, sample = run_one(
        tmp_path, BACK_PAIN, examinee=scripted(medsp_examinee_prose_turns=[2], medsp_examinee_malformed_attempts=1)
    )
    rec = store(sample)
    stats = rec["agent_stats"]["examinee"]
    # every turn's first try is truncated JSON; prose (no JSON) is unreadable too: retried, never kept as speech
    assert stats["unparsed"] == 5 and stats["calls"] == 10
    second = turns_of(sample, "examinee")[1]
    assert second["actions"] == ["Lumbar spine MRI request", "Ibuprofen prescription", "Physical therapy referral"]
    assert rec["end_reason"] == "scenario_complete"


def test_unbound_roles_fall_back_and_are_recorded(tmp_path):
    log = run(medsp(), roles={}, log_dir=tmp_path, sample_id=BACK_PAIN)
    sample = log.samples[0]
    assert store(sample)["role_fallbacks"] == ["patient", "environment"]
    assert score(sample).metadata["role_fallbacks"] == ["patient", "environment", "grader"]
    assert score(sample).value["role_fallbacks"] == 3
    infos = {e.data["role_fallback"] for e in sample.events if e.event == "info" and e.source == "roles"}
    assert infos == {"patient", "environment", "grader"}


def test_task_parameters_are_checked(tmp_path):
    for args, message in [
        ({"scaling": "best_of_3"}, "scaling='best_of_3'"),
        ({"max_turns": 0}, "'max_turns': must be at least 1"),
        ({"scaling": "best_of_n", "n": 0}, "'n': must be at least 1"),
        ({"bon_selector": "vote"}, "bon_selector='vote'"),
        ({"panel_rounds": -1}, "'panel_rounds': must be at least 0"),
        ({"judge_batch_size": 0}, "'judge_batch_size': must be at least 1"),
        ({"prompts": str(tmp_path / "nowhere")}, "not a clone of the official MedSP1000 repository"),
    ]:
        with pytest.raises(BadParameter, match=message.replace("(", r"\(")):
            medsp(**args)
