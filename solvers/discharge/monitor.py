"""DischargeBench's supervision, in one place: the Education Monitor Agent (EMA), a
:class:`~bedside.solvers.orchestrator.Supervisor` that judges every turn with the paper's Figure 6 prompts
(``prompts/discharge/monitor_*.j2``), and the policy that turns its verdict into a decision
(:func:`decide`, Algorithm 1). The verdict's reply format and reader are with the other readers
(:class:`bedside.discharge.protocols.Verdict`, protocol ``discharge.monitor``).

The monitor sees the history, the speaker, the candidate message and the full system prompt that
produced it (the faithfulness ground truth, paper A.3.1). Its JSON verdict is validated against
:class:`~bedside.discharge.protocols.Verdict` (only the fields Algorithm 1 acts on must be
readable); an unreadable verdict is repaired when possible, otherwise retried with a fresh sample
(``parse_retries`` times), and then counted as *unparsed*: the encounter ends with
``system_failure`` (paper Section 3.4: JSON-decoding errors are system-level failures).

``layout``: ``"paper"`` (default) renders Figure 6 as published, the agent's system prompt after
the conversation history; ``"prefix_cache"`` (``-T monitor_layout=prefix_cache``, a bedside option)
puts the same section first, so that consecutive monitor calls for the same speaker share the agent
prompt (for educator turns, the discharge note) and the history as a prompt prefix that a serving
engine's prefix cache re-uses (``tests/test_prefix_stability.py``). Same words, different order:
results under it are not the paper's protocol, and the log records the layout.

**The policy** (paper Section 2.2, Appendix A.3.3 and Algorithm 1): :func:`decide` maps the monitor's verdict on
one candidate turn and the turn's state to what the orchestrator (:func:`bedside.solvers.orchestrator.run_encounter`)
does with it. It calls no model and changes nothing; ``tests/discharge/test_supervision.py`` checks every row of
Algorithm 1.

Policy per agent (fixed per role: the Virtual Patient ``moderate``, the educator ``observe``):

========================  ===============================================  ============================
policy                    verdict                                          decision
========================  ===============================================  ============================
``none``                  (not evaluated)                                  accept
``observe``               any, also unreadable (row 5: role = Educator)    accept
``moderate``              PASS (row 5)                                     accept
``moderate``              WARN, or FAIL at minor/moderate (row 11)         soft_correct
``moderate``              other FAIL (severe; rows 17-23), ρ[t] < R_max    discard_and_retry
``moderate``              other FAIL, ρ[t] ≥ R_max (rows 19-20)            hard_stop
``moderate``              unreadable after the monitor's retries           system_failure (Section 3.4)
========================  ===============================================  ============================

``ρ[t]`` is :attr:`SupervisionState.attempt` (the times this turn was already discarded) and ``R_max``
:attr:`SupervisionState.max_retries` (2 by default). By default the monitor's own ``action`` field is
recorded but not obeyed: the policy above decides, as in Algorithm 1. A FAIL without a severity counts as
severe (the only case Algorithm 1 leaves for the discard branch). Session completion (rows 7 and 13:
``session_complete`` honoured once ``|H| ≥ T_min``): the monitor tells the orchestrator that its verdict
completes the session (:meth:`EducationMonitor.session_complete`), the orchestrator's minimum-turn guard
decides whether it ends there.

**The recommended action** (``-T monitor_policy=recommended_action``, a bedside option): the paper
contradicts itself here. Appendix A.3.4 says the monitor "issued a hard-stop action in response to a severe
FAIL verdict or after exhausting the per-turn retry budget", and Figure 6 tells it "FAIL + severe ->
hard_stop", while Algorithm 1 retries a severe FAIL. Under this option :func:`obey_action` carries out the
monitor's ``action`` on a moderated turn:

==========================  =================================================
``action``                  decision
==========================  =================================================
``none``                    accept
``soft_correction``         soft_correct
``retry_from_last_turn``    discard_and_retry while ρ[t] < R_max, then hard_stop
``hard_stop``               hard_stop
anything else               Algorithm 1's decision (:func:`decide`)
==========================  =================================================

Observed and unsupervised turns, and unreadable verdicts, are treated as under Algorithm 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, Model

from bedside.calls import GenerationError, ask
from bedside.discharge.protocols import MONITOR, Verdict
from bedside.prompts import render
from bedside.records import Turn
from bedside.solvers.orchestrator import Decision, SupervisionState

#: FAIL severities that are soft-corrected rather than discarded (Algorithm 1, row 11)
SOFT_SEVERITIES = ("minor", "moderate")


def decide(verdict: Verdict | None, state: SupervisionState) -> Decision:
    """Algorithm 1's decision on one candidate turn (module docstring)."""
    if state.policy == "none" or state.policy == "observe":
        return Decision.ACCEPT
    if verdict is None:
        return Decision.SYSTEM_FAILURE
    if verdict.verdict == "PASS":
        return Decision.ACCEPT
    if verdict.verdict == "WARN" or verdict.severity in SOFT_SEVERITIES:
        return Decision.SOFT_CORRECT
    if state.attempt >= state.max_retries:
        return Decision.HARD_STOP
    return Decision.DISCARD_AND_RETRY


