"""DischargeBench encounter: a full session and every monitor-policy path (paper Algorithm 1)."""

from __future__ import annotations

import json

import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from bedside.tasks.discharge import discharge
from tests.conftest import model_inputs, run, scripted, store

pytestmark = pytest.mark.eval

CORRECTION = "CORRECTION FOR THIS RESPONSE"


def one_sample(tmp_path, patient=None, monitor=None, educator=None, **task_args):
    log = run(
        discharge(**task_args),
        educator=educator,
        roles={"patient": patient or scripted(), "monitor": monitor or scripted()},
        log_dir=tmp_path,
        limit=1,
    )
    return log, log.samples[0]


def system_prompt(messages) -> str:
    return "\n".join(m.text for m in messages if isinstance(m, ChatMessageSystem))


def test_full_encounter_end_to_end(tmp_path):
    log, sample = one_sample(tmp_path)
    rec = store(sample)
    history = rec["history"]
    assert rec["end_reason"] == "clean_complete"
    assert len(history) >= 10
    # turns alternate, educator first; the patient closes after the educator's sign-off
    assert [t["role"] for t in history[:4]] == ["educator", "patient", "educator", "patient"]
    assert "all set to go home" in history[-2]["message"] and "Goodbye" in history[-1]["message"]
    # every turn was judged by the monitor; the verdict is stored with the turn
    assert all(t["verdict"]["verdict"] == "PASS" for t in history)
    # the educator's view is the sample's messages: system prompt, kickoff, then the dialogue
    msgs = sample.messages
    assert isinstance(msgs[0], ChatMessageSystem) and "Patient Educator" in msgs[0].text
    assert isinstance(msgs[1], ChatMessageUser) and isinstance(msgs[2], ChatMessageAssistant)
    assert [m.text for m in msgs[2:]] == [t["message"] for t in history]
    # the patient sees its own turns as JSON and the educator's as plain text
    last_patient_call = model_inputs(sample, "patient")[-1]
    assert json.loads(last_patient_call[2].text) == {"utterance": history[1]["message"]}
    assert last_patient_call[1].text == history[0]["message"]
    # six comprehension answers, asked with the full conversation history (Figure 9 prompt)
    comp = rec["comprehension"]
    assert [c["id"] for c in comp] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert all(c["answer"] for c in comp)
    comp_calls = [m for m in model_inputs(sample, "patient") if "Based on the conversation you just had" in m[-1].text]
    assert len(comp_calls) == 6 and all(
        len(m) == 1 + len(history) + 1 for m in comp_calls
    )  # system + dialogue + question
    # persona recorded for stratification; outcome scored
    assert sample.metadata["personality"] == rec["persona"]["personality"]
    assert sample.scores["encounter_outcome"].value["clean_complete"] == 1.0
    assert rec["role_fallbacks"] == []


def test_soft_correction_lasts_exactly_one_turn(tmp_path):
    # WARN on the patient's turn at history index 3 -> correction in the patient's next prompt only
    _, sample = one_sample(tmp_path, monitor=scripted(monitor_warn_turns=[3]))
    rec = store(sample)
    history = rec["history"]
    assert history[3]["was_corrected"] and history[3]["role"] == "patient"
    assert rec["soft_corrections"] == 1
    dialogue_calls = [m for m in model_inputs(sample, "patient") if "Based on the conversation" not in m[-1].text]
    with_correction = [i for i, m in enumerate(dialogue_calls) if CORRECTION in system_prompt(m)]
    # patient calls: turn 1 -> call 0, turn 3 -> call 1, turn 5 -> call 2, ...
    assert with_correction == [2]
    assert history[5]["correction_applied"] and CORRECTION in history[5]["correction_applied"]
    assert history[7]["correction_applied"] is None
    # the WARNed turn itself stays in the conversation
    assert sample.messages[2 + 3].text == history[3]["message"]
    # the educator is never corrected
    assert not any(CORRECTION in system_prompt(m) for m in model_inputs(sample, None))


