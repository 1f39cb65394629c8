"""MedSP1000 in a clinician study (:class:`bedside.study.items.StudyModule`): raters read the examinee's packet
(what the examinee was told) and the encounter (examinee, standardized patient, environment), and mark each item
of the scenario's frozen rubric met or not met, as its evaluator does (paper 5.4). Rubric items differ between
scenarios, so the analysis pools them by ACGME competency (the proportion met)."""

from __future__ import annotations

from inspect_ai.log import EvalSample

from bedside.medsp.rubric import COMPETENCY_NAMES
from bedside.medsp.scenario import Scenario
from bedside.study.items import Item, Transcript

CLINICIAN = "examinee"
SPEAKERS = {"examinee": "Examinee", "patient": "Patient", "environment": "Environment"}
MET = (("met", "not met"), (1.0, 0.0))


def _scenario(sample: EvalSample) -> Scenario:
    return Scenario.model_validate((sample.metadata or {})["scenario_record"])


def items(sample: EvalSample) -> list[Item]:
    return [
        Item(
            id=item.id,
            question=f"[{COMPETENCY_NAMES[item.competency]}] {item.text}",
            choices=MET[0],
            values=MET[1],
            level="nominal",
            measure=item.competency,
            section="rubric",
        )
        for item in _scenario(sample).rubric.items()
    ]


def transcript(sample: EvalSample) -> Transcript | None:
    prefix = "MedSPStore:"
    history = (sample.store or {}).get(f"{prefix}history") or []
    if not history:
        return None
    turns = tuple(
        (SPEAKERS.get(str(t.get("role")), str(t.get("role", "")).capitalize()), str(t.get("message", "")))
        for t in history
    )
    return Transcript(context=(("The examinee's packet", _scenario(sample).examinee.text()),), turns=turns)
