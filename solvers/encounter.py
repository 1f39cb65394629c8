"""The encounter machinery shared by every simulation in bedside.

An *encounter* is a turn-taking conversation between agents that each keep their own view of a
shared history, optionally overseen by a *supervisor* (DischargeBench's Education Monitor Agent)
that judges every turn. This module holds, once:

- :class:`Turn` — one accepted entry of the shared history;
- :class:`ChatAgent` — an agent backed by an Inspect model: its own system prompt, its own view
  of the history (own turns as ``assistant``, others as ``user``, with a visibility filter), a
  reply parser with repair-or-retry, and fresh samples on regeneration;
- :class:`Verdict` and the :class:`Supervisor` protocol;
- :func:`run_encounter` — the turn loop with the supervision policy of DischargeBench's
  Algorithm 1 (paper arXiv 2609.20827, Appendix A.3) and the end reasons;
- transcript events so that every turn, verdict, soft correction and discarded turn shows in
  ``inspect view``.

Supervision policy per agent (Algorithm 1):

``observe``  every turn is evaluated and logged, never changed (the model under test).
``moderate`` PASS accepts; WARN, or a minor/moderate FAIL, accepts the turn and appends the
             correction to the agent's system prompt for its next turn only ("soft correction");
             a severe FAIL discards the turn (it never enters the history, neither agent sees it)
             and regenerates with the correction; when the per-turn retry budget
             (``max_retries``) is exhausted the encounter ends with ``hard_stop``.
``none``     not evaluated at all.

The monitor's ``action`` field is recorded but the policy above decides, as in Algorithm 1.
A positive ``session_complete`` is honoured only once the history holds ``min_turns`` turns;
below that it is logged and ignored. ``max_turns`` caps the history length. A model error
(e.g. the context window overflowing) ends the encounter with ``error``; what was accepted is
kept. A verdict on a supervised (``moderate``) turn that stays unreadable after the supervisor's
retries ends the encounter with ``system_failure`` (the paper counts JSON-decoding errors as
system-level failures, excluded from Table 1's n); a supervised turn is never accepted unsupervised.
An unreadable verdict on an observed (``observe``) turn blocks nothing: the turn is kept, the
observation is recorded and counted (``unread_observations``), and ``session_complete`` reads as
false. One *turn* is one accepted message
of either agent (the paper's ``|H|``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from inspect_ai.log import transcript
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
)
from inspect_ai.util import LimitExceededError, span
from pydantic import BaseModel, Field

from bedside.calls import (  # noqa: F401  (re-exported)
    PROGRAMMING_ERRORS,
    GenerationError,
    ReplyParseError,
    ask,
    attempt_config,
    describe_failure,
    generate_checked,
)
from bedside.protocols import Protocol as ReplyProtocol, Reply, plain_text
from bedside.protocols.discharge import Verdict  # noqa: F401  (Verdict: the supervisor's reply)

Policy = Literal["observe", "moderate", "none"]

CLEAN_COMPLETE = "clean_complete"
HARD_STOP = "hard_stop"
MAX_TURNS = "max_turns"
ERROR = "error"
#: the supervisor's verdict stayed unreadable after its retries: the session cannot continue under
#: supervision (DischargeBench Section 3.4 counts JSON-decoding errors as system-level failures)
SYSTEM_FAILURE = "system_failure"
#: end reasons that are failures of the system, not of the simulation: excluded from headline n
SYSTEM_FAILURES = (ERROR, SYSTEM_FAILURE)


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


class Supervisor(Protocol):
    """Judges one candidate turn; ``None`` means its reply stayed unreadable after its retries,
    which ends the encounter with ``system_failure``."""

    stats: dict[str, int]

    async def evaluate(
        self, history: Sequence[Turn], role: str, message: str, agent_prompt: str
    ) -> Verdict | None: ...

    def correction(self, verdict: Verdict) -> str:
        """The block appended to the offending agent's system prompt."""
        ...


# the model-call layer's types, re-exported for the encounter's users
__all__ = ["GenerationError", "ReplyParseError", "Reply", "plain_text", "attempt_config", "generate_checked"]


