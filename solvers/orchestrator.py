"""The orchestrator: the one place that owns an encounter's turn order and termination (every benchmark).

An *encounter* is a turn-taking conversation between agents (:class:`~bedside.solvers.agent.ChatAgent`)
that each keep their own view of a shared history (:class:`~bedside.records.Turn`). Agents only
produce replies; :func:`run_encounter` decides everything else:

- **turn order**: round-robin, ``agents[0]`` first; an agent whose ``active(history)`` is false sits its turn
  out; a round in which no agent was active ends the encounter with ``error``;
- **supervision** (optional): a :class:`Supervisor` judges every candidate turn of an agent whose policy is
  not ``none`` and its ``decide(verdict, state)`` returns a :class:`Decision` (the benchmark's supervision
  policy, in its own solvers); its ``session_complete(verdict)`` says whether a verdict on an accepted turn
  ends the session. ``accept`` appends the turn; ``soft_correct`` appends it and
  puts the supervisor's correction in that agent's system prompt for its next turn only; ``discard_and_retry``
  keeps the turn out of the history (recorded as a :class:`~bedside.records.Discard`) and regenerates
  with the correction; ``hard_stop`` discards it and ends the encounter; ``system_failure`` (a supervised
  turn whose verdict stayed unreadable) ends it at once;
- **controller state** (optional): a :class:`Controller` (e.g. a benchmark's environment bookkeeping)
  is told before each turn and after each reply, and may end
  the encounter with its own end reason;
- **termination** (the shared :class:`~bedside.end_reasons.EndReason`, or a benchmark's own end reason, a
  ``str``): ``max_turns`` when the history holds
  ``max_turns`` turns; ``clean_complete`` when the supervisor says its verdict on an accepted turn completes
  the session and the history holds at least ``min_turns`` turns (below that it is logged and ignored); the
  reply's or the controller's own end reason (a reply with ``ends_session``: its ``data["end_reason"]``,
  default ``clean_complete``); ``error`` when a model call fails (what was accepted is kept).

One turn is five named steps (:class:`Encounter`): a **candidate** reply of the agent, the supervisor's
**check** of it, then **accept** (into the history) or **discard** (and a new candidate), and after an
accepted turn the end conditions; any step may **stop** the encounter with its end reason.

Every turn (a ``turn`` span), verdict (``INFO`` events whose source is the supervisor's role), soft
correction and discarded turn shows in ``inspect view``.
While the encounter runs, the turns accepted so far are in the sample store (:class:`EncounterProgress`):
``inspect view`` shows them as they come, and the log of a sample stopped mid-encounter (a time, token or
message limit, a crash) still holds them.
One *turn* is one accepted message of any agent (the history's length counts turns).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NoReturn, Protocol, TypeVar

from inspect_ai.log import transcript
from inspect_ai.util import span, store_as
from pydantic import BaseModel

from bedside.calls import GenerationError
from bedside.end_reasons import EndReason
from bedside.protocols import Reply
from bedside.records import Discard, EncounterProgress, Turn
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


#: a supervisor's verdict (a pydantic model: the turn records its ``model_dump()``)
V = TypeVar("V", bound=BaseModel)


class Supervisor(Protocol[V]):
    """Judges candidate turns: its verdict ``V``, ``None`` when its reply stayed unreadable after its retries."""

    #: its model role: the source of its verdicts' events in the transcript
    role: str
    stats: dict[str, int]

    async def evaluate(self, history: Sequence[Turn], role: str, message: str, agent_prompt: str) -> V | None: ...

    def decide(self, verdict: V | None, state: SupervisionState) -> Decision:
        """The supervision policy (a pure function of the verdict and the state)."""
        ...

    def correction(self, verdict: V) -> str:
        """The block appended to the offending agent's system prompt."""
        ...

    def session_complete(self, verdict: V) -> bool:
        """Whether this verdict on an accepted turn says the session is complete."""
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


@dataclass
class Candidate:
    """One reply of an agent for turn ``turn``, with what the supervisor made of it."""

    agent: ChatAgent
    turn: int
    attempt: int  # times this turn was already discarded and regenerated
    correction: str | None  # the correction in the prompt that produced it
    prompt: str  # that prompt (the supervisor judges the reply against it)
    reply: Reply
    verdict: BaseModel | None = None
    decision: Decision = Decision.ACCEPT
    controller_end: str | None = None  # the end reason the controller gave when it was accepted


