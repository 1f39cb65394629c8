"""The CPB-Bench doctor (the model under test) and its mitigation strategies (module docstring of
:mod:`bedside.solvers.cpb`): the doctor's prompt, the mitigations' extra calls
(analysis before, self-check after) and :class:`DialogueAgent`, the view that starts with the dataset's
conversation segment. The replies are read by the ``cpb.*`` protocols (:mod:`bedside.cpb.protocols`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args

from inspect_ai.log import transcript
from inspect_ai.model import ChatMessage, ChatMessageUser, get_model
from pydantic import BeforeValidator

from bedside.calls import GenerationError, ask
from bedside.cpb.judges import DOCTOR_ROLE, dialogue_turns, transcript_text
from bedside.cpb.protocols import (
    _DOCTOR_LABEL,
    ANALYSIS,
    DOCTOR,
    DOCTOR_STEP_BY_STEP,
    SELF_CHECK,
)
from bedside.cpb.records import ControlCase, CPBCase
from bedside.prompts import load_yaml, render
from bedside.protocols import Protocol, Reply
from bedside.records import Turn
from bedside.solvers.agent import ChatAgent

#: the doctor's mitigation strategy (``-T mitigation=``; module docstring of :mod:`bedside.solvers.cpb`)
Mitigation = Literal["none", "step_by_step", "behavior_instruction", "analyze_patient", "self_check"]
MITIGATIONS: tuple[str, ...] = get_args(Mitigation)
#: other spellings accepted for a mitigation: the authors' names (``cot``, ``eval_patient``, ...) and variants
MITIGATION_ALIASES: dict[str, str] = {
    **{m: m for m in MITIGATIONS},
    "cot": "step_by_step",
    "chain_of_thought": "step_by_step",
    "instruction": "behavior_instruction",
    "behaviour_instruction": "behavior_instruction",
    "eval_patient": "analyze_patient",
    "analyse_patient": "analyze_patient",
    "self_eval": "self_check",
    "self_check_then_revise": "self_check",
}


def canonical_mitigation(value: Any) -> Any:
    """A mitigation's name for one of its spellings (any case, ``-`` or spaces for ``_``, an alias);
    anything else unchanged (for ``BeforeValidator``: the ``Mitigation`` literal then refuses it)."""
    if not isinstance(value, str):
        return value
    return MITIGATION_ALIASES.get(value.strip().lower().replace("-", "_").replace(" ", "_"), value)


#: a ``mitigation=`` parameter: a :data:`Mitigation`, any of its spellings accepted
MitigationName = Annotated[Mitigation, BeforeValidator(canonical_mitigation)]


def doctor_prompt(mitigation: Mitigation, conversation: str, analysis: str = "") -> str:
    """The doctor's one user message (no system prompt, as upstream)."""
    return render(
        "cpb/doctor.j2",
        mitigation=mitigation,
        conversation=conversation,
        behavior_instructions=load_yaml("cpb/behavior_instructions.yaml"),
        analysis=analysis,
    )


def doctor_protocol(mitigation: Mitigation) -> Protocol:
    return DOCTOR_STEP_BY_STEP if mitigation == "step_by_step" else DOCTOR


@dataclass
class DialogueAgent(ChatAgent):
    """A :class:`ChatAgent` whose view starts with a fixed dialogue (``prefix``: the dataset
    segment and, in the continuation, the first reply) before the encounter's own history.
    ``seed_offset`` is added to every call's attempt number (fresh samples for a re-run
    continuation)."""

    prefix: list[Turn] = field(default_factory=list)
    seed_offset: int = 0

    def view(self, history: Sequence[Turn]) -> list[Turn]:
        return [*self.prefix, *history]

    def conversation(self, history: Sequence[Turn]) -> str:
        return transcript_text(self.view(history))


@dataclass
class CPBDoctor(DialogueAgent):
    """The doctor (model under test) with one of the mitigation strategies (module docstring)."""

    mitigation: Mitigation = "none"
    last_messages: list[ChatMessage] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stats.update({"analysis_calls": 0, "self_check_calls": 0, "self_check_unparsed": 0, "revised": 0})

    def messages(
        self, history: Sequence[Turn], correction: str | None = None, extra_user: str | None = None
    ) -> list[ChatMessage]:
        return self.doctor_messages(history)

    def doctor_messages(self, history: Sequence[Turn], analysis: str = "") -> list[ChatMessage]:
        return [ChatMessageUser(content=doctor_prompt(self.mitigation, self.conversation(history), analysis))]

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        extra: dict[str, Any] = {}
        analysis_text = ""
        conversation = self.conversation(history)
        if self.mitigation == "analyze_patient":
            analysis = await ask(
                self.model,
                render("cpb/analyze_patient.j2", conversation=conversation),
                ANALYSIS,
                retries=self.parse_retries,
            )
            self.stats["analysis_calls"] += len(analysis.replies)
            if not analysis.ok:
                raise GenerationError(f"doctor, analysis step: {analysis.error}")
            analysis_text = analysis.value or ""
            extra["analysis"] = analysis_text
        messages = self.doctor_messages(history, analysis_text)
        self.last_messages = messages
        reply = await self.ask(messages, attempt + self.seed_offset)
        if self.mitigation == "self_check":
            review = await ask(
                self.model,
                render("cpb/self_check.j2", conversation=conversation, reply=reply.message),
                SELF_CHECK,
                retries=self.parse_retries,
            )
            self.stats["self_check_calls"] += len(review.replies)
            extra["draft"] = reply.message
            extra["self_check"] = review.value
            if not review.ok:
                self.stats["self_check_unparsed"] += 1
                extra["self_check_error"] = review.error
                transcript().info(
                    {"role": self.role, "self_check_unparsed": list(review.replies), "error": review.error},
                    source="parse",
                )
            elif review.value and review.value["verdict"] == "REVISE" and review.value["revised_response"]:
                self.stats["revised"] += 1
                revised = _DOCTOR_LABEL.sub("", review.value["revised_response"], count=1).strip()
                reply = Reply(
                    message=revised or reply.message, raw=review.value["revised_response"], repaired=reply.repaired
                )
        reply.data = {**reply.data, **extra}
        return reply


def make_doctor(
    case: CPBCase | ControlCase,
    mitigation: Mitigation,
    parse_retries: int,
    prefix: list[Turn] | None = None,
) -> CPBDoctor:
    return CPBDoctor(
        role=DOCTOR_ROLE,
        model=get_model(),
        system_prompt="",
        policy="observe",
        protocol=doctor_protocol(mitigation),
        render_own=lambda turn: turn.message,
        parse_retries=parse_retries,
        prefix=prefix if prefix is not None else dialogue_turns(case.conversation_segment),
        mitigation=mitigation,
    )
