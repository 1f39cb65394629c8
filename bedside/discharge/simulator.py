"""DischargeBench's Virtual Patient for the checks of the simulator's own errors
(:mod:`bedside.simulator_checks`, the ``simulator_check`` scorer).

- its materials: what the patient prompt (Figure 5) gives it: demographics, chief complaint, primary diagnosis,
  reason for admission, medication on admission, allergy, medical history, family history, the persona's trait
  descriptions and a stress overlay (``-T behavior``); the discharge note itself is the educator's, not the
  patient's (a patient stating a note fact the educator has not said is flagged);
- the conversation: the accepted turns (a discarded turn never entered the conversation: the monitor caught it);
- reading level (bedside's bands, the paper gives none): an ``elementary`` education speaks at Flesch-Kincaid
  grade 8 at most, ``high school`` at 12 at most; ``college`` has no ceiling;
- recall: a ``poor`` recall persona ("forget ... current medications, dosages") should not recite the medication
  and history of its materials: :data:`bedside.simulator_checks.RECALL_LIMIT` facts of them unprompted are a
  persona break;
- early end: a patient farewell ("goodbye", "I have to go") before the last two turns of the session.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.util import store_as

from bedside.discharge import PERSONA_AXES
from bedside.discharge.persona import Persona
from bedside.discharge.records import DischargeCase
from bedside.discharge.store import EncounterStore
from bedside.prompts import load_yaml
from bedside.simulator_checks import PatientTranscript, SpokenTurn, early_farewell

#: the highest Flesch-Kincaid grade of each education level's speech (None: no ceiling)
READING_CEILING: dict[str, float | None] = {"elementary": 8.0, "high_school": 12.0, "college": None}


def script(case: DischargeCase, persona: Persona, behavior: str) -> dict[str, str]:
    """The patient prompt's materials, by part."""
    overlay = (
        "" if behavior == "none" else load_yaml("discharge/stress_overlays.yaml")["behaviors"][behavior]["overlay"]
    )
    return {
        "demographics": f"Age {case.age}, {case.gender}, {case.race}",
        "chief_complaint": case.chief_complaint,
        "main_diagnosis": case.main_diagnosis,
        "reason_for_admission": case.reason_for_admission,
        "medication": case.medications_on_admission,
        "allergy": case.allergies,
        "medical_history": case.medical_history,
        "family_history": case.family_history,
        "persona": "\n".join(persona.description(axis) for axis in PERSONA_AXES),
        "behavior": overlay,
    }


def patient_transcript(metadata: dict[str, Any]) -> PatientTranscript | None:
    """The Virtual Patient of the sample being scored (module docstring)."""
    case = DischargeCase.model_validate(metadata["case"])
    persona = Persona.model_validate(metadata["persona"])
    behavior = metadata.get("behavior", "none")
    history = store_as(EncounterStore).history
    turns = tuple(SpokenTurn(t.index, t.role, t.message) for t in history)
    return PatientTranscript(
        script=script(case, persona, behavior),
        turns=turns,
        persona={**{axis: getattr(persona, axis) for axis in PERSONA_AXES}, "behavior": behavior},
        reading_ceiling=READING_CEILING[persona.education_level],
        recall_limited=("medication", "medical_history") if persona.recall_level == "poor" else (),
        early_end=early_farewell(turns),
    )
