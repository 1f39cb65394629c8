"""MedSP1000's controller bookkeeping as the orchestrator drives it (``Session.before_turn`` /
``Session.after_reply``), without a model: the scenario state changes only through these two calls."""

from __future__ import annotations

import json

import pytest

from bedside.end_reasons import EndReason
from bedside.medsp import MedSPEndReason
from bedside.medsp.protocols import read_environment, read_examinee, read_patient
from bedside.medsp.records import load_scenarios
from bedside.medsp.samples import DEMO_DIR
from bedside.records import Turn
from bedside.solvers.medsp import BedsidePrompts, Session

SCENARIO = next(s for s in load_scenarios(DEMO_DIR).scenarios if s.case_id == "bedside_demo_anaphylaxis")


def environment(**fields) -> str:
    base = {
        "feedback": ["BP 80/40"],
        "events": [],
        "actors_present": {},
        "patient_status": "hypotensive",
        "action_assessments": [
            {
                "raw": "Give IM epinephrine",
                "interpreted_action": "epinephrine_im",
                "status": "executed",
                "rationale": "indicated",
            }
        ],
        "progress_index": 0,
        "state_label": "initial_assessment",
        "should_end": False,
        "completion_reason": "",
    }
    return json.dumps({**base, **fields})


def turn_pair(session: Session, eos: bool) -> list[Turn]:
    exam = read_examinee(
        json.dumps({"speak": "Epinephrine now.", "actions": ["Give IM epinephrine", "Order a tryptase"], "eos": eos})
    )
    exam.data = {**exam.data, "turn": session.state.total_turns, "prompt": "P"}
    patient = read_patient(json.dumps({"speak": ["I can't breathe"], "actors_present": {"Patient": "speaks"}}))
    return [
        Turn(index=0, role="examinee", message=exam.message, data=exam.data),
        Turn(index=1, role="patient", message=patient.message, data=patient.data),
    ]


def test_the_examinee_turn_is_counted_before_its_prompt_and_only_for_the_examinee():
    session = Session(scenario=SCENARIO, prompts=BedsidePrompts(), max_turns=3)
    assert session.state.total_turns == 0
    for role in ("patient", "environment"):
        session.before_turn(role, [])
    assert session.state.total_turns == 0
    session.before_turn("examinee", [])
    assert (session.state.total_turns, session.state.phase_turns) == (1, 1)


@pytest.mark.eval
def test_the_environment_reply_advances_the_state_and_records_the_turn():
    session = Session(scenario=SCENARIO, prompts=BedsidePrompts(), max_turns=3)
    session.before_turn("examinee", [])
    history = turn_pair(session, eos=True)
    assert session.after_reply("patient", history[:1], read_patient('{"speak": ["ok"]}')) is None
    reply = read_environment(environment(progress_index=1, state_label="treatment"))
    reply.data["prompt"] = "ENV PROMPT"
    assert session.after_reply("environment", history, reply) is None
    s = session.state
    assert (s.progress_index, s.current_phase_id, s.patient_status) == (1, "treatment", "hypotensive")
    assert s.phase_history == ["0:initial_assessment", "1:treatment"] and len(s.turns) == 1
    # the action log: an assessed action by its text, an unassessed one as unsupported
    assert [(a["raw"], a["status"]) for a in s.action_history] == [
        ("Give IM epinephrine", "executed"),
        ("Order a tryptase", "unsupported"),
    ]
    assert dict(session.statuses) == {"executed": 1, "unsupported": 1}
    # what the turn changed is in the environment turn's data, with the turn, eos and its prompt last
    assert reply.data["state_moved"] is True and reply.data["turn"] == 1 and reply.data["eos"] is True
    assert list(reply.data)[-3:] == ["turn", "eos", "prompt"] and reply.data["prompt"] == "ENV PROMPT"
    assert "end_reason" not in reply.data and session.anomalies == []


@pytest.mark.eval
def test_end_reasons_of_the_environment():
    for eos, should_end, expected in (
        (True, True, MedSPEndReason.SCENARIO_COMPLETE),
        (False, True, MedSPEndReason.ENVIRONMENT_END),
    ):
        session = Session(scenario=SCENARIO, prompts=BedsidePrompts(), max_turns=3)
        session.before_turn("examinee", [])
        reply = read_environment(environment(should_end=should_end, completion_reason="done"))
        reply.data["prompt"] = "P"
        assert session.after_reply("environment", turn_pair(session, eos), reply) is expected
        assert reply.data["end_reason"] == expected and session.state.completion_reason == "done"
    session = Session(scenario=SCENARIO, prompts=BedsidePrompts(), max_turns=1)
    session.before_turn("examinee", [])
    reply = read_environment(environment())
    reply.data["prompt"] = "P"
    assert session.after_reply("environment", turn_pair(session, False), reply) is EndReason.MAX_TURNS


@pytest.mark.eval
def test_a_move_without_eos_is_recorded_as_an_anomaly_never_enforced():
    session = Session(scenario=SCENARIO, prompts=BedsidePrompts(), max_turns=3)
    session.before_turn("examinee", [])
    reply = read_environment(environment(progress_index=2, state_label="disposition"))
    reply.data["prompt"] = "P"
    session.after_reply("environment", turn_pair(session, eos=False), reply)
    assert session.state.progress_index == 2
    assert [a["kind"] for a in session.anomalies] == ["moved_without_eos", "skipped_states"]