def test_discarded_turn_is_invisible_to_both_agents(tmp_path):
    # the patient breaks character at its 2nd turn on the first attempt only -> severe FAIL -> regenerate
    _, sample = one_sample(tmp_path, patient=scripted(break_character_turns=[2], break_character_attempts=1))
    rec = store(sample)
    assert rec["end_reason"] == "clean_complete"
    [discard] = rec["discards"]
    assert discard["index"] == 3 and discard["attempt"] == 1 and "As an AI" in discard["message"]
    assert discard["verdict"]["severity"] == "severe"
    assert rec["history"][3]["attempts"] == 2 and "As an AI" not in rec["history"][3]["message"]
    # the regeneration carried the correction; nothing of the discarded text reached any agent later
    assert CORRECTION in rec["history"][3]["correction_applied"]
    later_inputs = model_inputs(sample, None) + model_inputs(sample, "patient")
    for messages in later_inputs:
        assert not any("As an AI language model" in m.text for m in messages if not isinstance(m, ChatMessageSystem))
    assert not any("As an AI" in m.text for m in sample.messages)
    # the correction used for the regeneration is not carried to the patient's following turn
    assert rec["history"][5]["correction_applied"] is None
    # the discard is visible in the transcript
    discards = [e for e in sample.events if e.event == "info" and e.source == "discard"]
    assert len(discards) == 1


def test_hard_stop_after_retry_budget(tmp_path):
    # persistent character break at the patient's 2nd turn: 1 try + max_retries=2 regenerations
    log, sample = one_sample(tmp_path, patient=scripted(break_character_turns=[2], break_character_attempts=99))
    rec = store(sample)
    assert rec["end_reason"] == "hard_stop"
    assert [d["attempt"] for d in rec["discards"]] == [1, 2, 3]
    assert len(rec["history"]) == 3  # the failing turn never entered the history
    assert sample.scores["encounter_outcome"].value["erroneous"] == 1.0
    # the erroneous sample is kept and still evaluated (comprehension asked)
    assert len(rec["comprehension"]) == 6


def test_retry_budget_is_a_parameter(tmp_path):
    _, sample = one_sample(
        tmp_path, patient=scripted(break_character_turns=[2], break_character_attempts=99), max_retries=0
    )
    rec = store(sample)
    assert rec["end_reason"] == "hard_stop" and len(rec["discards"]) == 1


def test_completion_ignored_below_minimum_turns(tmp_path):
    # the monitor claims completion at history index 3 (4 turns < 10): logged, ignored, session goes on
    _, sample = one_sample(tmp_path, monitor=scripted(monitor_complete_turns=[3]))
    rec = store(sample)
    assert rec["completion_ignored"] == [3]
    assert rec["end_reason"] == "clean_complete" and len(rec["history"]) > 10
    ignored = [
        e for e in sample.events if e.event == "info" and e.source == "encounter" and "ignored" in (e.data or {})
    ]
    assert len(ignored) == 1


def test_completion_honoured_at_minimum_turns(tmp_path):
    # completion claimed at index 9 -> history holds 10 turns -> clean complete right there
    _, sample = one_sample(tmp_path, monitor=scripted(monitor_complete_turns=[9]))
    rec = store(sample)
    assert rec["end_reason"] == "clean_complete" and len(rec["history"]) == 10


def test_max_turn_ceiling(tmp_path):
    _, sample = one_sample(tmp_path, monitor=scripted(monitor_never_complete=True), max_turns=13)
    rec = store(sample)
    assert rec["end_reason"] == "max_turns"
    assert len(rec["history"]) == 13


def test_context_overflow_ends_with_error_and_keeps_the_sample(tmp_path):
    # the patient's context window fills up mid-session
    log, sample = one_sample(tmp_path, patient=scripted(context_window=2600))
    rec = store(sample)
    assert rec["end_reason"] == "error"
    assert "context window exceeded" in rec["error"]
    assert 0 < len(rec["history"]) < 20
    assert sample.error is None  # the sample is kept, marked by its end reason
    assert sample.scores["encounter_outcome"].answer == "error"


def test_educator_turns_are_observed_never_changed(tmp_path):
    # a FAIL on an educator turn (index 2) is logged but the turn is accepted as is
    _, sample = one_sample(tmp_path, monitor=scripted(monitor_fail_turns=[2]))
    rec = store(sample)
    assert rec["history"][2]["role"] == "educator"
    assert rec["history"][2]["verdict"]["verdict"] == "FAIL" and rec["history"][2]["attempts"] == 1
    assert rec["discards"] == [] and rec["soft_corrections"] == 0


def test_moderate_fail_on_patient_is_a_soft_correction(tmp_path):
    _, sample = one_sample(tmp_path, monitor=scripted(monitor_fail_turns=[3], monitor_fail_severity="moderate"))
    rec = store(sample)
    assert rec["discards"] == [] and rec["history"][3]["was_corrected"]
    assert CORRECTION in rec["history"][5]["correction_applied"]


