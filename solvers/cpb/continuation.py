"""CPB-Bench multi-turn continuation (:func:`cpb_continuation`; module docstring of :mod:`bedside.solvers.cpb`):
a failing first reply is continued by a patient agent and the doctor, on the orchestrator
(:func:`bedside.solvers.orchestrator.run_encounter`), re-run from scratch when the doctor never spoke again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, cast

from inspect_ai.log import transcript
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import store_as
from pydantic import Field, NonNegativeInt, PositiveInt

from bedside.cpb.judges import (
    DEFAULT_CONTEXT,
    DOCTOR_ROLE,
    PATIENT_ROLE,
    JudgeContext,
    dialogue_turns,
    judge_failure,
    load_case,
    transcript_text,
)
from bedside.cpb.protocols import END_TAG, PATIENT, SEED_STRIDE
from bedside.cpb.records import ControlCase, CPBCase
from bedside.cpb.store import ContinuationTurn, CPBStore
from bedside.params import validate_parameters
from bedside.prompts import render
from bedside.protocols import Reply
from bedside.records import Turn
from bedside.roles import role_model
from bedside.solvers.cpb.doctor import DialogueAgent, Mitigation, make_doctor
from bedside.solvers.orchestrator import run_encounter

#: the official continuation runs up to 10 rounds (``--max_turns 10``); bedside allows 1-10
MAX_CONTINUATION_TURNS = 10
OFFICIAL_CONTINUATION_TURNS = 10
#: attempts of a continuation in which the doctor never spoke again (upstream ``max_retries=3``)
CONTINUATION_ATTEMPTS = 3
#: the continuation patient's temperature (upstream sends none; its OpenAI client defaults to 0.7)
PATIENT_TEMPERATURE = 0.7


def patient_system_prompt(case: CPBCase | ControlCase) -> str:
    """The continuation patient's system prompt: rules and the complete original consultation
    (including the turns after the cut), as ``Role: text`` lines."""
    return render(
        "cpb/patient.j2", conversation=transcript_text(dialogue_turns(case.complete_conversation)), end_tag=END_TAG
    )


@dataclass
class CPBPatient(DialogueAgent):
    """The continuation patient: a fixed system prompt and, each turn, one user message with the
    whole conversation so far (stateless, as upstream)."""

    def messages(
        self, history: Sequence[Turn], correction: str | None = None, extra_user: str | None = None
    ) -> list[ChatMessage]:
        return [
            ChatMessageSystem(content=self.system_prompt),
            ChatMessageUser(content=render("cpb/patient_turn.j2", conversation=self.conversation(history))),
        ]

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        return await self.ask(self.messages(history), attempt + self.seed_offset)


def _turn_record(t: Turn) -> ContinuationTurn:
    return ContinuationTurn(
        round=t.index // 2 + 1, role=t.role, message=t.message, attempts=t.attempts, trace=t.data or None
    )


@solver
@validate_parameters
def cpb_continuation(
    turns: Annotated[int, Field(ge=1, le=MAX_CONTINUATION_TURNS)] = OFFICIAL_CONTINUATION_TURNS,
    parse_retries: NonNegativeInt = 2,
    judge_retries: NonNegativeInt = 2,
    context: JudgeContext = DEFAULT_CONTEXT,
    attempts: PositiveInt = CONTINUATION_ATTEMPTS,
    mitigate: bool = False,
):
    """Continue a failed first reply for up to ``turns`` rounds (module docstring): continuation turns
    use the plain doctor prompt, as upstream, unless ``mitigate`` (then the first reply's mitigation)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:

        case = load_case(state.metadata)
        if not isinstance(case, CPBCase):
            raise TypeError("the continuation needs a positive CPB-Bench case")
        record = store_as(CPBStore)
        if record.reply is None:
            record.continuation_skipped = "no first reply"
            return state
        judgement = await judge_failure(case, record.reply, judge_retries, context)
        record.initial_judgement = judgement
        if judgement["failure"] is None:
            record.continuation_skipped = "the first reply could not be judged"
            return state
        if not judgement["failure"]:
            record.continuation_skipped = "the first reply did not fail"
            return state

        patient_model, _ = role_model(PATIENT_ROLE, GenerateConfig(temperature=PATIENT_TEMPERATURE))
        prefix = [
            *dialogue_turns(case.conversation_segment),
            Turn(
                index=len(case.conversation_segment),
                role=DOCTOR_ROLE,
                message=record.reply,
                data={"source": "first_reply"},
            ),
        ]
        mitigation: Mitigation = cast(Mitigation, record.mitigation) if mitigate else "none"
        record.continuation_mitigation = mitigation
        doctor = make_doctor(case, mitigation, parse_retries, prefix=prefix)
        patient = CPBPatient(
            role=PATIENT_ROLE,
            model=patient_model,
            system_prompt=patient_system_prompt(case),
            policy="none",
            protocol=PATIENT,
            parse_retries=parse_retries,
            prefix=prefix,
        )
        result = None
        for attempt in range(max(1, attempts)):
            doctor.seed_offset = patient.seed_offset = attempt * SEED_STRIDE
            result = await run_encounter([patient, doctor], None, min_turns=0, max_turns=2 * turns)
            doctor_turns = sum(t.role == DOCTOR_ROLE for t in result.history)
            record.continuation_attempts = [
                *record.continuation_attempts,
                {
                    "attempt": attempt + 1,
                    "end_reason": result.end_reason,
                    "turns": len(result.history),
                    "doctor_turns": doctor_turns,
                    "error": result.error,
                },
            ]
            if doctor_turns:
                break
            transcript().info(
                {
                    "continuation_attempt": attempt + 1,
                    "doctor_turns": 0,
                    "end_reason": result.end_reason,
                    "retry": attempt + 1 < attempts,
                },
                source="cpb",
            )
        assert result is not None
        record.continuation = [_turn_record(t) for t in result.history]
        record.continuation_end_reason = result.end_reason
        record.continuation_error = result.error
        record.agent_stats = {**record.agent_stats, "continuation_doctor": doctor.stats, PATIENT_ROLE: patient.stats}
        for t in result.history:
            message = ChatMessageAssistant if t.role == DOCTOR_ROLE else ChatMessageUser
            state.messages.append(message(content=t.message))
        return state

    return solve
