"""CPB-Bench (arXiv 2603.29373) solvers: the doctor's reply to a challenging patient turn, the four
mitigation strategies, and the multi-turn continuation. Defaults follow the official code
(yli-z/cpb-bench-challenging-patient-behaviors; no licence, so every prompt is in our own words).

**Single turn** (:func:`cpb_reply`). ``doctor_format=text`` (default, as upstream): the doctor (the
model under test) gets ONE user message and no system prompt (``prompts/cpb/doctor.j2``): a
one-line instruction, ``Conversation:``, the segment as ``Doctor: ...`` / ``Patient: ...`` lines
(English labels for the Chinese cases too, one line per turn, nothing merged) and a closing
``Doctor:`` cue. ``doctor_format=chat`` keeps the older bedside layout: the instruction is the
system prompt (``doctor_chat.j2``) and the segment the chat history (doctor = ``assistant``,
patient = ``user``, consecutive turns of one speaker merged, ``kickoff.j2`` / ``continue_cue.j2``
when the segment opens or ends with the doctor). A leading ``Doctor:`` label is stripped from the
reply; an empty reply is retried (``parse_retries``), then recorded as a model failure.

**Mitigations** (``mitigation=``; the authors' names are accepted as aliases), as upstream:

``none``                 the plain prompt;
``step_by_step``         (``cot``) reason step by step, then the reply after ``Final Doctor's
                         Response:``; only the part after the (last) marker is the reply (the
                         reasoning is kept in the store, never judged); without the marker the whole
                         text is the reply (counted as repaired); no ``Doctor:`` cue in text format;
``behavior_instruction`` (``instruction``) a doctor-role line and all four behaviour instructions
                         (``behavior_instructions.yaml``); the case's category is not named;
``analyze_patient``      (``eval_patient``) two calls: the model analyses the patient's latest
                         message (``analyze_patient.j2``), then replies with the analysis placed
                         after the conversation;
``self_check``           (``self_eval``) two calls: the plain prompt drafts, a safety review
                         (``self_check.j2``) answers ``Verdict: PASS`` or ``Verdict: REVISE`` /
                         ``Issues:`` / ``Revised Response:``; the revision replaces the draft.
                         A review without a verdict line is retried, then the draft is kept and
                         counted (``self_check_unparsed``); upstream reads it as PASS.

**Multi-turn continuation** (:func:`cpb_continuation`, ``turns=k``; the official value is 10
rounds). The first reply is judged with the failure judge (role ``grader``; the ``cpb_failure``
scorer reuses that judgement); only a failing reply is continued (upstream continues
human-confirmed failures). One round = a ``patient`` turn, then a doctor turn. The patient
(``patient.j2``: rules and the *complete* original consultation as the system prompt;
``patient_turn.j2``: the conversation so far as one user message; temperature 0.7 as upstream's
client default, overridable by binding the role with its own ``temperature``) may end with
``[End of Conversation]``, which ends the continuation without a doctor reply. The doctor gets the
plain doctor prompt (no mitigation: upstream never applies one to continuation turns) with the whole
conversation so far (stateless, as upstream); ``mitigate=True`` (``-T continuation_mitigation=true``,
a bedside extension) gives every continuation turn the first reply's mitigation instead.
An attempt in which the doctor never spoke again (the patient ended at once, or a model failed) is
re-run from scratch, up to 3 attempts in all; the last attempt is kept. Each retry uses fresh seeds
(``attempt * SEED_STRIDE``).

What the solvers leave behind: ``state.messages`` = the doctor's first prompt, its reply and the
continuation; ``state.output`` = the first reply; the store (:class:`CPBStore`) holds the reply, the
mitigation trace, the first-reply judgement, the continuation and its attempts, and per-agent call
counts. A model failure (context overflow, provider error after Inspect's retries) is recorded
(``error``) and the sample is kept; the scorers report it as ``no_reply``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.log import transcript
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    ModelOutput,
    get_model,
)
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import StoreModel, store_as
from pydantic import Field

from bedside.prompts import load_yaml, render
from bedside.protocols import Protocol
from bedside.protocols.cpb import (  # noqa: F401  (END_TAG, PATIENT_ENDED: re-exported)
    _DOCTOR_LABEL,
    END_TAG,
    PATIENT_ENDED,
    ANALYSIS,
    DOCTOR,
    DOCTOR_CHAT,
    DOCTOR_CHAT_STEP_BY_STEP,
    DOCTOR_STEP_BY_STEP,
    PATIENT,
    SELF_CHECK,
)
from bedside.cpb_judges import (  # noqa: F401  (dialogue helpers re-exported)
    DOCTOR_ROLE,
    PATIENT_ROLE,
    dialogue_turns,
    judge_failure,
    load_case,
    transcript_text,
)
from bedside.records.cpb import CPBCase, ControlCase
from bedside.roles import role_model
from bedside.calls import GenerationError, ask
from bedside.protocols import Reply
from bedside.solvers.encounter import ChatAgent, Turn, run_encounter

MITIGATIONS: tuple[str, ...] = ("none", "step_by_step", "behavior_instruction", "analyze_patient", "self_check")
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
DOCTOR_FORMATS: tuple[str, ...] = ("text", "chat")
#: the official continuation runs up to 10 rounds (``--max_turns 10``); bedside allows 1-10
MAX_CONTINUATION_TURNS = 10
OFFICIAL_CONTINUATION_TURNS = 10
#: attempts of a continuation in which the doctor never spoke again (upstream ``max_retries=3``)
CONTINUATION_ATTEMPTS = 3
#: the continuation patient's temperature (upstream sends none; its OpenAI client defaults to 0.7)
PATIENT_TEMPERATURE = 0.7
#: seeds of a re-run continuation attempt start at ``attempt * SEED_STRIDE`` (fresh samples)
SEED_STRIDE = 1000



def mitigation_name(value: str | None) -> str:
    """Normalise a ``mitigation=`` value; unknown values are an error listing the accepted ones."""
    key = (value or "none").strip().lower().replace("-", "_").replace(" ", "_")
    if key not in MITIGATION_ALIASES:
        raise ValueError(
            f"mitigation={value!r} is not a CPB-Bench mitigation; use one of {list(MITIGATIONS)} "
            f"(aliases: {sorted(set(MITIGATION_ALIASES) - set(MITIGATIONS))})"
        )
    return MITIGATION_ALIASES[key]


class CPBStore(StoreModel):
    """What one CPB-Bench sample produced (``sample.store`` keys ``CPBStore:*``)."""

    mitigation: str = "none"
    doctor_format: str = "text"
    reply: str | None = None
    error: str | None = None
    trace: dict[str, Any] = Field(default_factory=dict)  # reasoning / analysis / draft / self-check
    initial_judgement: dict[str, Any] | None = None  # set by cpb_continuation (failure judge)
    continuation: list[dict[str, Any]] = Field(default_factory=list)  # the kept (last) attempt
    continuation_attempts: list[dict[str, Any]] = Field(default_factory=list)  # every attempt, in order
    continuation_end_reason: str | None = None
    continuation_error: str | None = None
    continuation_skipped: str | None = None
    continuation_mitigation: str | None = None  # the doctor's mitigation in the continuation turns
    agent_stats: dict[str, dict[str, int]] = Field(default_factory=dict)




# ---------------------------------------------------------------------------------------------
# agents


def doctor_prompt(mitigation: str, conversation: str, analysis: str = "") -> str:
    """The doctor's one user message (``doctor_format=text``)."""
    return render(
        "cpb/doctor.j2",
        mitigation=mitigation,
        conversation=conversation,
        behavior_instructions=load_yaml("cpb/behavior_instructions.yaml"),
        analysis=analysis,
    )


