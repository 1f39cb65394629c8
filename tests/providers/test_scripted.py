"""The scripted provider: dispatch on the protocol tag, determinism, usage, options; marker detection (loopback)."""

from __future__ import annotations

import asyncio
import json

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

from bedside.persona import assign_persona
from bedside.prompts import render
from bedside.protocols import all_protocols, detect, tag_of
from bedside.protocols.discharge import COMPREHENSION, EDUCATOR, PATIENT
from bedside.providers.scripted import ScriptedEngine
from bedside.providers.scripts.discharge import educator_plan, note_sections
from bedside.records.discharge import load_cases
from bedside.samples.discharge import DEMO_CASES
from bedside.solvers.discharge import educator_prompt, patient_prompt
from tests.conftest import scripted

CASE = load_cases(DEMO_CASES)[0]
PERSONA = assign_persona(CASE.case_id, 0)


def generate(model, messages, seed=None):
    return asyncio.run(model.generate(messages, config=GenerateConfig(seed=seed)))


def test_protocol_markers_match_the_prompt_files():
    rendered = {
        "discharge.educator": educator_prompt(CASE, PERSONA),
        "discharge.patient": patient_prompt(CASE, PERSONA),
        "discharge.monitor": render("discharge/monitor_system.j2"),
        "discharge.comprehension": render("discharge/comprehension_question.j2", question="q?"),
        "discharge.judge_quality": render("discharge/judge_conversation_quality.j2", conversation=["Educator: hi"]),
        "discharge.judge_checklist": render("discharge/judge_topic_checklist.j2", questions=[], patient_note="n", conversation=[]),
        "discharge.judge_reference": render("discharge/judge_comprehension_reference.j2", discharge_note="n", question="q"),
        "discharge.judge_comprehension": render("discharge/judge_comprehension_grade.j2", items=[]),
        "discharge.judge_factual": render("discharge/judge_factual_consistency.j2", source="s"),
    }
    assert {p.name for p in all_protocols() if p.name.startswith("discharge.")} == set(rendered)
    for protocol in all_protocols():
        if protocol.name.startswith("discharge."):
            assert protocol.marker in rendered[protocol.name], protocol.name


def test_scripted_dispatches_on_the_tag_not_the_prompt():
    pat = [ChatMessageSystem(content=patient_prompt(CASE, PERSONA)), ChatMessageUser(content="Hello")]
    assert "no script" in generate(scripted(), pat).completion  # untagged: not recognised from its text
    assert json.loads(generate(scripted(), PATIENT.tag(pat)).completion)["utterance"]
    # the same prompt tagged as the educator's protocol gets the educator's script
    assert not generate(scripted(), EDUCATOR.tag(pat)).completion.startswith("{")
    tagged = PATIENT.tag(pat)
    assert tag_of(tagged).name == "discharge.patient" and tag_of(tagged).schema["required"] == ["utterance"]
    assert pat[-1].metadata is None  # tagging copies


def test_each_role_detected():
    edu = [ChatMessageSystem(content=educator_prompt(CASE, PERSONA)), ChatMessageUser(content="begin")]
    pat = [ChatMessageSystem(content=patient_prompt(CASE, PERSONA)), ChatMessageUser(content="Hello")]
    comp = pat + [ChatMessageUser(content=render("discharge/comprehension_question.j2", question="What?"))]
    assert detect(edu).name == "discharge.educator" and detect(edu).json_schema() is None
    assert detect(pat).name == "discharge.patient" and detect(pat).json_schema()["required"] == ["utterance"]
    assert detect(comp).name == "discharge.comprehension"
    assert detect([ChatMessageUser(content="hi")]) is None


def test_same_input_same_bytes_and_usage_always_set():
    model = scripted()
    msgs = PATIENT.tag([ChatMessageSystem(content=patient_prompt(CASE, PERSONA)), ChatMessageUser(content="How are you feeling?")])
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
    assert "all set to go home" in generate(scripted(), EDUCATOR.tag(msgs)).completion


def test_unknown_option_is_an_error():
    with pytest.raises(ValueError, match="unknown option"):
        ScriptedEngine(monitor_fail_turn=3)


def test_turn_lists_accept_cli_strings():
    engine = ScriptedEngine(monitor_warn_turns="3,5")
    assert engine.options["bedside.providers.scripts.discharge"].monitor_warn_turns == [3, 5]
    assert ScriptedEngine(monitor_warn_turns=3).options["bedside.providers.scripts.discharge"].monitor_warn_turns == [3]


def test_unknown_prompt_gets_a_clear_answer():
    out = generate(scripted(), [ChatMessageUser(content="What is 2+2?")])
    assert "no script" in out.completion


def test_each_configuration_has_its_own_cache_identity():
    # Inspect's cache keys on model name + base_url, not model args
    plain, faulty = scripted(), scripted(judge_malformed=["quality"])
    assert plain.api.base_url != faulty.api.base_url
    assert scripted().api.base_url == plain.api.base_url
