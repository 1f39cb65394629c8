"""What DischargeBench scorers read from a finished encounter (its strata: the DischargeBench descriptor,
:mod:`bedside.discharge`).

The encounter record (``EncounterStore`` in the sample store) is the scorers' only input besides
the case, so ``inspect score LOG --model-role grader=...`` can re-score an old log.
"""

from __future__ import annotations

from inspect_ai.scorer import Score
from inspect_ai.solver import TaskState
from inspect_ai.util import store_as

from bedside.discharge.records import DischargeCase
from bedside.discharge.store import EncounterStore
from bedside.end_reasons import SYSTEM_FAILURES


def record(state: TaskState) -> EncounterStore:
    return store_as(EncounterStore)


def case(state: TaskState) -> DischargeCase:
    return DischargeCase.model_validate(state.metadata["case"])


#: what the judge answers when the source does not say (Figures 10 and 12: "not applicable")
NOT_APPLICABLE = ("not applicable", "n/a")


def is_not_applicable(answer: str | None) -> bool:
    """A judge answer meaning "the source does not say": "not applicable" (Figures 10 and 12) or
    "N/A", in any case, with surrounding quotes, brackets or a full stop; a list of such answers too.

    bedside's rule (the paper is silent): a comprehension or factual-consistency question whose
    *reference* (the answer read from the discharge note) is not applicable is left out of the
    session's score and counted (``na_questions``): the note holds nothing to teach or check there,
    so neither "I don't know" (graded incorrect) nor two matching "not applicable" answers (ROUGE-L
    and cosine 1.0) would say anything about the educator."""
    if answer is None:
        return False
    parts = [p.strip(" \t\n\"'`[]().;:") for p in str(answer).split(";")]
    return bool(parts) and all(p.lower() in NOT_APPLICABLE for p in parts)


def system_failure_score(rec: EncounterStore, keys: list[str]) -> Score | None:
    """For a session that ended on a system-level failure: every key unscored (paper Table 1's n
    excludes system failures; ``encounter_outcome`` counts them). None for any other session."""
    if rec.end_reason not in SYSTEM_FAILURES:
        return None
    return Score(
        value={**{k: float("nan") for k in keys}, "unscored": float(len(keys))},
        explanation=f"system-level failure (end reason {rec.end_reason}): excluded from n, as in the paper's Table 1"
        + (f" ({rec.error})" if rec.error else ""),
        metadata={"end_reason": rec.end_reason, "system_failure": True},
    )
