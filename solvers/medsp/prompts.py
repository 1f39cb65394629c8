"""The MedSP1000 simulation's prompt sets: bedside's own wording (``prompts/medsp/``, default) or the official
texts from a clone of the official repository (``prompts=PATH``, :mod:`bedside.medsp.official`). A prompt set
builds the examinee's, the SP's and the environment's system prompts, each turn's user messages (from the
scenario state, :class:`~bedside.medsp.records.SimState`) and the test-time scaling prompts. The evaluator's
prompts are the scorer's (:mod:`bedside.scorers.medsp.evaluator`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from bedside.medsp.official import OfficialPromptsError, OfficialSource, _Bundle, is_bedside, official_source
from bedside.medsp.protocols import speech_text
from bedside.medsp.records import INITIAL_STATUS, Scenario, SimState
from bedside.prompts import load_yaml, render

__all__ = ["BedsidePrompts", "OfficialPrompts", "OfficialPromptsError", "PromptSet", "load_prompt_set"]


class BedsidePrompts:
    """bedside's own wording (``prompts/medsp/``), with the information content of the official prompts."""

    name = "bedside"

    @staticmethod
    def texts() -> dict[str, str]:
        return load_yaml("medsp/texts.yaml")

    # system prompts
    def examinee_system(self, scenario: Scenario) -> str:
        return render("medsp/examinee.j2", packet=scenario.examinee.text())

    def patient_system(self, scenario: Scenario) -> str:
        return render("medsp/patient.j2", packet=scenario.sp_actor.text())

    def environment_system(self, scenario: Scenario) -> str:
        return render("medsp/environment.j2", packet=scenario.environment_controller.text())

    # state texts
    def first_feedback(self) -> str:
        return self.texts()["first_feedback"]

    def opening_context(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.texts()["opening_context"].format(
            case_title=case_title, patient_status=state.patient_status or "unknown"
        )

    # per-turn user messages
    def examinee_turn(self, case_id: str, case_title: str, state: SimState) -> str:
        return render(
            "medsp/examinee_turn.j2",
            case_title=case_title,
            patient_status=state.patient_status or "unknown",
            state_label=state.current_phase_id,
            changed=state.latest_state_changed,
            events=state.latest_environment_events,
            feedback=state.latest_environment_feedback,
            patient_speech=speech_text(state.latest_patient_speak) or self.texts()["no_patient_speech"],
        )

    def patient_turn(self, case_id: str, case_title: str, state: SimState, speech: str) -> str:
        recent = json.dumps([asdict(t) for t in state.turns[-4:]], ensure_ascii=False, indent=2)
        return render(
            "medsp/patient_turn.j2", speech=speech or self.texts()["no_clinician_speech"], recent_turns=recent
        )

    def environment_turn(
        self,
        case_id: str,
        case_title: str,
        state: SimState,
        speech: str,
        actions: list[str],
        patient_speak: list[str],
        eos: bool,
    ) -> str:
        return render(
            "medsp/environment_turn.j2",
            patient_status=state.patient_status or INITIAL_STATUS,
            eos=eos,
            progress_index=state.progress_index,
            state_label=state.current_phase_id,
            speech=speech or self.texts()["no_speech"],
            patient_speech=speech_text(patient_speak),
            actions_json=json.dumps(actions, ensure_ascii=False, indent=2),
        )

    # test-time scaling
    def selector(self, turn_prompt: str, candidates: list[dict[str, Any]]) -> str:
        return render("medsp/bon_selector.j2", turn_prompt=turn_prompt, candidates=candidates)

    def domains(self, k: int) -> str:
        return render("medsp/panel_domains.j2", k=k, fields=" | ".join(f"Specialty {i + 1}" for i in range(k)))

    def specialist(self, domain: str, turn_prompt: str) -> tuple[str, str]:
        return (
            render("medsp/panel_specialist_overlay.j2", domain=domain),
            render("medsp/panel_specialist.j2", domain=domain, turn_prompt=turn_prompt),
        )

    def integrator(self, turn_prompt: str, opinions: dict[str, str], revision: str) -> str:
        return render("medsp/panel_integrator.j2", turn_prompt=turn_prompt, opinions=opinions, revision=revision)

    def vote(self, domain: str, proposal: dict[str, Any]) -> tuple[str, str]:
        return (
            render("medsp/panel_vote_overlay.j2", domain=domain),
            render(
                "medsp/panel_vote.j2",
                domain=domain,
                speak=proposal.get("speak"),
                actions=proposal.get("actions") or [],
                eos=bool(proposal.get("eos")),
            ),
        )

    def revision_note(self, advice: dict[str, str]) -> str:
        return render("medsp/panel_revision.j2", advice=advice)


class OfficialPrompts(BedsidePrompts):
    """The official prompt texts of the simulation, from a clone of MAGIC-AI4Med/MedSP1000 (MIT licence,
    :mod:`bedside.medsp.official`): the system and test-time prompts of ``src/simulate/prompts.py``, the
    per-turn messages of ``controller.py`` (``SimulationController._build_*_prompt``, run on :class:`SimState`)
    and ``test_time._action_to_text``."""

    def __init__(self, source: OfficialSource) -> None:
        self.name = source.name
        self.source = source
        self.fns = source.fns

    def controller(self, case_id: str, case_title: str, state: SimState) -> Any:
        return self.source.controller(case_id, case_title, state)

    def examinee_system(self, scenario: Scenario) -> str:
        return self.fns["build_examinee_system_prompt"](None, _Bundle(scenario.examinee))

    def patient_system(self, scenario: Scenario) -> str:
        return self.fns["build_sp_system_prompt"](None, _Bundle(scenario.sp_actor))

    def environment_system(self, scenario: Scenario) -> str:
        return self.fns["build_environment_system_prompt"](None, _Bundle(scenario.environment_controller))

    def first_feedback(self) -> str:
        return self.source.placeholder or super().first_feedback()

    def opening_context(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.controller(case_id, case_title, state)._opening_context()

    def examinee_turn(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.controller(case_id, case_title, state)._build_examinee_prompt()

    def patient_turn(self, case_id: str, case_title: str, state: SimState, speech: str) -> str:
        return self.controller(case_id, case_title, state)._build_sp_prompt(speech)

    def environment_turn(
        self,
        case_id: str,
        case_title: str,
        state: SimState,
        speech: str,
        actions: list[str],
        patient_speak: list[str],
        eos: bool,
    ) -> str:
        return self.controller(case_id, case_title, state)._build_environment_prompt(
            speech, actions, {"speak": patient_speak}, eos=eos
        )

    def selector(self, turn_prompt: str, candidates: list[dict[str, Any]]) -> str:
        shaped = [
            {"index": c["index"], "normalized": {k: c[k] for k in ("speak", "actions", "eos")}} for c in candidates
        ]
        return self.fns["build_tts_selector_prompt"](turn_prompt, shaped)

    def domains(self, k: int) -> str:
        return self.fns["build_tts_domain_selection_prompt"](k)

    def specialist(self, domain: str, turn_prompt: str) -> tuple[str, str]:
        return self.fns["build_tts_expert_analysis_prompt"](domain, turn_prompt)

    def integrator(self, turn_prompt: str, opinions: dict[str, str], revision: str) -> str:
        return self.fns["build_tts_synthesis_prompt"](turn_prompt, opinions, revision)

    def vote(self, domain: str, proposal: dict[str, Any]) -> tuple[str, str]:
        return self.fns["build_tts_consensus_prompt"](domain, self.fns["_action_to_text"](proposal))

    def revision_note(self, advice: dict[str, str]) -> str:
        return self.fns["build_tts_revision_note"](advice)


PromptSet = BedsidePrompts


def load_prompt_set(prompts: str | None) -> PromptSet:
    """bedside's wording (``None`` or ``"bedside"``), or the official texts from the clone at ``prompts``
    (a relative path is read against the shell's working directory, :func:`bedside.paths.user_path`)."""
    if is_bedside(prompts):
        return BedsidePrompts()
    return OfficialPrompts(official_source(str(prompts)))