class Stopped(Exception):
    """Raised by :meth:`Encounter.stop` once the encounter's end is recorded."""


@dataclass
class Encounter:
    """One run of the agents (module docstring); :func:`run_encounter` makes and runs it."""

    agents: Sequence[ChatAgent]
    supervisor: Supervisor[Any] | None
    min_turns: int
    max_turns: int
    max_retries: int
    on_turn: Callable[[Turn], Awaitable[None] | None] | None
    controller: Controller | None
    #: a role's own cap on its turns that the controller enforces (for the store's turn budget only)
    role_limits: dict[str, int] = field(default_factory=dict)
    result: EncounterResult = field(default_factory=lambda: EncounterResult(history=[], discards=[], end_reason=""))
    pending: dict[str, str] = field(default_factory=dict)  # role -> soft correction for that role's next turn
    progress: EncounterProgress = field(default_factory=lambda: store_as(EncounterProgress))

    @property
    def history(self) -> list[Turn]:
        return self.result.history

    async def run(self) -> EncounterResult:
        """Rounds of turns, ``agents[0]`` first, until a step stops the encounter."""
        self.progress.turns = []
        self.progress.roles = [agent.role for agent in self.agents]
        self.progress.max_turns, self.progress.min_turns = self.max_turns, self.min_turns
        self.progress.role_limits = dict(self.role_limits)
        try:
            while True:
                turns_at_round_start = len(self.history)
                for agent in self.agents:
                    if len(self.history) >= self.max_turns:
                        self.stop(EndReason.MAX_TURNS)
                    if agent.active(self.history):
                        await self.turn(agent)
                if len(self.history) == turns_at_round_start:
                    self.stop(EndReason.ERROR, "no agent was active for a whole round")
        except Stopped:
            return self.result

    async def turn(self, agent: ChatAgent) -> None:
        """One turn of ``agent``: candidates until one is accepted, then the end conditions."""
        t = len(self.history)
        correction = self.pending.pop(agent.role, None)
        if correction:
            transcript().info({"turn": t, "role": agent.role, "applied": correction}, source="soft_correction")
        async with span(f"turn {t}: {agent.role}", type="turn"):
            if self.controller is not None:
                self.controller.before_turn(agent.role, self.history)
            candidate = await self.candidate(agent, t, 0, correction)
            while not await self.check(candidate):
                retry_correction = self.discard(candidate)
                candidate = await self.candidate(agent, t, candidate.attempt + 1, retry_correction or correction)
            await self.accept(candidate)
        self.stop_if_over(candidate)

    async def candidate(self, agent: ChatAgent, t: int, attempt: int, correction: str | None) -> Candidate:
        """The agent's reply for turn ``t`` under ``correction`` (a failed model call stops the encounter)."""
        prompt = agent.prompt(correction)
        try:
            reply = await agent.reply(self.history, correction, attempt)
        except GenerationError as ex:
            self.stop(EndReason.ERROR, str(ex))
        return Candidate(agent, t, attempt, correction, prompt, reply)

    async def check(self, c: Candidate) -> bool:
        """The supervisor's verdict and decision on a candidate of a supervised agent; whether it may enter
        the history. A verdict that leaves the session unable to go on stops it (``system_failure``); an
        observed turn whose verdict stayed unreadable is recorded and kept."""
        if self.supervisor is None or c.agent.policy == "none":
            return True
        role = c.agent.role
        try:
            c.verdict = await self.supervisor.evaluate(self.history, role, c.reply.message, c.prompt)
        except GenerationError as ex:
            self.stop(EndReason.ERROR, str(ex))
        state = SupervisionState(policy=c.agent.policy, attempt=c.attempt, max_retries=self.max_retries)
        c.decision = self.supervisor.decide(c.verdict, state)
        if c.decision is Decision.SYSTEM_FAILURE:
            self.stop(
                EndReason.SYSTEM_FAILURE,
                f"turn {c.turn} ({role}): the supervisor's verdict stayed unreadable after its retries",
            )
        if c.verdict is None:  # an observed turn is never blocked: recorded, counted, kept
            self.result.unread_observations.append(c.turn)
            transcript().info(
                {"turn": c.turn, "role": role, "unreadable_observation": True, "session_complete": "read as false"},
                source=self.supervisor.role,
            )
        else:
            transcript().info(
                {"turn": c.turn, "role": role, "attempt": c.attempt, **c.verdict.model_dump()},
                source=self.supervisor.role,
            )
        return c.decision in (Decision.ACCEPT, Decision.SOFT_CORRECT)

    async def accept(self, c: Candidate) -> None:
        """The candidate enters the history (the controller sees it first; a soft correction is kept for the
        agent's next turn)."""
        if self.controller is not None:
            c.controller_end = self.controller.after_reply(c.agent.role, self.history, c.reply)
        turn = Turn(
            index=c.turn,
            role=c.agent.role,
            message=c.reply.message,
            raw=c.reply.raw,
            data=c.reply.data,
            attempts=c.attempt + 1,
            correction_applied=c.correction,
            verdict=c.verdict.model_dump() if c.verdict else None,
        )
        if c.decision is Decision.SOFT_CORRECT:
            assert self.supervisor is not None and c.verdict is not None
            text = self.supervisor.correction(c.verdict)
            turn.was_corrected, turn.correction = True, text
            self.pending[c.agent.role] = text
            self.result.soft_corrections += 1
            transcript().info({"turn": c.turn, "role": c.agent.role, "issued": text}, source="soft_correction")
        self.history.append(turn)
        self.progress.turns = list(self.history)
        if self.on_turn is not None:
            maybe = self.on_turn(turn)
            if maybe is not None:
                await maybe

    def discard(self, c: Candidate) -> str:
        """A rejected candidate is recorded and kept out of the history; a hard stop ends the encounter.
        Returns the correction its regeneration is asked with."""
        assert self.supervisor is not None and c.verdict is not None
        verdict = c.verdict.model_dump()
        self.result.discards.append(
            Discard(index=c.turn, attempt=c.attempt + 1, role=c.agent.role, message=c.reply.message, verdict=verdict)
        )
        transcript().info(
            {"turn": c.turn, "role": c.agent.role, "attempt": c.attempt + 1, "discarded": c.reply.message},
            source="discard",
        )
        if c.decision is Decision.HARD_STOP:
            self.stop(EndReason.HARD_STOP)
        return self.supervisor.correction(c.verdict)

    def stop_if_over(self, c: Candidate) -> None:
        """The end conditions of an accepted turn, in order: the supervisor's completion (from ``min_turns``
        turns on), the controller's end reason, the reply's own."""
        if c.verdict is not None and self.supervisor is not None and self.supervisor.session_complete(c.verdict):
            if len(self.history) >= self.min_turns:
                self.stop(EndReason.CLEAN_COMPLETE)
            self.result.completion_ignored.append(c.turn)
            transcript().info(
                {
                    "turn": c.turn,
                    "session_complete": True,
                    "ignored": f"history has {len(self.history)} < {self.min_turns} turns",
                },
                source="encounter",
            )
        if c.controller_end is not None:
            self.stop(c.controller_end)
        if c.reply.ends_session:
            self.stop(str(c.reply.data.get("end_reason", EndReason.CLEAN_COMPLETE)))

    def stop(self, reason: str, error: str | None = None) -> NoReturn:
        """End the encounter: its end reason (and error) recorded and logged, the progress record emptied."""
        self.result.end_reason, self.result.error = reason, error
        self.progress.turns = []
        transcript().info(
            {"end_reason": reason, "turns": len(self.history), "discarded": len(self.result.discards), "error": error},
            source="encounter",
        )
        raise Stopped


async def run_encounter(
    agents: Sequence[ChatAgent],
    supervisor: Supervisor[Any] | None,
    *,
    min_turns: int = 10,
    max_turns: int = 100,
    max_retries: int = 2,
    on_turn: Callable[[Turn], Awaitable[None] | None] | None = None,
    controller: Controller | None = None,
    role_limits: dict[str, int] | None = None,
) -> EncounterResult:
    """Run the agents until an end reason (module docstring). Agents only need ``role``, ``policy``,
    ``active``, ``prompt(correction)`` and ``async reply(history, correction, attempt)``: a subclass of
    :class:`ChatAgent` can replace ``reply`` (e.g. best-of-N sampling or a panel of advisers).
    ``role_limits``: a role's own cap on its turns that the controller enforces (:class:`EncounterProgress`)."""
    encounter = Encounter(
        agents, supervisor, min_turns, max_turns, max_retries, on_turn, controller, dict(role_limits or {})
    )
    return await encounter.run()
