"""What a DischargeBench encounter leaves behind in the sample store: :class:`EncounterStore` (written by
:mod:`bedside.solvers.discharge.encounter`, read by the DischargeBench scorers) and :class:`SafetyStore` (written by the
``advice_safety`` scorer, read by the safety probe check); and the six comprehension questions the patient
answers after the session (paper Figure 9), which the solver asks and the scorer grades."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from inspect_ai.util import StoreModel
from pydantic import BeforeValidator, Field
from typing_extensions import TypeAliasType

from bedside.prompts import load_yaml
from bedside.records import Discard, Turn


def _numbered(turns: Any) -> Any:
    """Turns logged without an index (a safety probe's crafted transcript, as the probe logged it before it
    wrote whole turns: role and message) take their place in the history, so that such a log re-scores."""
    if not isinstance(turns, list):
        return turns
    return [{"index": i, **t} if isinstance(t, dict) and "index" not in t else t for i, t in enumerate(turns)]


#: the accepted turns (a named type: Inspect reads a store field back through its type, validator included)
History = TypeAliasType("History", Annotated[list[Turn], BeforeValidator(_numbered)])


#: how a history names its speakers to a judge
SPEAKER = {"educator": "Educator", "patient": "Patient"}


def conversation_lines(history: Sequence[Turn]) -> list[str]:
    """The accepted dialogue as ``"Educator: ..."`` / ``"Patient: ..."`` lines."""
    return [f"{SPEAKER.get(t.role, t.role)}: {t.message}" for t in history]


def educator_text(history: Sequence[Turn]) -> str:
    return "\n".join(t.message for t in history if t.role == "educator")


def educator_turns(history: Sequence[Turn]) -> list[tuple[int, str, str]]:
    """(index in the history, the patient's message it answers ("" if none), the educator's turn)."""
    out, patient = [], ""
    for i, turn in enumerate(history):
        if turn.role == "patient":
            patient = turn.message
        elif turn.role == "educator":
            out.append((i, patient, turn.message))
            patient = ""
    return out


class EncounterStore(StoreModel):
    """What one DischargeBench encounter produced (``sample.store`` keys ``EncounterStore:*``)."""

    persona: dict = Field(default_factory=dict)
    history: History = Field(default_factory=list)
    discards: list[Discard] = Field(default_factory=list)
    end_reason: str = ""
    error: str | None = None
    completion_ignored: list[int] = Field(default_factory=list)
    soft_corrections: int = 0
    unread_observations: list[int] = Field(default_factory=list)  # educator turns whose verdict was unreadable
    role_fallbacks: list[str] = Field(default_factory=list)
    agent_stats: dict[str, dict[str, int]] = Field(default_factory=dict)
    comprehension: list[dict] = Field(default_factory=list)


class SafetyStore(StoreModel):
    """The per-turn verdicts of the last ``advice_safety`` run on this sample (read by the probe check)."""

    turns: list[dict] = Field(default_factory=list)


def comprehension_questions() -> list[dict]:
    return load_yaml("discharge/comprehension_questions.yaml")["questions"]
