"""Records every benchmark shares: the history of a multi-turn encounter (:class:`Turn`, one accepted
entry, and :class:`Discard`, a turn the supervisor rejected; the orchestrator
(:mod:`bedside.solvers.orchestrator`) writes them, the sample stores keep them as they are, the scorers and
the judges read their attributes), the encounter in progress (:class:`EncounterProgress`, which the scripted
models and a person's page read while it runs), and a helper the record loaders share (:func:`paths_containing`)."""

from __future__ import annotations

from typing import Any

from inspect_ai.util import StoreModel
from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer


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

    @model_serializer(mode="wrap")
    def _every_field(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Every field, ``None`` included: Inspect writes the sample store without ``None`` fields, and a
        log's turn keeps the same keys whatever its values (``verdict`` is ``None`` on an unsupervised turn)."""
        dumped = handler(self)
        return {name: dumped.get(name) for name in type(self).model_fields}


class Discard(BaseModel):
    """A turn the supervisor rejected; it never entered the history."""

    index: int
    attempt: int
    role: str
    message: str
    verdict: dict[str, Any]


class EncounterProgress(StoreModel):
    """The encounter in progress (store keys ``EncounterProgress:*``): every turn accepted so far, as the
    benchmark's record will hold it. Emptied when the orchestrator's ``run_encounter`` returns (the
    benchmark's own record then holds the history); a sample stopped mid-encounter keeps it. Beside it, the
    encounter's turn budget, which a person playing one of its roles reads on ``bedside/human``'s page: the
    agents' roles in turn order, ``max_turns`` and ``min_turns`` (of the history, every agent's turns counted)
    and a role's own cap on its turns (``role_limits``: a controller's cap on one role, e.g. an examinee's
    turns)."""

    turns: list[Turn] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    max_turns: int = 0
    min_turns: int = 0
    role_limits: dict[str, int] = Field(default_factory=dict)


def paths_containing(value: Any, text: str, prefix: str = "") -> list[str]:
    """Dotted paths of the keys or string values within ``value`` that contain ``text``."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if text in key:
                found.append(f"{prefix}{key}")
            found += paths_containing(item, text, f"{prefix}{key}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += paths_containing(item, text, f"{prefix}{i}.")
    elif isinstance(value, str) and text in value:
        found.append(prefix.rstrip("."))
    return found