def doctor_system_prompt(mitigation: str, analysis: str = "") -> str:
    """The doctor's system prompt (``doctor_format=chat``)."""
    return render(
        "cpb/doctor_chat.j2",
        mitigation=mitigation,
        behavior_instructions=load_yaml("cpb/behavior_instructions.yaml"),
        analysis=analysis,
    )


def doctor_protocol(mitigation: str, doctor_format: str) -> Protocol:
    step = mitigation == "step_by_step"
    if doctor_format == "chat":
        return DOCTOR_CHAT_STEP_BY_STEP if step else DOCTOR_CHAT
    return DOCTOR_STEP_BY_STEP if step else DOCTOR


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

    mitigation: str = "none"
    doctor_format: str = "text"
    trailing_cue: str | None = None  # chat format: asks for the doctor's turn after a doctor turn
    last_messages: list[ChatMessage] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stats.update({"analysis_calls": 0, "self_check_calls": 0, "self_check_unparsed": 0, "revised": 0})

    def messages(
        self, history: Sequence[Turn], correction: str | None = None, extra_user: str | None = None
    ) -> list[ChatMessage]:
        return self.doctor_messages(history)

    def doctor_messages(self, history: Sequence[Turn], analysis: str = "") -> list[ChatMessage]:
        if self.doctor_format == "text":
            return [ChatMessageUser(content=doctor_prompt(self.mitigation, self.conversation(history), analysis))]
        # chat: the system prompt and the dialogue as chat history, own turns merged
        self.system_prompt = doctor_system_prompt(self.mitigation, analysis)
        chat = ChatAgent.messages(self, self.view(history))
        merged: list[ChatMessage] = []
        for m in chat:
            if merged and isinstance(m, ChatMessageAssistant) and isinstance(merged[-1], ChatMessageAssistant):
                merged[-1] = ChatMessageAssistant(content=f"{merged[-1].text}\n\n{m.text}")
            else:
                merged.append(m)
        if self.trailing_cue and isinstance(merged[-1], ChatMessageAssistant):
            merged.append(ChatMessageUser(content=self.trailing_cue))
        return merged

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        extra: dict[str, Any] = {}
        analysis_text = ""
        conversation = self.conversation(history)
        if self.mitigation == "analyze_patient":
            analysis = await ask(
                self.model, render("cpb/analyze_patient.j2", conversation=conversation), ANALYSIS, retries=self.parse_retries,
                context=dict(conversation=conversation),
            )  # fmt: skip
            self.stats["analysis_calls"] += len(analysis.replies)
            if not analysis.ok:
                raise GenerationError(f"doctor, analysis step: {analysis.error}")
            analysis_text = analysis.value or ""
            extra["analysis"] = analysis_text
        messages = self.doctor_messages(history, analysis_text)
        self.last_messages = messages
        reply = await self.ask(messages, attempt + self.seed_offset,
                               context=dict(mitigation=self.mitigation, dialogue=self.view(history), analysis=analysis_text))
        if self.mitigation == "self_check":
            review = await ask(
                self.model, render("cpb/self_check.j2", conversation=conversation, reply=reply.message), SELF_CHECK,
                retries=self.parse_retries, context=dict(conversation=conversation, reply=reply.message),
            )  # fmt: skip
            self.stats["self_check_calls"] += len(review.replies)
            extra["draft"] = reply.message
            extra["self_check"] = review.value
            if not review.ok:
                self.stats["self_check_unparsed"] += 1
                extra["self_check_error"] = review.error
                transcript().info({"role": self.role, "self_check_unparsed": review.replies, "error": review.error}, source="parse")
            elif review.value and review.value["verdict"] == "REVISE" and review.value["revised_response"]:
                self.stats["revised"] += 1
                revised = _DOCTOR_LABEL.sub("", review.value["revised_response"], count=1).strip()
                reply = Reply(message=revised or reply.message, raw=review.value["revised_response"], repaired=reply.repaired)
        reply.data = {**reply.data, **extra}
        return reply


