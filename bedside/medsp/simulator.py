"""MedSP1000's standardized patient (SP) for the checks of the simulator's own errors
(:mod:`bedside.simulator_checks`, the ``simulator_check`` scorer).

- its materials: the scenario's ``sp_actor`` packet (the SP script, as the SP prompt gives it);
- the conversation: every accepted turn (examinee, SP, environment: the SP is shown the environment's feedback
  of the last turns, so a result the environment reported is grounded);
- an empty SP turn is a legitimate answer (a patient who cannot speak: the SP prompt allows it), so it is no stall;
- persona: the SP script fixes no reading level, recall or language to check; the report's stratum is the
  scenario's specialty;
- early end: the environment controller ends the encounter, never the SP: an SP farewell before the session's last
  two turns is an early end (:func:`bedside.simulator_checks.early_farewell`).
"""

from __future__ import annotations

from typing import Any

from inspect_ai.util import store_as

from bedside.medsp.records import Scenario
from bedside.medsp.store import MedSPStore
from bedside.simulator_checks import PatientTranscript, SpokenTurn, early_farewell

NO_REPLY = "(no reply)"


def patient_transcript(metadata: dict[str, Any]) -> PatientTranscript | None:
    """The SP of the sample being scored (module docstring)."""
    scenario = Scenario.model_validate(metadata["scenario_record"])
    history = store_as(MedSPStore).history
    turns = tuple(
        SpokenTurn(t.index, t.role, "" if t.role == "patient" and t.message == NO_REPLY else t.message) for t in history
    )
    return PatientTranscript(
        script={"sp_script": scenario.sp_actor.text()},
        turns=turns,
        persona={"specialty": str(metadata.get("specialty", "unspecified"))},
        empty_allowed=True,
        early_end=early_farewell(turns),
    )