#: the monitor request's layout (``-T monitor_layout=``): ``paper`` (Figure 6 as published) or
#: ``prefix_cache`` (the agent prompt before the history, same words; see the module docstring)
MonitorLayout = Literal["paper", "prefix_cache"]


def obey_action(verdict: Verdict | None, state: SupervisionState) -> Decision:
    """The monitor's recommended action on one candidate turn (module docstring)."""
    if state.policy == "none" or state.policy == "observe" or verdict is None:
        return decide(verdict, state)
    if verdict.action == "none":
        return Decision.ACCEPT
    if verdict.action == "soft_correction":
        return Decision.SOFT_CORRECT
    if verdict.action == "hard_stop":
        return Decision.HARD_STOP
    if verdict.action == "retry_from_last_turn":
        return Decision.HARD_STOP if state.attempt >= state.max_retries else Decision.DISCARD_AND_RETRY
    return decide(verdict, state)


#: ``-T monitor_policy``: who decides on each candidate turn, Algorithm 1 or the monitor's recommended action
MonitorPolicy = Literal["algorithm1", "recommended_action"]
#: the function deciding on each candidate turn, per policy
POLICIES = {"algorithm1": decide, "recommended_action": obey_action}


def tell_person(role: str, verdict: Verdict) -> None:
    """A WARN or FAIL on a turn of a role a person plays (``bedside/human``) is shown to them at their next
    turn: an educator's turns are only observed, so a model educator is never told (the page says so)."""
    if verdict.verdict == "PASS":
        return
    from bedside.providers.human import tell

    kind = f"{verdict.issue}, {verdict.severity}" if verdict.severity else verdict.issue
    why = verdict.correction_instruction or verdict.reasoning
    tell(role, f"The education monitor rated your last reply {verdict.verdict} ({kind})" + (f": {why}" if why else "."))


class EducationMonitor:
    """The EMA as an encounter supervisor."""

    #: its model role (``--model-role monitor=...``), the source of its verdicts' transcript events
    role = "monitor"

    def __init__(
        self,
        model: Model,
        parse_retries: int = 2,
        layout: MonitorLayout = "paper",
        policy: MonitorPolicy = "algorithm1",
    ) -> None:
        self.model = model
        self.policy = policy
        self.layout = layout
        self.parse_retries = parse_retries
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
            agent_prompt=agent_prompt,
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
        )
        self.stats["calls"] += answer.attempts
        self.stats["unparsed_replies"] += answer.unreadable
        if answer.failed:
            raise GenerationError(answer.error or "monitor call failed")
        if answer.ok:
            self.stats["repaired"] += int(answer.repaired)
            tell_person(role, answer.require())
            return answer.value
        self.stats["unparsed_verdicts"] += 1
        return None

    def decide(self, verdict: Verdict | None, state: SupervisionState) -> Decision:
        """Algorithm 1 (:func:`decide`), or the monitor's recommended action (:func:`obey_action`)."""
        return POLICIES[self.policy](verdict, state)

    def session_complete(self, verdict: Verdict) -> bool:
        """The verdict's own ``session_complete`` (Figure 6)."""
        return verdict.session_complete

    def correction(self, verdict: Verdict) -> str:
        instruction = verdict.correction_instruction or verdict.reasoning or "Stay faithful to your instructions."
        return render("discharge/soft_correction.j2", issue=verdict.issue, correction_instruction=instruction)