def make_doctor(
    case: CPBCase | ControlCase,
    mitigation: str,
    parse_retries: int,
    doctor_format: str = "text",
    prefix: list[Turn] | None = None,
) -> CPBDoctor:
    return CPBDoctor(
        role=DOCTOR_ROLE,
        model=get_model(),
        system_prompt="",
        policy="observe",
        protocol=doctor_protocol(mitigation, doctor_format),
        kickoff=render("cpb/kickoff.j2") if doctor_format == "chat" else None,
        render_own=lambda turn: turn.message,
        parse_retries=parse_retries,
        prefix=prefix if prefix is not None else dialogue_turns(case.conversation_segment),
        mitigation=mitigation,
        doctor_format=doctor_format,
        trailing_cue=render("cpb/continue_cue.j2") if doctor_format == "chat" else None,
    )


def patient_system_prompt(case: CPBCase | ControlCase) -> str:
    """The continuation patient's system prompt: rules and the complete original consultation
    (including the turns after the cut), as ``Role: text`` lines."""
    return render("cpb/patient.j2", conversation=transcript_text(dialogue_turns(case.complete_conversation)), end_tag=END_TAG)


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
        return await self.ask(self.messages(history), attempt + self.seed_offset, context=dict(dialogue=self.view(history)))


# ---------------------------------------------------------------------------------------------
# solvers


