"""CPB-Bench protocols match their prompt files; every prompt cites its source; the stress overlays."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

from bedside.paths import PROMPTS_DIR
from bedside.prompts import load_yaml, render
from bedside.protocols import all_protocols, detect
from bedside.records.cpb import CATEGORIES, ControlCase, CPBCase
from bedside.scorers.cpb import failure_prompt, overreaction_prompt, persistence_prompt
from bedside.solvers.cpb import doctor_system_prompt, patient_system_prompt
from tests.conftest import scripted
from tests.cpb import synthetic

CASE = CPBCase.model_validate({**synthetic.ACI_CASES[0], "dataset": "ACI"})


def rendered() -> dict[str, str]:
    return {
        "cpb.doctor": doctor_system_prompt("none"),
        "cpb.doctor_step_by_step": doctor_system_prompt("step_by_step"),
        "cpb.analysis": render("cpb/analyze_patient.j2", conversation="Doctor: hi\nPatient: hello"),
        "cpb.self_check": render("cpb/self_check.j2", conversation="Doctor: hi", reply="ok"),
        "cpb.failure_judge": failure_prompt(CASE, "ok"),
        "cpb.persistence_judge": persistence_prompt(CASE, "ok", [{"role": "patient", "message": "fine"}]),
        "cpb.patient": patient_system_prompt(CASE),
    }


def test_markers_open_their_prompts_and_are_detected():
    texts = rendered()
    raw = dict(synthetic.MEDITOD_CONTROLS[0])
    raw["complete_conversation"] = raw.pop("conversation")
    control = ControlCase.model_validate({**raw, "case_id": "MediTOD_ctrl_901_t2"})
    texts["cpb.overreaction_judge"] = overreaction_prompt(control, "ok")
    cpb = [p for p in all_protocols() if p.name.startswith("cpb.")]
    assert {p.name for p in cpb} == set(texts)
    for protocol in cpb:
        text = texts[protocol.name]
        assert protocol.marker in text.splitlines()[0], protocol.name
        messages = (
            [ChatMessageSystem(content=text), ChatMessageUser(content="I refuse.")]
            if protocol.where == "system"
            else [ChatMessageUser(content=text)]
        )
        assert detect(messages).name == protocol.name
    for variant in ("behavior_instruction", "analyze_patient", "self_check"):
        assert detect([ChatMessageSystem(content=doctor_system_prompt(variant, "x")), ChatMessageUser(content="hi")]).name == "cpb.doctor"
    judges = {p.name: p.json_schema() for p in cpb}
    assert judges["cpb.failure_judge"]["required"] == ["failure", "reason"]
    assert set(judges["cpb.overreaction_judge"]["properties"]["triggered"]["required"]) == set(load_yaml("cpb/overreaction_types.yaml"))
    assert judges["cpb.doctor"] is None and judges["cpb.patient"] is None


def test_scripted_judges_answer_in_their_schema():
    model = scripted(doctor_style="accommodating")
    for name in ("cpb.failure_judge", "cpb.persistence_judge", "cpb.self_check"):
        out = asyncio.run(model.generate([ChatMessageUser(content=rendered()[name])], config=GenerateConfig()))
        data = json.loads(out.completion)
        [protocol] = [p for p in all_protocols() if p.name == name]
        assert set(protocol.json_schema()["required"]) <= set(data), name


def test_every_prompt_file_cites_its_source():
    for path in sorted((PROMPTS_DIR / "cpb").iterdir()):
        head = path.read_text(encoding="utf-8")[:1200]
        assert "arXiv 2603.29373" in head or "bedside addition" in head, path.name
        if path.name not in ("kickoff.j2", "continue_cue.j2"):
            assert "BEDSIDE RECONSTRUCTION" in head or "verbatim" in head, path.name


def test_failure_criteria_follow_the_paper_definitions():
    criteria = load_yaml("cpb/failure_criteria.yaml")
    assert set(criteria) == set(CATEGORIES)
    assert "contradictory information without resolving" in criteria["Information Contradiction"]["criterion"]
    assert "incorrect medical claim without correcting it" in criteria["Factual Inaccuracy"]["criterion"]
    assert "self-diagnosis without clinical verification" in criteria["Self-diagnosis"]["criterion"]
    assert "refusal of care without validation" in criteria["Care Resistance"]["criterion"]
    assert {c["short"] for c in criteria.values()} == set(CATEGORIES.values())


def test_stress_overlays_for_the_discharge_patient():
    overlays = load_yaml("cpb/stress_overlays.yaml")["behaviors"]
    assert set(overlays) == {"contradiction", "false_belief", "self_diagnosis", "care_resistance"}
    assert {CATEGORIES[o["cpb_category"]] for o in overlays.values()} == set(overlays)
    for key, item in overlays.items():
        text = item["overlay"]
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
        assert 3 <= len(sentences) <= 5, (key, len(sentences))
        assert text.startswith("During this session you") and " you " in text
        assert "{" not in text  # plain text, injected as is
    assert "educator acknowledges your" in overlays["care_resistance"]["overlay"]


@pytest.mark.parametrize("mitigation", ["none", "step_by_step", "behavior_instruction", "analyze_patient"])
def test_doctor_prompt_variants_render(mitigation):
    text = doctor_system_prompt(mitigation, "ANALYSIS")
    assert ("ANALYSIS" in text) == (mitigation == "analyze_patient")
    assert ("Care Resistance:" in text) == (mitigation == "behavior_instruction")
