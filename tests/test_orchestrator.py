"""The encounter loop with a supervisor of its own making (no benchmark's verdict): the supervisor says when
the session is complete and names its transcript events; the loop reads no field of the verdict."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from inspect_ai.event import InfoEvent
from inspect_ai.log import transcript
from pydantic import BaseModel

from bedside.end_reasons import EndReason
from bedside.protocols import Reply
from bedside.records import Turn
from bedside.solvers.orchestrator import Decision, SupervisionState, run_encounter


class Mark(BaseModel):
    """A verdict with no field the loop could know: the referee's own words."""

    finished: bool = False
    note: str = ""


@dataclass
class Speaker:
    role: str
    policy: str = "moderate"
    seen: list[int] = field(default_factory=list)

    def active(self, history: Sequence[Turn]) -> bool:
        return True

    def prompt(self, correction: str | None = None) -> str:
        return "SYSTEM" if not correction else f"SYSTEM\n\n{correction}"

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        self.seen.append(len(history))
        return Reply(message=f"{self.role} {len(self.seen)}", raw="")


class Referee:
    """Says the session is complete on every turn from ``done_from`` on (history length when judged)."""

    role = "referee"

    def __init__(self, done_from: int) -> None:
        self.done_from = done_from
        self.stats: dict[str, int] = {}

    async def evaluate(self, history: Sequence[Turn], role: str, message: str, agent_prompt: str) -> Mark:
        return Mark(finished=len(history) >= self.done_from, note=f"judged {message}")

    def decide(self, verdict: Mark | None, state: SupervisionState) -> Decision:
        return Decision.ACCEPT

    def correction(self, verdict: Mark) -> str:
        return "again"

    def session_complete(self, verdict: Mark) -> bool:
        return verdict.finished


def test_the_supervisor_says_when_the_session_is_complete():
    a, b = Speaker("a", policy="observe"), Speaker("b")
    before = len(transcript().events)
    result = asyncio.run(run_encounter([a, b], Referee(done_from=3), min_turns=2, max_turns=20))
    assert result.end_reason == EndReason.CLEAN_COMPLETE and len(result.history) == 4  # the turn judged at 3
    assert result.history[3].verdict == {"finished": True, "note": "judged b 2"}
    infos = [e for e in transcript().events[before:] if isinstance(e, InfoEvent)]
    verdicts = [e.data for e in infos if e.source == "referee"]
    assert [v["turn"] for v in verdicts] == [0, 1, 2, 3] and verdicts[-1]["finished"] is True
    [end] = [e.data for e in infos if e.source == "encounter"]
    assert end == {"end_reason": "clean_complete", "turns": 4, "discarded": 0, "error": None}


def test_completion_below_the_minimum_is_logged_and_ignored():
    a, b = Speaker("a", policy="observe"), Speaker("b")
    result = asyncio.run(run_encounter([a, b], Referee(done_from=0), min_turns=3, max_turns=20))
    assert result.end_reason == EndReason.CLEAN_COMPLETE and len(result.history) == 3
    assert result.completion_ignored == [0, 1]
