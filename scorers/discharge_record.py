"""What DischargeBench scorers read from a finished encounter, and how they group results.

The encounter record (``EncounterStore`` in the sample store) is the scorers' only input besides
the case, so ``inspect score LOG --model-role grader=...`` can re-score an old log.
"""

from __future__ import annotations

from inspect_ai.scorer import Metric
from inspect_ai.solver import TaskState
from inspect_ai.util import store_as

from bedside.records.discharge import DischargeCase
from bedside.scorers.metrics import headline, strata, total
from bedside.solvers.discharge import EncounterStore

#: Sample-metadata keys every DischargeBench score is grouped by (paper Sections 3.2.5-3.2.6 and
#: 2.4), plus the end reason so erroneous-but-evaluable sessions can be told apart.
STRATA = ("icd_chapter", "personality", "education_level", "health_literacy", "recall_level", "end_reason")

SPEAKER = {"educator": "Educator", "patient": "Patient"}


def record(state: TaskState) -> EncounterStore:
    return store_as(EncounterStore)


def case(state: TaskState) -> DischargeCase:
    return DischargeCase.model_validate(state.metadata["case"])


def conversation_lines(history: list[dict]) -> list[str]:
    """The accepted dialogue as ``"Educator: ..."`` / ``"Patient: ..."`` lines."""
    return [f"{SPEAKER.get(t['role'], t['role'])}: {t['message']}" for t in history]


def educator_text(history: list[dict]) -> str:
    return "\n".join(t["message"] for t in history if t["role"] == "educator")


def score_metrics(*keys: str) -> dict[str, list[Metric]]:
    """mean, 95 % CI and n for each key, overall and per stratum; ``unscored`` summed."""
    metrics: dict[str, list[Metric]] = {key: headline() + [strata(*STRATA)] for key in keys}
    metrics["unscored"] = [total()]
    return metrics
