"""What a CPB-Bench sample leaves behind in the sample store (:class:`CPBStore`, with the continuation's
turns as :class:`ContinuationTurn`): written by :mod:`bedside.solvers.cpb`, read by
:mod:`bedside.scorers.cpb.judges`."""

from __future__ import annotations

from typing import Any

from inspect_ai.util import StoreModel
from pydantic import BaseModel, Field


class ContinuationTurn(BaseModel):
    """One turn of the multi-turn continuation, as the persistence judge and the log read it."""

    round: int  # 1-based: a patient turn and the doctor's answer share a round
    role: str
    message: str
    attempts: int = 1
    #: the doctor's reasoning / analysis / draft / self-check (a mitigation's); None (absent from the
    #: log: Inspect writes the store without None values) when the turn has none
    trace: dict[str, Any] | None = None


class CPBStore(StoreModel):
    """What one CPB-Bench sample produced (``sample.store`` keys ``CPBStore:*``)."""

    mitigation: str = "none"
    reply: str | None = None
    error: str | None = None
    trace: dict[str, Any] = Field(default_factory=dict)  # reasoning / analysis / draft / self-check
    initial_judgement: dict[str, Any] | None = None  # set by cpb_continuation (failure judge)
    continuation: list[ContinuationTurn] = Field(default_factory=list)  # the kept (last) attempt
    continuation_attempts: list[dict[str, Any]] = Field(default_factory=list)  # every attempt, in order
    continuation_end_reason: str | None = None
    continuation_error: str | None = None
    continuation_skipped: str | None = None
    continuation_mitigation: str | None = None  # the doctor's mitigation in the continuation turns
    agent_stats: dict[str, dict[str, int]] = Field(default_factory=dict)
