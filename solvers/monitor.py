"""DischargeBench's Education Monitor Agent (EMA): a :class:`~bedside.solvers.orchestrator.Supervisor`
that judges every turn with the paper's Figure 6 prompts (``prompts/discharge/monitor_*.j2``).

The monitor sees the history, the speaker, the candidate message and the full system prompt that
produced it (the faithfulness ground truth, paper A.3.1). Its JSON verdict is validated against
:class:`~bedside.protocols.discharge.Verdict` (only the fields Algorithm 1 acts on must be
readable); an unreadable verdict is repaired when possible, otherwise retried with a fresh sample
(``parse_retries`` times), and then counted as *unparsed*: the encounter ends with
``system_failure`` (paper Section 3.4: JSON-decoding errors are system-level failures).

``layout``: ``"paper"`` (default) renders Figure 6 as published, the agent's system prompt after
the conversation history; ``"prefix_cache"`` (``-T monitor_layout=prefix_cache``, a bedside option)
puts the same section first, so that consecutive monitor calls for the same speaker share the agent
prompt (for educator turns, the discharge note) and the history as a prompt prefix that a serving
engine's prefix cache re-uses (``tests/test_prefix_stability.py``). Same words, different order:
results under it are not the paper's protocol, and the log records the layout.
"""

from __future__ import annotations

from collections.abc import Sequence

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, Model

from bedside.calls import GenerationError, ask
from bedside.prompts import render
from bedside.protocols.discharge import MONITOR, Verdict
from bedside.records.encounter import Turn
from bedside.solvers.orchestrator import Decision, SupervisionState
from bedside.solvers.supervision import decide


class EducationMonitor:
    """The EMA as an encounter supervisor."""

    LAYOUTS = ("paper", "prefix_cache")

    def __init__(
        self, model: Model, parse_retries: int = 2, show_agent_prompt: bool = True, layout: str = "paper"
    ) -> None:
        if layout not in self.LAYOUTS:
            raise ValueError(f"monitor layout must be one of {self.LAYOUTS}, got {layout!r}")
        self.model = model
        self.layout = layout
        self.parse_retries = parse_retries
        self.show_agent_prompt = show_agent_prompt
        self.system = render("discharge/monitor_system.j2")
        self.stats = {"calls": 0, "repaired": 0, "unparsed_replies": 0, "unparsed_verdicts": 0}

    def request(self, history: Sequence[Turn], role: str, message: str, agent_prompt: str) -> str:
        return render(
            "discharge/monitor_user.j2",
            history=[
                {
                    "turn_index": turn.index,
                    "role": turn.role,
                    "message": turn.message,
                    "was_corrected": turn.was_corrected,
                    "correction_applied": turn.correction,
                }
                for turn in history
            ],
            current_role=role,
            current_message=message,
            agent_prompt=agent_prompt if self.show_agent_prompt else "",
            prefix_first=self.layout == "prefix_cache",
        )

    async def evaluate(self, history: Sequence[Turn], role: str, message: str, agent_prompt: str) -> Verdict | None:
        """The verdict on one candidate turn (:func:`bedside.calls.ask` with the ``discharge.monitor``
        protocol); None when it stayed unreadable after ``parse_retries`` retries (counted in
        ``unparsed_verdicts``). A model failure raises :class:`GenerationError`."""
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=self.system),
            ChatMessageUser(content=self.request(history, role, message, agent_prompt)),
        ]
        answer = await ask(
            self.model,
            messages,
            MONITOR,
            retries=self.parse_retries,
            record={"role": role, "turn": len(history)},
            context=dict(history=history, current_role=role, current_message=message),
        )
        self.stats["calls"] += answer.attempts
        self.stats["unparsed_replies"] += answer.unreadable
        if answer.failed:
            raise GenerationError(answer.error or "monitor call failed")
        if answer.ok:
            self.stats["repaired"] += int(answer.repaired)
            return answer.value
        self.stats["unparsed_verdicts"] += 1
        return None

    def decide(self, verdict: Verdict | None, state: SupervisionState) -> Decision:
        """Algorithm 1 (:func:`bedside.solvers.supervision.decide`)."""
        return decide(verdict, state)

    def correction(self, verdict: Verdict) -> str:
        instruction = verdict.correction_instruction or verdict.reasoning or "Stay faithful to your instructions."
        return render("discharge/soft_correction.j2", issue=verdict.issue, correction_instruction=instruction)


def parse_verdict(text: str) -> tuple[Verdict | None, bool, str]:
    """(verdict, repaired, problem) from a monitor reply."""
    try:
        verdict, repaired = MONITOR.read(text)
    except ValueError as ex:
        return None, False, str(ex)
    return verdict, repaired, ""
