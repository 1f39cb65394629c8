"""CPB-Bench's dialogue as the doctor and the judges see it, the judges' prompts, and the failure
judgement that both the continuation solver (which continues failing replies only) and the
``cpb_failure`` scorer use. Kept apart from ``solvers/`` and ``scorers/`` so that neither imports the
other (the readers of every reply are in :mod:`bedside.cpb.protocols`; the calls go through
:func:`bedside.calls.ask`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, Model

from bedside.calls import Answer, ask, grader
from bedside.cpb.protocols import FAILURE_JUDGE
from bedside.cpb.records import ControlCase, CPBCase, DialogueTurn
from bedside.cpb.store import ContinuationTurn
from bedside.panel import Panel, panel_metadata
from bedside.prompts import load_yaml, render
from bedside.records import Turn

DOCTOR_ROLE, PATIENT_ROLE = "doctor", "patient"
_SPEAKER_ROLE = {"Doctor": DOCTOR_ROLE, "Patient": PATIENT_ROLE}
_ROLE_LABEL = {DOCTOR_ROLE: "Doctor", PATIENT_ROLE: "Patient"}

#: what context the failure judge sees (``-T context=``): the whole segment (as the official runs), none,
#: or the doctor's previous turn and the patient's answer
JudgeContext = Literal["full_context", "current_turn", "min_turn"]
CONTEXT_MODES: tuple[str, ...] = get_args(JudgeContext)
DEFAULT_CONTEXT: JudgeContext = "full_context"


# ---------------------------------------------------------------------------------------------
# dialogue helpers


def dialogue_turns(turns: Sequence[DialogueTurn], source: str = "original") -> list[Turn]:
    """Dataset turns → encounter turns (roles ``doctor``/``patient``)."""
    return [
        Turn(index=i, role=_SPEAKER_ROLE[t.speaker], message=t.text, data={"turn_index": t.index, "source": source})
        for i, t in enumerate(turns)
    ]


def transcript_text(turns: Sequence[Turn], sep: str = "\n") -> str:
    """One ``Doctor: ...`` / ``Patient: ...`` line per turn (English labels for every language,
    nothing merged), as the official code renders a dialogue for the doctor and the judges."""
    return sep.join(f"{_ROLE_LABEL.get(t.role, t.role)}: {t.message}" for t in turns)


def load_case(metadata: dict[str, Any]) -> CPBCase | ControlCase:
    model = CPBCase if metadata.get("kind") == "positive" else ControlCase
    return model.model_validate(metadata["case"])


# ---------------------------------------------------------------------------------------------
# judge prompts


def criteria(category: str) -> dict[str, str]:
    return load_yaml("cpb/failure_criteria.yaml")[category]


def patient_turn(case: CPBCase) -> str:
    """The challenging patient turn (the annotated text; the segment's last patient turn if empty)."""
    if case.patient_behavior_text.strip():
        return case.patient_behavior_text
    return next((t.text for t in reversed(case.conversation_segment) if t.speaker == "Patient"), "")


def judge_context(case: CPBCase, mode: JudgeContext = DEFAULT_CONTEXT) -> str:
    """The conversation context the failure judge sees in context mode ``mode`` (module docstring)."""
    if mode not in CONTEXT_MODES:
        raise ValueError(f"context={mode!r}: use one of {list(CONTEXT_MODES)}")
    turns = dialogue_turns(case.conversation_segment)
    if mode == "current_turn":
        return ""
    if mode == "min_turn":
        for i in range(len(turns) - 1, -1, -1):
            if turns[i].role == DOCTOR_ROLE and (i == 0 or turns[i - 1].role == PATIENT_ROLE):
                return transcript_text(turns[i:])
    return transcript_text(turns)


def judge_system_prompt() -> str:
    return render("cpb/judge_system.j2")


def failure_messages(case: CPBCase, reply: str, context: JudgeContext = DEFAULT_CONTEXT) -> list[ChatMessage]:
    user = render(
        "cpb/failure_judge.j2",
        category=case.behavior_category,
        criterion=criteria(case.behavior_category)["criterion"],
        context=judge_context(case, context),
        patient_turn=patient_turn(case),
        reply=reply,
    )
    return [ChatMessageSystem(content=judge_system_prompt()), ChatMessageUser(content=user)]


def overreaction_messages(case: ControlCase, reply: str) -> list[ChatMessage]:
    user = render(
        "cpb/overreaction_judge.j2",
        context=transcript_text(dialogue_turns(case.conversation_segment)),
        reply=reply,
        types=load_yaml("cpb/overreaction_types.yaml"),
    )
    return [ChatMessageSystem(content=render("cpb/overreaction_system.j2")), ChatMessageUser(content=user)]


def persistence_messages(
    case: CPBCase, first_reply: str, continuation: Sequence[ContinuationTurn]
) -> list[ChatMessage]:
    c = criteria(case.behavior_category)
    lines = [f"{'Doctor' if t.role == DOCTOR_ROLE else 'Patient'}: {t.message}" for t in continuation]
    user = render(
        "cpb/persistence_judge.j2",
        category=case.behavior_category,
        criterion=c["criterion"],
        corrected=c["corrected"],
        persisted=c["persisted"],
        context=transcript_text(dialogue_turns(case.conversation_segment)),
        initial_reply=first_reply,
        continuation="\n\n".join(lines),
    )
    return [ChatMessageSystem(content=judge_system_prompt()), ChatMessageUser(content=user)]


# ---------------------------------------------------------------------------------------------
# judge calls


def _judgement(result: Answer[Any], key: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """A judge's answer as the scores' metadata keep it (a panel's answer: with its records, ``panel``, which
    the scorers move to the score's own metadata, :func:`bedside.panel.panel_metadata`)."""
    value = value or {}
    return {
        key: value.get(key),
        **{k: v for k, v in value.items() if k != key},
        "replies": result.replies,
        "error": result.error,
        **panel_metadata(result),
    }


async def judge_failure(
    case: CPBCase,
    reply: str,
    retries: int = 2,
    context: JudgeContext = DEFAULT_CONTEXT,
    model: Model | Panel | None = None,
) -> dict[str, Any]:
    """The failure judgement of ``reply`` (``failure`` None when unreadable; a judge panel's: with its records)."""
    judge = grader()[0] if model is None else model
    result = await ask(judge, failure_messages(case, reply, context), FAILURE_JUDGE, retries=retries)
    judgement = _judgement(result, "failure", result.value.model_dump() if result.value else None)
    judgement["context"] = context
    return judgement
