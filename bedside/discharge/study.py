"""DischargeBench in a clinician study (:class:`bedside.study.items.StudyModule`): raters read the discharge note
and the educator's conversation with the patient, and rate what the paper's physicians rated (Table 5): the four
conversation-quality axes (1-5, with the judge's anchors, as in the annotation packets of
:mod:`bedside.discharge.annotate`) and the 21 Topic-Checklist questions (yes / no; pooled as the proportion of
topics covered). The comprehension grades and the virtual-patient survey rate the simulated patient, not the
clinician: they are not asked."""

from __future__ import annotations

from functools import cache

from inspect_ai.log import EvalSample

from bedside.discharge.annotate import annotatable, encounter
from bedside.discharge.protocols import quality_rubric
from bedside.discharge.records import topic_checklist_questions
from bedside.study.items import YES_NO, Item, Transcript, scale

CLINICIAN = "educator"
SPEAKERS = {"educator": "Educator", "patient": "Patient"}


@cache
def _items() -> tuple[Item, ...]:
    choices, values = scale(1, 5)
    quality = [
        Item(
            id=name.lower().replace(" ", "_"),
            question=f"{name}: {description}",
            choices=choices,
            values=values,
            section="conversation_quality",
            anchors=tuple(anchors),
        )
        for name, description, anchors in quality_rubric()
    ]
    checklist = [
        Item(
            id=q["id"],
            question=f"[{q['topic']}] {q['text']}",
            choices=YES_NO[0],
            values=YES_NO[1],
            level="nominal",
            measure="topic_checklist",
            section="topic_checklist",
        )
        for q in topic_checklist_questions()
    ]
    return (*quality, *checklist)


def items(sample: EvalSample) -> list[Item]:
    return list(_items())


def transcript(sample: EvalSample) -> Transcript | None:
    if not annotatable(sample):
        return None
    note = ((sample.metadata or {}).get("case") or {}).get("discharge_note", "")
    turns = tuple(
        (SPEAKERS.get(str(t.get("role")), str(t.get("role", "")).capitalize()), str(t.get("message", "")))
        for t in encounter(sample).get("history", [])
    )
    return Transcript(context=(("Discharge note", str(note)),), turns=turns)
