"""How the simulation went, per session (paper Section 2.4, "Simulation Failure Analysis").

Not a judge: read from the encounter record. ``clean_complete`` is 1 when the monitor closed the
session after the minimum turns; ``erroneous`` is 1 for hard stop, max-turn ceiling or error. The
other keys count turns, discarded patient turns, soft corrections, unparsed monitor verdicts,
repaired patient replies and role fallbacks. ``answer`` is the end reason. Grouped by the persona
axes and the ICD chapter, this gives the paper's erroneous-rate stratification.
"""

from __future__ import annotations

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import store_as

from bedside.scorers.rescore import rescorable
from bedside.scorers.discharge_record import STRATA
from bedside.scorers.metrics import headline, strata
from bedside.solvers.discharge import EncounterStore
from bedside.solvers.encounter import CLEAN_COMPLETE



@scorer(
    metrics={
        "clean_complete": headline(binary=True),
        "erroneous": headline(binary=True) + [strata(*STRATA, binary=True)],
        "*": headline(),
    }
)
def encounter_outcome() -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(EncounterStore)
        stats = record.agent_stats
        clean = record.end_reason == CLEAN_COMPLETE
        return Score(
            value={
                "clean_complete": float(clean),
                "erroneous": float(not clean),
                "turns": float(len(record.history)),
                "discarded_turns": float(len(record.discards)),
                "soft_corrections": float(record.soft_corrections),
                "monitor_unparsed": float(stats.get("monitor", {}).get("unparsed_verdicts", 0)),
                "patient_repaired": float(stats.get("patient", {}).get("repaired", 0)),
                "role_fallbacks": float(len(record.role_fallbacks)),
            },
            answer=record.end_reason,
            explanation=(
                f"end reason {record.end_reason}"
                + (f" ({record.error})" if record.error else "")
                + f"; {len(record.history)} turns, {len(record.discards)} discarded, "
                f"{record.soft_corrections} soft corrections"
                + (f"; roles falling back to the model under test: {record.role_fallbacks}" if record.role_fallbacks else "")
            ),
            metadata={"end_reason": record.end_reason, "error": record.error, "role_fallbacks": record.role_fallbacks},
        )

    return score


rescorable(encounter_outcome)