def looks_like_prose(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith(("{", "[", "```"))


def utterance_json(turn: Turn) -> str:
    """How an utterance agent sees its own past turns: the canonical JSON it is asked to produce."""
    return json.dumps({"utterance": turn.message}, ensure_ascii=False)


@dataclass
class ChatAgent:
    """An encounter agent backed by an Inspect model."""

    role: str
    model: Model
    system_prompt: str
    policy: Policy = "observe"
    protocol: ReplyProtocol | None = None  # the contract of this agent's calls (its parser reads every reply)
    config: GenerateConfig = field(default_factory=GenerateConfig)  # e.g. a role's sampling temperature
    kickoff: str | None = None  # user message placed first when the agent would open the chat
    sees: Callable[[Turn], bool] = lambda turn: True  # visibility of others' turns
    render_own: Callable[[Turn], str] = lambda turn: turn.raw or turn.message
    render_other: Callable[[Turn], str] = lambda turn: turn.message
    parse_retries: int = 2
    active: Callable[[Sequence[Turn]], bool] = lambda history: True  # False: skip this agent's turn
    stats: dict[str, int] = field(default_factory=lambda: {"calls": 0, "repaired": 0, "unparsed": 0})
    context: dict[str, Any] = field(default_factory=dict)  # what the system prompt was rendered from (call tags)

    def prompt(self, correction: str | None = None) -> str:
        return self.system_prompt if not correction else f"{self.system_prompt}\n\n{correction}"

    def messages(
        self, history: Sequence[Turn], correction: str | None = None, extra_user: str | None = None
    ) -> list[ChatMessage]:
        """This agent's view: system prompt, own turns as assistant, visible others as user
        (consecutive user turns merged), and an optional trailing user message."""
        chat: list[ChatMessage] = [ChatMessageSystem(content=self.prompt(correction))]
        for turn in history:
            if turn.role == self.role:
                if len(chat) == 1 and self.kickoff:
                    chat.append(ChatMessageUser(content=self.kickoff))
                chat.append(ChatMessageAssistant(content=self.render_own(turn)))
            elif self.sees(turn):
                text = self.render_other(turn)
                if isinstance(chat[-1], ChatMessageUser):
                    chat[-1] = ChatMessageUser(content=f"{chat[-1].text}\n\n{text}")
                else:
                    chat.append(ChatMessageUser(content=text))
        if extra_user is not None:
            if isinstance(chat[-1], ChatMessageUser):
                chat[-1] = ChatMessageUser(content=f"{chat[-1].text}\n\n{extra_user}")
            else:
                chat.append(ChatMessageUser(content=extra_user))
        if len(chat) == 1 and self.kickoff:
            chat.append(ChatMessageUser(content=self.kickoff))
        return chat

    async def ask(
        self,
        messages: list[ChatMessage],
        attempt: int = 0,
        protocol: ReplyProtocol | None = None,
        config: GenerateConfig | None = None,
        context: dict[str, Any] | None = None,
    ) -> Reply:
        """One call through :func:`bedside.calls.ask`: unreadable replies are retried with fresh samples
        (``seed``), then :class:`GenerationError`. ``protocol`` and ``config`` override the agent's own for
        this call (e.g. a comprehension question, a sampling temperature)."""
        protocol = protocol or self.protocol
        if protocol is None:
            raise TypeError(f"{self.role}: an agent's call needs a protocol")
        answer = await ask(
            self.model,
            messages,
            protocol,
            retries=self.parse_retries,
            attempt=attempt,
            config=self.config.merge(config) if config is not None else self.config,
            who=self.role,
            context={**self.context, **(context or {})},
        )
        self.stats["calls"] += answer.attempts
        self.stats["unparsed"] += answer.unreadable
        self.stats["repaired"] += int(answer.ok and answer.repaired)
        return answer.require()

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        return await self.ask(self.messages(history, correction), attempt, context=dict(correction=correction))


@dataclass
class EncounterResult:
    history: list[Turn]
    discards: list[Discard]
    end_reason: str
    error: str | None = None
    completion_ignored: list[int] = field(default_factory=list)  # turns whose early completion was ignored
    soft_corrections: int = 0
    #: observed turns (``observe`` policy, e.g. the educator) whose verdict stayed unreadable: recorded
    #: and counted, the turn kept, ``session_complete`` read as false
    unread_observations: list[int] = field(default_factory=list)


async def run_encounter(
    agents: Sequence[ChatAgent],
    supervisor: Supervisor | None,
    *,
    min_turns: int = 10,
    max_turns: int = 100,
    max_retries: int = 2,
    on_turn: Callable[[Turn], Awaitable[None] | None] | None = None,
) -> EncounterResult:
    """Run agents round-robin (``agents[0]`` speaks first) until an end reason (module docstring).

    An agent whose ``active(history)`` is false sits its turn out (e.g. an environment controller
    when no action was requested). A reply with ``ends_session`` ends the encounter with
    ``reply.data["end_reason"]`` (default ``clean_complete``) once accepted. Agents only need
    ``role``, ``policy``, ``active``, ``prompt(correction)`` and ``async reply(history,
    correction, attempt)``: a subclass of :class:`ChatAgent` can replace ``reply`` (e.g. best-of-N
    sampling or a panel of advisers) and keep the loop."""
    history: list[Turn] = []
    discards: list[Discard] = []
    pending: dict[str, str] = {}  # role -> soft correction for that role's next turn
    result = EncounterResult(history=history, discards=discards, end_reason="")

    def finish(reason: str, error: str | None = None) -> EncounterResult:
        result.end_reason, result.error = reason, error
        transcript().info(
            {"end_reason": reason, "turns": len(history), "discarded": len(discards), "error": error},
            source="encounter",
        )
        return result

    while True:
        turns_at_round_start = len(history)
        for agent in agents:
            if len(history) >= max_turns:
                return finish(MAX_TURNS)
            if not agent.active(history):
                continue
            t = len(history)
            correction = pending.pop(agent.role, None)
            if correction:
                transcript().info({"turn": t, "role": agent.role, "applied": correction}, source="soft_correction")
            retry_correction: str | None = None
            attempt = 0
            async with span(f"turn {t}: {agent.role}", type="turn"):
                while True:
                    correction_now = retry_correction or correction
                    prompt = agent.prompt(correction_now)
                    try:
                        reply = await agent.reply(history, correction_now, attempt)
                        verdict = None
                        if supervisor is not None and agent.policy != "none":
                            verdict = await supervisor.evaluate(history, agent.role, reply.message, prompt)
                            if verdict is None and agent.policy != "observe":
                                return finish(
                                    SYSTEM_FAILURE,
                                    f"turn {t} ({agent.role}): the supervisor's verdict stayed unreadable after its retries",
                                )
                            if verdict is None:  # an observed turn is never blocked: recorded, counted, kept
                                result.unread_observations.append(t)
                                transcript().info(
                                    {"turn": t, "role": agent.role, "unreadable_observation": True,
                                     "session_complete": "read as false"},
                                    source="monitor",
                                )
                    except GenerationError as ex:
                        return finish(ERROR, str(ex))
                    if verdict is not None:
                        transcript().info(
                            {"turn": t, "role": agent.role, "attempt": attempt, **verdict.model_dump()},
                            source="monitor",
                        )
                    turn = Turn(
                        index=t,
                        role=agent.role,
                        message=reply.message,
                        raw=reply.raw,
                        data=reply.data,
                        attempts=attempt + 1,
                        correction_applied=correction_now,
                        verdict=verdict.model_dump() if verdict else None,
                    )
                    if (
                        verdict is None
                        or agent.policy == "observe"
                        or verdict.verdict == "PASS"
                        or verdict.verdict == "WARN"
                        or verdict.severity in ("minor", "moderate")
                    ):
                        soft = (
                            verdict is not None
                            and agent.policy == "moderate"
                            and verdict.verdict != "PASS"
                        )
                        if soft:
                            text = supervisor.correction(verdict)
                            turn.was_corrected, turn.correction = True, text
                            pending[agent.role] = text
                            result.soft_corrections += 1
                            transcript().info({"turn": t, "role": agent.role, "issued": text}, source="soft_correction")
                        history.append(turn)
                        if on_turn is not None:
                            maybe = on_turn(turn)
                            if maybe is not None:
                                await maybe
                        break
                    # severe FAIL: discard and regenerate, hard stop once the budget is spent
                    discards.append(
                        Discard(index=t, attempt=attempt + 1, role=agent.role, message=reply.message, verdict=verdict.model_dump())
                    )
                    transcript().info(
                        {"turn": t, "role": agent.role, "attempt": attempt + 1, "discarded": reply.message},
                        source="discard",
                    )
                    if attempt >= max_retries:
                        return finish(HARD_STOP)
                    attempt += 1
                    retry_correction = supervisor.correction(verdict)
            if verdict is not None and verdict.session_complete:
                if len(history) >= min_turns:
                    return finish(CLEAN_COMPLETE)
                result.completion_ignored.append(t)
                transcript().info(
                    {"turn": t, "session_complete": True, "ignored": f"history has {len(history)} < {min_turns} turns"},
                    source="encounter",
                )
            if reply.ends_session:
                return finish(reply.data.get("end_reason", CLEAN_COMPLETE))
        if len(history) == turns_at_round_start:
            return finish(ERROR, "no agent was active for a whole round")

