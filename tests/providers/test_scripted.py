"""The scripted provider: dispatch on the protocol tag, determinism, usage, options; no prompt markers."""

from __future__ import annotations

import asyncio
import json

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

from bedside.discharge.mimic.extract import note_sections
from bedside.discharge.persona import assign_persona
from bedside.discharge.protocols import EDUCATOR, PATIENT
from bedside.discharge.records import load_cases
from bedside.discharge.samples import DEMO_CASES
from bedside.discharge.scripted import educator_plan
from bedside.parts import all_protocols
from bedside.protocols import tag_of
from bedside.providers.scripted import ScriptedEngine
from bedside.solvers.discharge.encounter import educator_prompt, patient_prompt
from tests.conftest import scripted

CASE = load_cases(DEMO_CASES)[0]
PERSONA = assign_persona(CASE.case_id, 0)
#: what the scripted educator and patient read about their calls (in a sample: its metadata and events)
EDUCATOR_SITUATION = {"discharge_note": CASE.discharge_note}
PATIENT_SITUATION = {"personality": PERSONA.personality, "behavior": "none", "corrected": False}
ENGINE = ScriptedEngine()


def generate(model, messages, seed=None):
    return asyncio.run(model.generate(messages, config=GenerateConfig(seed=seed)))


def test_scripted_dispatches_on_the_tag_not_the_prompt():
    pat = [ChatMessageSystem(content=patient_prompt(CASE, PERSONA)), ChatMessageUser(content="Hello")]
    assert "no script" in generate(scripted(), pat).completion  # untagged: not recognised from its text
    assert json.loads(ENGINE.reply_for(PATIENT.name, PATIENT.tag(pat), 0, PATIENT_SITUATION))["utterance"]
    # the same prompt tagged as the educator's protocol gets the educator's script
    assert not ENGINE.reply_for(EDUCATOR.name, EDUCATOR.tag(pat), 0, EDUCATOR_SITUATION).startswith("{")
    tagged = PATIENT.tag(pat)
    assert tag_of(tagged).name == "discharge.patient" and tag_of(tagged).schema["required"] == ["utterance"]
    assert pat[-1].metadata is None  # tagging copies


def test_no_protocol_carries_a_marker_sentence():
    """The test doubles dispatch on the call tag (metadata in process; on the loopback test channel, a
    header and a body field over HTTP): no protocol declares prompt text to be recognised by."""
    for protocol in all_protocols():
        assert not hasattr(protocol, "marker") and not hasattr(protocol, "where"), protocol.name


def test_same_input_same_bytes_and_usage_always_set(monkeypatch):
    from bedside.discharge import scripted as scripts

    # outside a sample: the patient's situation as a sample would give it
    monkeypatch.setitem(scripts.SITUATIONS, "discharge.patient", lambda call: dict(PATIENT_SITUATION))
    model = scripted()
    msgs = PATIENT.tag(
        [ChatMessageSystem(content=patient_prompt(CASE, PERSONA)), ChatMessageUser(content="How are you feeling?")]
    )
    a, b = generate(model, msgs), generate(scripted(), msgs)
    assert a.completion == b.completion
    assert json.loads(a.completion)["utterance"]
    assert a.usage is not None and a.usage.input_tokens > 0 and a.usage.output_tokens > 0


def test_educator_walks_the_notes_topics_then_signs_off():
    plan = educator_plan(CASE.discharge_note)
    topics = [t for t, _ in plan]
    assert topics[0] == "opening" and {"diagnosis", "medications", "follow_up", "return"} <= set(topics)
    sections = note_sections(CASE.discharge_note)
    assert "Discharge Diagnosis" in sections and "Followup Instructions" in sections
    diagnosis_turn = dict(plan)["diagnosis"]
    assert sections["Discharge Diagnosis"].split()[1] in diagnosis_turn  # grounded in the note
    msgs = [ChatMessageSystem(content=educator_prompt(CASE, PERSONA)), ChatMessageUser(content="begin")]
    from inspect_ai.model import ChatMessageAssistant

    for _ in plan:
        msgs += [ChatMessageAssistant(content="..."), ChatMessageUser(content="ok")]
    assert "all set to go home" in ENGINE.reply_for(EDUCATOR.name, EDUCATOR.tag(msgs), 0, EDUCATOR_SITUATION)


def test_unknown_option_is_an_error():
    with pytest.raises(ValueError, match="unknown option"):
        ScriptedEngine(monitor_fail_turn=3)


def test_turn_lists_accept_cli_strings():
    engine = ScriptedEngine(monitor_warn_turns="3,5")
    assert engine.options["bedside.discharge.scripted"].monitor_warn_turns == [3, 5]
    assert ScriptedEngine(monitor_warn_turns=3).options["bedside.discharge.scripted"].monitor_warn_turns == [3]


def test_unknown_prompt_gets_a_clear_answer():
    out = generate(scripted(), [ChatMessageUser(content="What is 2+2?")])
    assert "no script" in out.completion


def test_each_configuration_has_its_own_cache_identity():
    # Inspect's cache keys on model name + base_url, not model args
    plain, faulty = scripted(), scripted(judge_malformed=["quality"])
    assert plain.api.base_url != faulty.api.base_url
    assert scripted().api.base_url == plain.api.base_url
