"""The orchestrator: the one place that owns an encounter's turn order and termination (every benchmark).

An *encounter* is a turn-taking conversation between agents (:class:`~bedside.solvers.agent.ChatAgent`)
that each keep their own view of a shared history (:class:`~bedside.records.Turn`). Agents only
produce replies; :func:`run_encounter` decides everything else:

- **turn order**: round-robin, ``agents[0]`` first; an agent whose ``active(history)`` is false sits its turn
  out; a round in which no agent was active ends the encounter with ``error``;
- **supervision** (optional): a :class:`Supervisor` judges every candidate turn of an agent whose policy is
  not ``none`` and its ``decide(verdict, state)`` returns a :class:`Decision` (the benchmark's supervision
  policy, in its own solvers). ``accept`` appends the turn; ``soft_correct`` appends it and
  puts the supervisor's correction in that agent's system prompt for its next turn only; ``discard_and_retry``
  keeps the turn out of the history (recorded as a :class:`~bedside.records.Discard`) and regenerates
  with the correction; ``hard_stop`` discards it and ends the encounter; ``system_failure`` (a supervised
  turn whose verdict stayed unreadable) ends it at once;
- **controller state** (optional): a :class:`Controller` (e.g. a benchmark's environment bookkeeping)
  is told before each turn and after each reply, and may end
  the encounter with its own end reason;
- **termination** (the shared :class:`~bedside.end_reasons.EndReason`, or a benchmark's own end reason, a
  ``str``): ``max_turns`` when the history holds
  ``max_turns`` turns; ``clean_complete`` when the supervisor's verdict on an accepted turn says the session is
  complete and the history holds at least ``min_turns`` turns (below that it is logged and ignored); the
  reply's or the controller's own end reason (a reply with ``ends_session``: its ``data["end_reason"]``,
  default ``clean_complete``); ``error`` when a model call fails (what was accepted is kept).

Every turn, verdict, soft correction and discarded turn shows in ``inspect view`` (spans and ``INFO`` events).
While the encounter runs, the turns accepted so far are in the sample store (:class:`EncounterProgress`):
``inspect view`` shows them as they come, and the log of a sample stopped mid-encounter (a time, token or
message limit, a crash) still holds them.
One *turn* is one accepted message of any agent (the history's length counts turns).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from inspect_ai.log import transcript
from inspect_ai.util import StoreModel, span, store_as
from pydantic import Field

from bedside.calls import GenerationError
from bedside.end_reasons import EndReason
from bedside.protocols import Reply
from bedside.records import Discard, Turn
from bedside.solvers.agent import ChatAgent, Policy


class Decision(StrEnum):
    """What happens to one supervised candidate turn."""

    ACCEPT = "accept"
    SOFT_CORRECT = "soft_correct"
    DISCARD_AND_RETRY = "discard_and_retry"
    HARD_STOP = "hard_stop"
    #: the verdict on a supervised turn stayed unreadable: the session cannot continue under supervision
    SYSTEM_FAILURE = "system_failure"


@dataclass(frozen=True)
class SupervisionState:
    """What a supervision policy needs besides the verdict: the agent's policy, how many times this turn
    has already been discarded and regenerated (Algorithm 1's ``ρ[t]``) and the retry budget (``R_max``)."""

    policy: Policy
    attempt: int = 0
    max_retries: int = 2


class Supervisor(Protocol):
    """Judges one candidate turn; ``None`` means its reply stayed unreadable after its retries."""

    stats: dict[str, int]

    async def evaluate(self, history: Sequence[Turn], role: str, message: str, agent_prompt: str) -> Any: ...

    def decide(self, verdict: Any, state: SupervisionState) -> Decision:
        """The supervision policy (a pure function of the verdict and the state)."""
        ...

    def correction(self, verdict: Any) -> str:
        """The block appended to the offending agent's system prompt."""
        ...


class Controller(Protocol):
    """State kept beside the history and advanced by the orchestrator (e.g. a scenario's state)."""

    def before_turn(self, role: str, history: Sequence[Turn]) -> None:
        """Called before the agent of ``role`` is asked for its turn."""
        ...

    def after_reply(self, role: str, history: Sequence[Turn], reply: Reply) -> str | None:
        """Called with an accepted reply before it enters the history (never with a discarded one); may
        record what the turn changed in ``reply.data``; returns the end reason when the encounter ends with
        this turn."""
        ...


class EncounterProgress(StoreModel):
    """The encounter in progress (store keys ``EncounterProgress:*``): every turn accepted so far, as the
    benchmark's record will hold it. Emptied when :func:`run_encounter` returns (the benchmark's own record
    then holds the history); a sample stopped mid-encounter keeps it."""

    turns: list[Turn] = Field(default_factory=list)


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
    controller: Controller | None = None,
) -> EncounterResult:
    """Run the agents until an end reason (module docstring). Agents only need ``role``, ``policy``,
    ``active``, ``prompt(correction)`` and ``async reply(history, correction, attempt)``: a subclass of
    :class:`ChatAgent` can replace ``reply`` (e.g. best-of-N sampling or a panel of advisers)."""
    history: list[Turn] = []
    discards: list[Discard] = []
    pending: dict[str, str] = {}  # role -> soft correction for that role's next turn
    result = EncounterResult(history=history, discards=discards, end_reason="")
    progress = store_as(EncounterProgress)
    progress.turns = []

    def finish(reason: str, error: str | None = None) -> EncounterResult:
        result.end_reason, result.error = reason, error
        progress.turns = []
        transcript().info(
            {"end_reason": reason, "turns": len(history), "discarded": len(discards), "error": error},
            source="encounter",
        )
        return result

    while True:
        turns_at_round_start = len(history)
        for agent in agents:
            if len(history) >= max_turns:
                return finish(EndReason.MAX_TURNS)
            if not agent.active(history):
                continue
            t = len(history)
            correction = pending.pop(agent.role, None)
            if correction:
                transcript().info({"turn": t, "role": agent.role, "applied": correction}, source="soft_correction")
            retry_correction: str | None = None
            attempt = 0
            controller_end: str | None = None
            async with span(f"turn {t}: {agent.role}", type="turn"):
                if controller is not None:
                    controller.before_turn(agent.role, history)
                while True:
                    correction_now = retry_correction or correction
                    prompt = agent.prompt(correction_now)
                    decision = Decision.ACCEPT
                    try:
                        reply = await agent.reply(history, correction_now, attempt)
                        verdict = None
                        if supervisor is not None and agent.policy != "none":
                            verdict = await supervisor.evaluate(history, agent.role, reply.message, prompt)
                            decision = supervisor.decide(
                                verdict, SupervisionState(policy=agent.policy, attempt=attempt, max_retries=max_retries)
                            )
                            if decision is Decision.SYSTEM_FAILURE:
                                return finish(
                                    EndReason.SYSTEM_FAILURE,
                                    f"turn {t} ({agent.role}): "
                                    "the supervisor's verdict stayed unreadable after its retries",
                                )
                            if verdict is None:  # an observed turn is never blocked: recorded, counted, kept
                                result.unread_observations.append(t)
                                transcript().info(
                                    {
                                        "turn": t,
                                        "role": agent.role,
                                        "unreadable_observation": True,
                                        "session_complete": "read as false",
                                    },
                                    source="monitor",
                                )
                    except GenerationError as ex:
                        return finish(EndReason.ERROR, str(ex))
                    if verdict is not None:
                        transcript().info(
                            {"turn": t, "role": agent.role, "attempt": attempt, **verdict.model_dump()},
                            source="monitor",
                        )
                    if controller is not None and decision in (Decision.ACCEPT, Decision.SOFT_CORRECT):
                        controller_end = controller.after_reply(agent.role, history, reply)
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
                    if decision in (Decision.ACCEPT, Decision.SOFT_CORRECT):
                        if decision is Decision.SOFT_CORRECT:
                            assert supervisor is not None
                            text = supervisor.correction(verdict)
                            turn.was_corrected, turn.correction = True, text
                            pending[agent.role] = text
                            result.soft_corrections += 1
                            transcript().info({"turn": t, "role": agent.role, "issued": text}, source="soft_correction")
                        history.append(turn)
                        progress.turns = [*progress.turns, turn]
                        if on_turn is not None:
                            maybe = on_turn(turn)
                            if maybe is not None:
                                await maybe
                        break
                    # discard_and_retry or hard_stop: the turn never enters the history
                    assert supervisor is not None and verdict is not None
                    discards.append(
                        Discard(
                            index=t,
                            attempt=attempt + 1,
                            role=agent.role,
                            message=reply.message,
                            verdict=verdict.model_dump(),
                        )
                    )
                    transcript().info(
                        {"turn": t, "role": agent.role, "attempt": attempt + 1, "discarded": reply.message},
                        source="discard",
                    )
                    if decision is Decision.HARD_STOP:
                        return finish(EndReason.HARD_STOP)
                    attempt += 1
                    retry_correction = supervisor.correction(verdict)
            if verdict is not None and verdict.session_complete:
                if len(history) >= min_turns:
                    return finish(EndReason.CLEAN_COMPLETE)
                result.completion_ignored.append(t)
                transcript().info(
                    {"turn": t, "session_complete": True, "ignored": f"history has {len(history)} < {min_turns} turns"},
                    source="encounter",
                )
            if controller_end is not None:
                return finish(controller_end)
            if reply.ends_session:
                return finish(str(reply.data.get("end_reason", EndReason.CLEAN_COMPLETE)))
        if len(history) == turns_at_round_start:
            return finish(EndReason.ERROR, "no agent was active for a whole round")
