"""CPB-Bench protocols and their prompts; scripted
replies follow each protocol; every prompt cites its source."""

from __future__ import annotations

import pytest
from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser

from bedside.cpb.judges import dialogue_turns
from bedside.cpb.protocols import FailureVerdict, OverreactionVerdict, PersistenceVerdict
from bedside.cpb.protocols import read_self_check as parse_self_check
from bedside.cpb.records import CATEGORIES, ControlCase, CPBCase
from bedside.cpb.store import ContinuationTurn
from bedside.parts import all_protocols, protocol
from bedside.paths import PROMPTS_DIR
from bedside.prompts import load_yaml, render
from bedside.providers.scripted import ScriptedEngine
from bedside.scorers.cpb.judges import failure_messages, overreaction_messages, persistence_messages
from bedside.scorers.simulator import checker_prompt
from bedside.simulator_checks import PatientTranscript, SpokenTurn
from bedside.solvers.cpb import (
    MITIGATIONS,
    doctor_prompt,
    patient_system_prompt,
)
from tests.cpb import synthetic
from tests.cpb.helpers import parse_failure, parse_overreaction, parse_persistence

CASE = CPBCase.model_validate({**synthetic.ACI_CASES[0], "dataset": "ACI"})
CONVERSATION = "Doctor: How are you?\nPatient: I refuse the x-ray."
DIALOGUE = [{"role": "doctor", "message": "How are you?"}, {"role": "patient", "message": "I refuse the x-ray."}]


def _control() -> ControlCase:
    raw = dict(synthetic.MEDITOD_CONTROLS[0])
    raw["complete_conversation"] = raw.pop("conversation")
    return ControlCase.model_validate({**raw, "case_id": "MediTOD_ctrl_901_t2"})


def prompts() -> list[tuple[str, list[ChatMessage], dict]]:
    """(expected protocol, messages, situation: what the scripted role reads about the call in a sample)
    for every CPB prompt and variant."""
    out: list[tuple[str, list[ChatMessage], dict]] = []
    for m in MITIGATIONS:
        doctor = dict(mitigation=m, dialogue=DIALOGUE, analysis="ANALYSIS")
        name = "cpb.doctor_step_by_step" if m == "step_by_step" else "cpb.doctor"
        out.append((name, [ChatMessageUser(content=doctor_prompt(m, CONVERSATION, "ANALYSIS"))], doctor))
    continuation = [ContinuationTurn(round=1, role="patient", message="fine")]
    out += [
        (
            "cpb.analysis",
            [ChatMessageUser(content=render("cpb/analyze_patient.j2", conversation=CONVERSATION))],
            dict(conversation=CONVERSATION),
        ),
        (
            "cpb.self_check",
            [ChatMessageUser(content=render("cpb/self_check.j2", conversation=CONVERSATION, reply="ok"))],
            dict(conversation=CONVERSATION, reply="ok"),
        ),
        ("cpb.failure_judge", failure_messages(CASE, "ok"), dict(reply="ok")),
        ("cpb.failure_judge", failure_messages(CASE, "ok", "current_turn"), dict(reply="ok")),
        ("cpb.failure_judge", failure_messages(CASE, "ok", "min_turn"), dict(reply="ok")),
        (
            "cpb.persistence_judge",
            persistence_messages(CASE, "ok", continuation),
            dict(continuation=[t.model_dump() for t in continuation]),
        ),
        ("cpb.overreaction_judge", overreaction_messages(_control(), "ok"), dict(reply="ok")),
        (
            "cpb.patient",
            [
                ChatMessageSystem(content=patient_system_prompt(CASE)),
                ChatMessageUser(content=render("cpb/patient_turn.j2", conversation=CONVERSATION)),
            ],
            dict(original=[t.model_dump() for t in dialogue_turns(CASE.complete_conversation)], dialogue=DIALOGUE),
        ),
        (
            "cpb.simulator_checker",
            [ChatMessageUser(content=checker_prompt(CHECKED))],
            dict(checked=[t.index for t in CHECKED.patient_turns]),
        ),
    ]
    return out


#: a continuation for the simulator's LLM checker: the original segment, then one continued patient turn
CHECKED = PatientTranscript(
    script={"original_consultation": CONVERSATION},
    turns=(SpokenTurn(0, "doctor", "Hello."), SpokenTurn(1, "patient", "I refuse the x-ray.")),
    checked_from=1,
)


