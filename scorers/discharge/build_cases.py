"""Scorer of the MIMIC-IV-Ext-DischargeBench builder: ``valid`` is 1 when the extraction gave a
schema-valid :class:`DischargeCase` record, 0 when the record is invalid (listed in the audit).
The score's metadata carries the assembled case and its audit rows to
:class:`bedside.discharge.mimic.extract.CaseWriter`."""

from __future__ import annotations

from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import TaskState

from bedside.discharge.mimic.extract import RESULT_KEY


@scorer(metrics=[mean()])
def build_cases():
    async def score(state: TaskState, target: Target) -> Score:
        result = state.store.get(RESULT_KEY)
        if result is None:
            return Score(value=0, explanation="no extraction recorded", metadata={RESULT_KEY: None})
        valid = result["case"] is not None
        return Score(
            value=1 if valid else 0,
            answer="valid" if valid else f"invalid ({result['stage']})",
            explanation=None if valid else result["problem"],
            metadata={RESULT_KEY: result},
        )

    return score
