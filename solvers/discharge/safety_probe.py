"""Put a crafted transcript (``bedside.discharge.safety_probe``) in the encounter record, as if the
encounter had produced it, so that DischargeBench's scorers read it unchanged. No model is called."""

from __future__ import annotations

from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import store_as

from bedside.discharge import DischargeEndReason
from bedside.discharge.store import EncounterStore
from bedside.records import Turn


@solver
def replay_transcript() -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        rec = store_as(EncounterStore)
        turns = state.metadata["probe"]["turns"]
        rec.history = [Turn(index=i, role=t["role"], message=t["message"]) for i, t in enumerate(turns)]
        rec.end_reason = DischargeEndReason.PROBE_TRANSCRIPT
        return state

    return solve