@solver
def cpb_reply(mitigation: str = "none", parse_retries: int = 2, doctor_format: str = "text"):
    """The doctor's reply to the conversation segment, with an optional mitigation strategy."""
    mitigation = mitigation_name(mitigation)
    if doctor_format not in DOCTOR_FORMATS:
        raise ValueError(f"doctor_format={doctor_format!r}: use one of {list(DOCTOR_FORMATS)}")

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        case = load_case(state.metadata)
        record = store_as(CPBStore)
        record.mitigation = mitigation
        record.doctor_format = doctor_format
        doctor = make_doctor(case, mitigation, parse_retries, doctor_format)
        state.messages = doctor.messages([])
        try:
            reply = await doctor.reply([], None, 0)
        except GenerationError as ex:
            record.error = str(ex)
            transcript().info({"case_id": case.case_id, "error": record.error}, source="cpb")
            state.output = ModelOutput.from_content(model=str(doctor.model), content="")
            record.agent_stats = {DOCTOR_ROLE: doctor.stats}
            return state
        record.reply = reply.message
        record.trace = {k: v for k, v in reply.data.items() if v is not None}
        record.agent_stats = {DOCTOR_ROLE: doctor.stats}
        state.messages = [*doctor.last_messages, ChatMessageAssistant(content=reply.message)]
        state.output = ModelOutput.from_content(model=str(doctor.model), content=reply.message)
        return state

    return solve


def _turn_record(t: Turn) -> dict[str, Any]:
    return {"round": t.index // 2 + 1, "role": t.role, "message": t.message, "attempts": t.attempts,
            **({"trace": t.data} if t.data else {})}  # fmt: skip


@solver
def cpb_continuation(
    turns: int = OFFICIAL_CONTINUATION_TURNS,
    parse_retries: int = 2,
    judge_retries: int = 2,
    context: str = "full_context",
    attempts: int = CONTINUATION_ATTEMPTS,
    mitigate: bool = False,
):
    """Continue a failed first reply for up to ``turns`` rounds (module docstring): continuation turns
    use the plain doctor prompt, as upstream, unless ``mitigate`` (then the first reply's mitigation)."""
    if not 1 <= int(turns) <= MAX_CONTINUATION_TURNS:
        raise ValueError(f"turns={turns!r}: the continuation runs 1 to {MAX_CONTINUATION_TURNS} rounds (0 = single turn)")
    turns = int(turns)

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
            Turn(index=len(case.conversation_segment), role=DOCTOR_ROLE, message=record.reply, data={"source": "first_reply"}),
        ]
        record.continuation_mitigation = record.mitigation if mitigate else "none"
        doctor = make_doctor(case, record.continuation_mitigation, parse_retries, record.doctor_format, prefix=prefix)
        patient = CPBPatient(
            role=PATIENT_ROLE,
            model=patient_model,
            system_prompt=patient_system_prompt(case),
            context=dict(original=dialogue_turns(case.complete_conversation)),
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
                {"attempt": attempt + 1, "end_reason": result.end_reason, "turns": len(result.history),
                 "doctor_turns": doctor_turns, "error": result.error},
            ]  # fmt: skip
            if doctor_turns:
                break
            transcript().info(
                {"continuation_attempt": attempt + 1, "doctor_turns": 0, "end_reason": result.end_reason,
                 "retry": attempt + 1 < attempts},
                source="cpb",
            )  # fmt: skip
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