def test_every_protocol_has_a_prompt():
    cases = prompts()
    cpb = {p.name for p in all_protocols() if p.name.startswith("cpb.")}
    assert {name for name, _, _ in cases} == cpb


@pytest.mark.eval
def test_prompt_shapes():
    # the doctor: one user message ending with the cue (not step by step), no system prompt
    for m in MITIGATIONS:
        text = doctor_prompt(m, CONVERSATION, "ANALYSIS")
        assert f"Conversation:\n{CONVERSATION}" in text
        assert text.endswith("\n\nDoctor:") == (m != "step_by_step")
        assert ("ANALYSIS" in text) == (m == "analyze_patient")
        assert ("- Care Resistance:" in text) == (m == "behavior_instruction")
    # the judges: a system prompt and a user message
    for messages in (
        failure_messages(CASE, "ok"),
        persistence_messages(CASE, "ok", []),
        overreaction_messages(_control(), "ok"),
    ):
        assert [type(m) for m in messages] == [ChatMessageSystem, ChatMessageUser]
    assert failure_messages(CASE, "ok")[0].text == persistence_messages(CASE, "ok", [])[0].text  # shared, as upstream


@pytest.mark.eval
def test_reply_models():
    p = protocol("cpb.failure_judge")
    assert p.reply is FailureVerdict and p.bare_bool == "failure"
    assert p.json_schema()["required"] == ["failure"]
    for rule in ("official", "strict"):
        assert p.read("False", rule) == (FailureVerdict(failure=False), True)  # a bare answer (repaired)
    assert protocol("cpb.persistence_judge").reply is PersistenceVerdict
    schema = protocol("cpb.overreaction_judge").json_schema()
    assert protocol("cpb.overreaction_judge").reply is OverreactionVerdict
    assert set(schema["required"]) == {"verdict", "triggered"}
    assert set(schema["properties"]["triggered"]["required"]) == set(load_yaml("cpb/overreaction_types.yaml"))
    prose = (
        "cpb.doctor",
        "cpb.doctor_step_by_step",
        "cpb.analysis",
        "cpb.self_check",
        "cpb.patient",
    )
    assert all(protocol(n).reply is None for n in prose)


@pytest.mark.eval
def test_scripted_replies_follow_each_protocol():
    from bedside.protocols import Protocol

    engine = ScriptedEngine(doctor_style="accommodating")
    readers = {
        "cpb.failure_judge": parse_failure,
        "cpb.persistence_judge": parse_persistence,
        "cpb.overreaction_judge": parse_overreaction,
        "cpb.self_check": parse_self_check,
    }
    for name, messages, situation in prompts():
        p: Protocol = protocol(name)
        completion = engine.reply_for(name, p.tag(messages), 0, situation)
        assert completion.strip(), name
        if name in readers:
            readers[name](completion)  # readable
        if name == "cpb.failure_judge":
            assert completion in ("True", "False")


UPSTREAM_SENTENCES = (  # texts of the unlicensed official code that must not be copied into our prompts
    "provide a response as the doctor",
    "Respond with ONLY",
    "Evaluation Result (True or False)",
    "Analysis of Patient's Query",
    "Based on the conversation history, provide",
    "Doctor's Response to Evaluate",
    "Doctor Failure Behavior",
    "Conversation Context:",
    "FAILURE DEFINITION for",
    "CONTINUATION DIALOGUE",
    "Doctor's Latest Response",
    "INITIAL DOCTOR RESPONSE",
)


def test_every_prompt_file_cites_its_source_and_copies_nothing():
    for path in sorted((PROMPTS_DIR / "cpb").iterdir()):
        text = path.read_text(encoding="utf-8")
        head = text[:1500]
        assert "arXiv 2603.29373" in head or "bedside addition" in head, path.name
        assert "BEDSIDE RECONSTRUCTION" in head, path.name
        for sentence in UPSTREAM_SENTENCES:
            assert sentence.lower() not in text.lower(), (path.name, sentence)


def test_failure_criteria_follow_the_paper_definitions():
    criteria = load_yaml("cpb/failure_criteria.yaml")
    assert set(criteria) == set(CATEGORIES)
    assert "contradictory information without resolving" in criteria["Information Contradiction"]["criterion"]
    assert "incorrect medical claim without correcting it" in criteria["Factual Inaccuracy"]["criterion"]
    assert "self-diagnosis without clinical verification" in criteria["Self-diagnosis"]["criterion"]
    assert "refusal of care without validation" in criteria["Care Resistance"]["criterion"]
    assert {c["short"] for c in criteria.values()} == set(CATEGORIES.values())
