"""Helpers for the MedSP tests: scripted roles, one-scenario runs, the sample store, a fake official clone."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import Model

from bedside.medsp.records import Scenario
from bedside.protocols import tag_of
from bedside.tasks.medsp import medsp
from tests.conftest import run, scripted

ANAPHYLAXIS = "bedside_demo_anaphylaxis/scenario1"
BACK_PAIN = "bedside_demo_back_pain/scenario1"
DKA_ICU = "bedside_demo_dka/scenario2"
PEDS = "bedside_demo_peds_asthma/scenario1"


def roles(**overrides: Model) -> dict[str, Model]:
    """Scripted patient, environment and grader, with some replaced."""
    return {"patient": scripted(), "environment": scripted(), "grader": scripted(), **overrides}


def run_one(
    tmp_path: Path,
    sample_id: str | None = ANAPHYLAXIS,
    *,
    examinee: Model | None = None,
    role_models: dict[str, Model] | None = None,
    **task_args: Any,
) -> tuple[EvalLog, EvalSample]:
    extra = {"sample_id": sample_id} if sample_id else {}
    log = run(
        medsp(**task_args),
        educator=examinee,
        roles=roles() if role_models is None else role_models,
        log_dir=tmp_path,
        **extra,
    )
    return log, log.samples[0]


def store(sample: EvalSample) -> dict[str, Any]:
    prefix = "MedSPStore:"
    return {k[len(prefix) :]: v for k, v in sample.store.items() if k.startswith(prefix)}


def turns_of(sample: EvalSample, role: str) -> list[dict[str, Any]]:
    """The ``data`` of every accepted turn of ``role``."""
    return [t["data"] for t in store(sample)["history"] if t["role"] == role]


def scenario_of(sample: EvalSample) -> Scenario:
    return Scenario.model_validate(sample.metadata["scenario_record"])


def text_of(messages: list[Any]) -> str:
    return "\n".join(m.text for m in messages)


def score(sample: EvalSample):
    return sample.scores["medsp_rubric"]


def calls(sample: EvalSample, protocol: str | None = None, role: str | None | bool = False) -> list[Any]:
    """Model events of ``sample``, optionally of one protocol (by the call's tag) and/or role."""
    events = [e for e in sample.events if e.event == "model"]
    if protocol is not None:
        events = [e for e in events if (tag := tag_of(e.input)) is not None and tag.name == protocol]
    if role is not False:
        events = [e for e in events if e.role == role]
    return events


# ---------------------------------------------------------------------------------------------
# a fake clone of the official repository: the official file layout and function signatures with
# bedside's own placeholder texts (no official text is copied into this repository)

FAKE_PROMPTS = """
from __future__ import annotations

from .sim_types import RoleBundle  # a relative import the loader must not execute

UNUSED = print("module-level statements are never executed")


def _render_docs(bundle: RoleBundle) -> str:
    return bundle.compiled_text(strip_strikethrough=True)


def build_examinee_system_prompt(_: object, bundle: RoleBundle) -> str:
    return f"FAKE-OFFICIAL examinee system.\\nMaterials:\\n{_render_docs(bundle)}\\n"


def build_sp_system_prompt(_: object, bundle: RoleBundle) -> str:
    return f"FAKE-OFFICIAL SP system.\\nMaterials:\\n{_render_docs(bundle)}\\n"


def build_environment_system_prompt(_: object, bundle: RoleBundle) -> str:
    return f"FAKE-OFFICIAL environment system.\\nMaterials:\\n{_render_docs(bundle)}\\n"


_DIMS = ("PC", "MK", "SBP", "ICS", "PBLI", "PROF")


def _render_frozen_rubric(rubric: dict) -> str:
    blocks = []
    for dim in _DIMS:
        items = [str(i).strip() for i in rubric.get(dim) or []]
        blocks.append(f"{dim}:\\n" + ("\\n".join(f"- {i}" for i in items) if items else "(none)"))
    return "\\n\\n".join(blocks)


def build_evaluator_system_prompt_frozen_rubric(rubric: dict) -> str:
    return f"FAKE-OFFICIAL evaluator system.\\n\\n{_render_frozen_rubric(rubric)}\\n"


def build_tts_domain_selection_prompt(num_experts: int) -> str:
    return f"FAKE-OFFICIAL name {num_experts} specialties.\\nSpecialties: A | B"


def build_tts_expert_analysis_prompt(domain: str, turn_prompt: str) -> tuple[str, str]:
    return f"FAKE-OFFICIAL a specialist in {domain}.", f"{turn_prompt}\\n\\nFAKE-OFFICIAL consult {domain}"


def build_tts_synthesis_prompt(turn_prompt: str, opinions: dict, revision_note: str = "") -> str:
    return "\\n".join([turn_prompt, "FAKE-OFFICIAL synthesis", *(f"- {d}: {o}" for d, o in opinions.items()), revision_note])


def build_tts_consensus_prompt(domain: str, proposed_action_text: str) -> tuple[str, str]:
    return f"FAKE-OFFICIAL a specialist in {domain}, reviewing.", f"FAKE-OFFICIAL vote on:\\n{proposed_action_text}"


def build_tts_revision_note(advice: dict) -> str:
    return "\\n".join(f"- ({d}) {t}" for d, t in advice.items())


def build_tts_selector_prompt(turn_prompt: str, candidates: list) -> str:
    lines = [turn_prompt, "FAKE-OFFICIAL select"]
    for c in candidates:
        n = c["normalized"]
        lines.append(f"[Candidate {c['index']}]\\n  speak: {n['speak']}\\n  actions: {'; '.join(n['actions'])}\\n  eos: {n['eos']}")
    return "\\n".join(lines)
"""

FAKE_CONTROLLER = """
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from .agents import ExamineeAgent  # never executed by the loader

DEFAULT_OUTPUT_ROOT = Path("/never/evaluated")


def _format_speak_for_prompt(speak):
    if isinstance(speak, list):
        return "\\n".join(str(s).strip() for s in speak if str(s).strip())
    return "" if speak is None else str(speak).strip()


def unrelated(x=DEFAULT_OUTPUT_ROOT):
    return x


class SimulationController:
    def __init__(self, case, config):
        self.state = dict(latest_environment_feedback=["FAKE-OFFICIAL placeholder: nothing yet."])

    def _opening_context(self):
        return f"FAKE-OFFICIAL opening of {self.case.case_title}, status {self.state.patient_status}"

    def _recent_turns(self, limit=4):
        return json.dumps([asdict(t) for t in self.state.turns[-limit:]], ensure_ascii=False, indent=2)

    def _build_examinee_prompt(self):
        if self.state.total_turns == 0:
            return "FAKE-OFFICIAL opening branch"
        return (
            f"FAKE-OFFICIAL turn {self.state.total_turns} of {self.case.case_title}\\n"
            f"Status: {self.state.patient_status}\\nLabel: {self.state.current_phase_id}\\n"
            f"Feedback: {'; '.join(self.state.latest_environment_feedback)}\\n"
            f"Patient: {_format_speak_for_prompt(self.state.latest_patient_speak)}"
        )

    def _build_sp_prompt(self, doctor_speak):
        return f"FAKE-OFFICIAL said to the patient:\\n{doctor_speak}\\n\\nRecent:\\n{self._recent_turns()}"

    def _build_environment_prompt(self, doctor_speak, raw_actions, sp_response, eos=False):
        parts = [f"FAKE-OFFICIAL status {self.state.patient_status}", f"said to the patient:\\n{doctor_speak}"]
        if eos:
            parts.append("eos=true: advance or end")
        parts.append(f"Actions:\\n{json.dumps(raw_actions, indent=2)}")
        return "\\n\\n".join(parts)

    def _build_evaluator_prompt(self):
        return (
            f"Full transcript:\\n{json.dumps(self.state.transcript, indent=2)}\\n\\n"
            f"Action log:\\n{json.dumps(self.state.action_history, indent=2)}\\n\\nFAKE-OFFICIAL evaluate"
        )
"""

FAKE_TEST_TIME = """
from __future__ import annotations


def _action_to_text(normalized):
    return f"Says: {normalized.get('speak')}\\nActions: {'; '.join(normalized.get('actions') or [])}\\neos: {normalized.get('eos')}"
"""


def write_fake_clone(root: Path) -> Path:
    folder = root / "src" / "simulate"
    folder.mkdir(parents=True)
    for name, text in (("prompts", FAKE_PROMPTS), ("controller", FAKE_CONTROLLER), ("test_time", FAKE_TEST_TIME)):
        (folder / f"{name}.py").write_text(textwrap.dedent(text).lstrip())
    return root
