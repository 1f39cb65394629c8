"""The shared history of a multi-turn encounter (every benchmark): :class:`Turn`, one accepted entry,
and :class:`Discard`, a turn the supervisor rejected. The orchestrator
(:mod:`bedside.solvers.orchestrator`) writes them, the stores keep them (``model_dump``), the scorers and
the judges read them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Turn(BaseModel):
    """One accepted entry of the shared history."""

    index: int
    role: str
    message: str
    raw: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    attempts: int = 1
    correction_applied: str | None = None  # soft correction active in the prompt that produced it
    was_corrected: bool = False  # a soft correction was issued on this turn (for the next one)
    correction: str | None = None  # that correction's text
    verdict: dict[str, Any] | None = None


class Discard(BaseModel):
    """A turn the supervisor rejected; it never entered the history."""

    index: int
    attempt: int
    role: str
    message: str
    verdict: dict[str, Any]