def test_monitor_verdict_retried_when_unreadable(tmp_path):
    _, sample = one_sample(
        tmp_path, monitor=scripted(monitor_malformed_attempts=1, monitor_never_complete=True), max_turns=20
    )
    rec = store(sample)
    stats = rec["agent_stats"]["monitor"]
    assert stats["unparsed_verdicts"] == 0 and stats["unparsed_replies"] == 20  # one retry per turn, all read
    assert rec["end_reason"] == "max_turns" and all(t["verdict"] is not None for t in rec["history"])


def test_monitor_verdict_unreadable_after_retries_is_a_system_failure(tmp_path):
    """Paper Section 3.4: JSON-decoding errors are system-level failures, never an unsupervised turn.
    The educator's turn 0 is only observed (kept, its unreadable observation counted); the patient's
    turn 1 is supervised: its unreadable verdict ends the session."""
    _, sample = one_sample(
        tmp_path, monitor=scripted(monitor_malformed_attempts=3, monitor_never_complete=True), max_turns=20
    )
    rec = store(sample)
    stats = rec["agent_stats"]["monitor"]
    assert stats["unparsed_verdicts"] == 2 and stats["unparsed_replies"] == 6  # retried twice per turn, then stopped
    assert rec["end_reason"] == "system_failure" and [t["role"] for t in rec["history"]] == ["educator"]
    assert rec["unread_observations"] == [0] and rec["history"][0]["verdict"] is None
    assert "turn 1 (patient)" in rec["error"]
    outcome = sample.scores["encounter_outcome"].value
    assert outcome["monitor_unparsed"] == 2 and outcome["system_failure"] == 1


def test_unreadable_observation_of_an_educator_turn_never_blocks_the_session(tmp_path):
    """Issue 18 (moved to 17): an Education Monitor observation of an educator turn that stays
    unreadable is recorded and counted; the session goes on (session_complete reads as false)."""
    _, sample = one_sample(
        tmp_path, monitor=scripted(monitor_malformed_attempts=3, monitor_malformed_roles=["educator"]), max_turns=20
    )
    rec = store(sample)
    educator_turns = [t["index"] for t in rec["history"] if t["role"] == "educator"]
    assert rec["end_reason"] not in ("system_failure", "error") and len(educator_turns) >= 2
    assert rec["unread_observations"] == educator_turns  # every educator turn: kept, recorded
    assert all(t["verdict"] is None for t in rec["history"] if t["role"] == "educator")
    assert all(t["verdict"] is not None for t in rec["history"] if t["role"] == "patient")
    assert rec["agent_stats"]["monitor"]["unparsed_verdicts"] == len(educator_turns)
    events = [
        e.data
        for e in sample.events
        if e.event == "info"
        and e.source == "monitor"
        and isinstance(e.data, dict)
        and e.data.get("unreadable_observation")
    ]
    assert [e["turn"] for e in events] == educator_turns
    assert sample.scores["encounter_outcome"].value["system_failure"] == 0


def test_unreadable_verdict_of_a_patient_turn_is_still_a_system_failure(tmp_path):
    _, sample = one_sample(
        tmp_path, monitor=scripted(monitor_malformed_attempts=3, monitor_malformed_roles=["patient"]), max_turns=20
    )
    rec = store(sample)
    assert rec["end_reason"] == "system_failure" and rec["unread_observations"] == []
    assert [t["role"] for t in rec["history"]] == ["educator"]


def test_a_verdict_without_session_complete_reads_as_false():
    from bedside.discharge.protocols import MONITOR

    verdict, _ = MONITOR.read('{"verdict": "PASS"}')
    assert verdict.session_complete is False
    verdict, _ = MONITOR.read('{"verdict": "WARN", "severity": "minor", "session_complete": null}')
    assert verdict.session_complete is False


def test_patient_json_repaired_or_retried(tmp_path):
    _, sample = one_sample(tmp_path, patient=scripted(fenced_json_turns=[1], broken_json_turns=[2]))
    rec = store(sample)
    stats = rec["agent_stats"]["patient"]
    assert stats["repaired"] == 1  # fenced JSON read and counted
    assert stats["unparsed"] == 1  # truncated JSON retried once
    assert rec["end_reason"] == "clean_complete"
    assert not rec["history"][1]["message"].startswith("```")
