"""DischargeBench's supervision policy (paper Appendix A.3.3, Algorithm 1) as a pure function, row by row,
and the orchestrator carrying out its decisions with stub agents and a stub supervisor (no model, no eval)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from bedside.discharge.protocols import Verdict
from bedside.end_reasons import EndReason
from bedside.protocols import Reply
from bedside.records import Turn
from bedside.solvers.discharge.monitor import POLICIES, EducationMonitor, decide, obey_action
from bedside.solvers.orchestrator import Decision, SupervisionState, run_encounter


def verdict(kind: str, severity: str | None = None, complete: bool = False) -> Verdict:
    return Verdict(verdict=kind, severity=severity, correction_instruction=f"fix {kind}", session_complete=complete)


SEVERITIES = (None, "minor", "moderate", "severe")


# ---------------------------------------------------------------------------------------------
# decide(): every row of Algorithm 1


@pytest.mark.parametrize("kind", ["PASS", "WARN", "FAIL"])
@pytest.mark.parametrize("severity", SEVERITIES)
@pytest.mark.parametrize("attempt", [0, 2, 5])
def test_row_5_an_observed_turn_is_always_accepted(kind, severity, attempt):
    """role = Educator: accepted whatever the verdict, never corrected, retried or stopped."""
    state = SupervisionState(policy="observe", attempt=attempt, max_retries=2)
    assert decide(verdict(kind, severity), state) is Decision.ACCEPT


def test_an_unreadable_verdict_on_an_observed_turn_is_accepted():
    assert decide(None, SupervisionState(policy="observe")) is Decision.ACCEPT


@pytest.mark.parametrize("severity", SEVERITIES)
def test_row_5_a_pass_is_accepted(severity):
    """e.verdict = Pass: accepted without a nudge, even if the monitor filled in a severity."""
    assert decide(verdict("PASS", severity), SupervisionState(policy="moderate")) is Decision.ACCEPT


@pytest.mark.parametrize("severity", SEVERITIES)
@pytest.mark.parametrize("attempt", [0, 2])
def test_row_11_a_warn_is_soft_corrected(severity, attempt):
    """e.verdict = Warn (any severity, also severe): accepted, with the correction for the next turn."""
    state = SupervisionState(policy="moderate", attempt=attempt, max_retries=2)
    assert decide(verdict("WARN", severity), state) is Decision.SOFT_CORRECT


@pytest.mark.parametrize("severity", ["minor", "moderate"])
@pytest.mark.parametrize("attempt", [0, 2])
def test_row_11_a_minor_or_moderate_fail_is_soft_corrected(severity, attempt):
    state = SupervisionState(policy="moderate", attempt=attempt, max_retries=2)
    assert decide(verdict("FAIL", severity), state) is Decision.SOFT_CORRECT


@pytest.mark.parametrize("severity", ["severe", None])
def test_rows_17_23_a_severe_fail_is_discarded_and_retried_within_the_budget(severity):
    """ρ[t] < R_max: the turn is discarded and regenerated (a FAIL without severity counts as severe)."""
    for attempt in (0, 1):
        state = SupervisionState(policy="moderate", attempt=attempt, max_retries=2)
        assert decide(verdict("FAIL", severity), state) is Decision.DISCARD_AND_RETRY


@pytest.mark.parametrize("severity", ["severe", None])
def test_rows_19_20_a_severe_fail_with_the_budget_spent_is_a_hard_stop(severity):
    """ρ[t] ≥ R_max: hard stop."""
    for attempt, budget in ((2, 2), (3, 2), (0, 0), (1, 1)):
        state = SupervisionState(policy="moderate", attempt=attempt, max_retries=budget)
        assert decide(verdict("FAIL", severity), state) is Decision.HARD_STOP


def test_an_unreadable_verdict_on_a_supervised_turn_is_a_system_failure():
    """Section 3.4: JSON-decoding errors are system-level failures; a supervised turn is never accepted unsupervised."""
    assert decide(None, SupervisionState(policy="moderate")) is Decision.SYSTEM_FAILURE


def test_an_unsupervised_agent_is_accepted():
    assert (
        decide(verdict("FAIL", "severe"), SupervisionState(policy="none", attempt=9, max_retries=0)) is Decision.ACCEPT
    )


def test_the_monitors_own_action_field_is_not_obeyed():
    """Algorithm 1 decides from verdict and severity; the monitor's recommended action is recorded only."""
    state = SupervisionState(policy="moderate")
    assert decide(Verdict(verdict="PASS", action="hard_stop"), state) is Decision.ACCEPT
    assert (
        decide(Verdict(verdict="FAIL", severity="severe", action="soft_correction"), state)
        is Decision.DISCARD_AND_RETRY
    )


# ---------------------------------------------------------------------------------------------
# -T monitor_policy=recommended_action: obey_action(), every row


@pytest.mark.eval
@pytest.mark.parametrize("kind", ["PASS", "WARN", "FAIL"])
@pytest.mark.parametrize("attempt", [0, 1])
@pytest.mark.parametrize(
    "action, expected",
    [
        ("none", Decision.ACCEPT),
        ("soft_correction", Decision.SOFT_CORRECT),
        ("retry_from_last_turn", Decision.DISCARD_AND_RETRY),
        ("hard_stop", Decision.HARD_STOP),
    ],
)
def test_recommended_action_is_obeyed_whatever_the_verdict(kind, attempt, action, expected):
    v = Verdict(verdict=kind, severity="severe" if kind == "FAIL" else None, action=action)
    assert obey_action(v, SupervisionState(policy="moderate", attempt=attempt, max_retries=2)) is expected


def test_recommended_action_a_severe_fail_with_hard_stop_stops_at_once():
    """Figure 6: "FAIL + severe -> hard_stop"; Algorithm 1 would retry it."""
    v = Verdict(verdict="FAIL", severity="severe", action="hard_stop")
    state = SupervisionState(policy="moderate", attempt=0, max_retries=2)
    assert obey_action(v, state) is Decision.HARD_STOP and decide(v, state) is Decision.DISCARD_AND_RETRY


@pytest.mark.parametrize("attempt, budget", [(2, 2), (3, 2), (0, 0)])
def test_recommended_action_a_retry_with_the_budget_spent_is_a_hard_stop(attempt, budget):
    """A.3.4: hard stop "after exhausting the per-turn retry budget"."""
    v = Verdict(verdict="FAIL", severity="severe", action="retry_from_last_turn")
    assert (
        obey_action(v, SupervisionState(policy="moderate", attempt=attempt, max_retries=budget)) is Decision.HARD_STOP
    )


@pytest.mark.parametrize("kind, severity", [("PASS", None), ("WARN", "minor"), ("FAIL", "minor"), ("FAIL", "severe")])
def test_recommended_action_an_unknown_action_falls_back_to_algorithm_1(kind, severity):
    v = Verdict(verdict=kind, severity=severity, action="escalate to a human")
    for attempt in (0, 2):
        state = SupervisionState(policy="moderate", attempt=attempt, max_retries=2)
        assert v.action == "escalate to a human" and obey_action(v, state) is decide(v, state)


@pytest.mark.parametrize("policy", ["observe", "none"])
def test_recommended_action_never_acts_on_an_observed_or_unsupervised_turn(policy):
    v = Verdict(verdict="FAIL", severity="severe", action="hard_stop")
    assert obey_action(v, SupervisionState(policy=policy)) is Decision.ACCEPT
    assert obey_action(None, SupervisionState(policy=policy)) is Decision.ACCEPT


def test_recommended_action_an_unreadable_verdict_is_still_a_system_failure():
    assert obey_action(None, SupervisionState(policy="moderate")) is Decision.SYSTEM_FAILURE


def test_the_monitor_decides_by_its_policy_algorithm_1_by_default():
    v = Verdict(verdict="FAIL", severity="severe", action="hard_stop")
    state = SupervisionState(policy="moderate")
    model = object()  # never called by decide()
    assert EducationMonitor(model).decide(v, state) is Decision.DISCARD_AND_RETRY  # type: ignore[arg-type]
    assert (
        EducationMonitor(model, policy="recommended_action").decide(v, state)  # type: ignore[arg-type]
        is Decision.HARD_STOP
    )
    assert set(POLICIES) == {"algorithm1", "recommended_action"}
    from bedside.params import BadParameter
    from bedside.solvers.discharge.encounter import discharge_encounter

    with pytest.raises(BadParameter, match=r"^Bad parameter 'monitor_policy': .*algorithm1.*figure6"):
        discharge_encounter(monitor_policy="figure6")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# fields Algorithm 1 does not act on never make a verdict unreadable


@pytest.mark.parametrize("kind", ["PASS", "WARN"])
@pytest.mark.parametrize("severity", ["high", "low", "critical!", 3, ["severe"], {"x": 1}])
def test_an_unexpected_severity_on_a_pass_or_warn_is_read_as_none(kind, severity):
    v = Verdict.model_validate({"verdict": kind, "severity": severity, "action": "whatever", "issue": "odd"})
    assert v.verdict == kind and v.severity is None and v.action == "whatever" and v.issue == "odd"


@pytest.mark.parametrize("kind", ["pass", "Warn"])
def test_a_readable_severity_on_a_pass_or_warn_is_kept(kind):
    assert Verdict.model_validate({"verdict": kind, "severity": "Severe"}).severity == "severe"


def test_an_unexpected_severity_on_a_fail_keeps_the_verdict_unreadable():
    """Algorithm 1 acts on a FAIL's severity: a FAIL whose severity cannot be read is not guessed."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Verdict.model_validate({"verdict": "FAIL", "severity": "high"})


# ---------------------------------------------------------------------------------------------
# the orchestrator carries the decisions out


@dataclass
class StubAgent:
    role: str
    policy: str = "moderate"
    system_prompt: str = "SYSTEM"
    ends_at: int | None = None  # reply number that ends the session
    seen: list[tuple[int, str | None, int]] = field(default_factory=list)  # (history length, correction, attempt)

    def active(self, history: Sequence[Turn]) -> bool:
        return True

    def prompt(self, correction: str | None = None) -> str:
        return self.system_prompt if not correction else f"{self.system_prompt}\n\n{correction}"

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        self.seen.append((len(history), correction, attempt))
        n = len(self.seen)
        return Reply(message=f"{self.role} {n}", raw=f"{self.role} {n}", ends_session=n == self.ends_at)


class StubSupervisor:
    """Verdicts from a script: (role, reply number of that role) -> Verdict; PASS otherwise."""

    role = "stub_supervisor"

    def __init__(self, script: dict[tuple[str, int], Verdict | None]) -> None:
        self.script = script
        self.counts: dict[str, int] = {}
        self.stats: dict[str, int] = {}
        self.decisions: list[Decision] = []

    async def evaluate(self, history, role, message, agent_prompt):
        self.counts[role] = self.counts.get(role, 0) + 1
        return self.script.get((role, self.counts[role]), verdict("PASS"))

    def decide(self, v, state):
        self.decisions.append(decide(v, state))
        return self.decisions[-1]

    def correction(self, v: Verdict) -> str:
        return f"CORRECT: {v.correction_instruction}"

    def session_complete(self, v: Verdict) -> bool:
        return v.session_complete


def run(agents, supervisor, **kw):
    return asyncio.run(run_encounter(agents, supervisor, **kw))


@pytest.mark.eval
def test_orchestrator_soft_correction_applies_to_the_next_turn_only():
    educator, patient = StubAgent("educator", policy="observe"), StubAgent("patient")
    sup = StubSupervisor({("patient", 1): verdict("WARN", "minor")})
    result = run([educator, patient], sup, min_turns=0, max_turns=6)
    assert result.end_reason == EndReason.MAX_TURNS and len(result.history) == 6
    assert [c for _, c, _ in patient.seen] == [None, "CORRECT: fix WARN", None]
    assert result.history[1].was_corrected and result.soft_corrections == 1
    assert result.history[3].correction_applied == "CORRECT: fix WARN" and not result.discards


@pytest.mark.eval
def test_orchestrator_discards_then_hard_stops_after_the_budget():
    educator, patient = StubAgent("educator", policy="observe"), StubAgent("patient")
    severe = verdict("FAIL", "severe")
    sup = StubSupervisor({("patient", 1): severe, ("patient", 2): severe, ("patient", 3): severe})
    result = run([educator, patient], sup, min_turns=0, max_turns=10, max_retries=2)
    assert result.end_reason == EndReason.HARD_STOP
    assert [t.role for t in result.history] == ["educator"]  # the discarded turns never entered the history
    assert [(d.attempt, d.message) for d in result.discards] == [(1, "patient 1"), (2, "patient 2"), (3, "patient 3")]
    assert [a for _, _, a in patient.seen] == [0, 1, 2]  # regenerated with fresh attempts, with the correction
    assert [c for _, c, _ in patient.seen] == [None, "CORRECT: fix FAIL", "CORRECT: fix FAIL"]
    assert sup.decisions[-3:] == [Decision.DISCARD_AND_RETRY, Decision.DISCARD_AND_RETRY, Decision.HARD_STOP]


@pytest.mark.eval
def test_orchestrator_a_retry_that_passes_is_accepted():
    educator, patient = StubAgent("educator", policy="observe"), StubAgent("patient")
    sup = StubSupervisor({("patient", 1): verdict("FAIL", "severe")})
    result = run([educator, patient], sup, min_turns=0, max_turns=4)
    assert [t.message for t in result.history] == ["educator 1", "patient 2", "educator 2", "patient 3"]
    assert result.history[1].attempts == 2 and len(result.discards) == 1


@pytest.mark.eval
def test_orchestrator_unreadable_verdicts():
    educator, patient = StubAgent("educator", policy="observe"), StubAgent("patient")
    sup = StubSupervisor({("educator", 1): None, ("patient", 1): None})
    result = run([educator, patient], sup, min_turns=0, max_turns=10)
    assert result.end_reason == EndReason.SYSTEM_FAILURE and "verdict stayed unreadable" in (result.error or "")
    assert result.unread_observations == [0] and [t.role for t in result.history] == ["educator"]


@pytest.mark.eval
def test_orchestrator_minimum_turn_guard_on_session_complete():
    educator, patient = StubAgent("educator", policy="observe"), StubAgent("patient")
    sup = StubSupervisor(
        {("patient", 1): verdict("PASS", complete=True), ("patient", 2): verdict("PASS", complete=True)}
    )
    result = run([educator, patient], sup, min_turns=4, max_turns=10)
    assert result.end_reason == EndReason.CLEAN_COMPLETE and len(result.history) == 4
    assert result.completion_ignored == [1]


@pytest.mark.eval
def test_orchestrator_a_reply_that_ends_the_session():
    doctor, patient = StubAgent("doctor", policy="none"), StubAgent("patient", policy="none", ends_at=2)
    result = run([patient, doctor], None, min_turns=0, max_turns=10)
    assert result.end_reason == EndReason.CLEAN_COMPLETE and [t.message for t in result.history][-1] == "patient 2"


class StubController:
    """Counts turns before each one and ends the encounter after the third reply of role ``b``."""

    def __init__(self) -> None:
        self.before: list[tuple[str, int]] = []
        self.after: list[str] = []

    def before_turn(self, role, history):
        self.before.append((role, len(history)))

    def after_reply(self, role, history, reply):
        self.after.append(reply.message)
        reply.data["seen_by_controller"] = True
        return "controller_end" if reply.message == "b 3" else None  # a benchmark's own end reason


@pytest.mark.eval
def test_orchestrator_advances_the_controller_and_obeys_its_end():
    a, b = StubAgent("a", policy="none"), StubAgent("b", policy="none")
    controller = StubController()
    result = run([a, b], None, min_turns=0, max_turns=20, controller=controller)
    assert result.end_reason == "controller_end" and len(result.history) == 6
    assert controller.before == [("a", 0), ("b", 1), ("a", 2), ("b", 3), ("a", 4), ("b", 5)]
    assert controller.after == [t.message for t in result.history]
    assert all(t.data["seen_by_controller"] for t in result.history)


@pytest.mark.eval
def test_orchestrator_never_tells_the_controller_about_a_discarded_reply():
    a = StubAgent("a")
    controller = StubController()
    sup = StubSupervisor({("a", 1): verdict("FAIL", "severe")})
    result = run([a], sup, min_turns=0, max_turns=2, controller=controller)
    assert controller.after == ["a 2", "a 3"] and [t.message for t in result.history] == ["a 2", "a 3"]


class PolicySupervisor(StubSupervisor):
    def __init__(self, script, policy):
        super().__init__(script)
        self.policy = policy

    def decide(self, v, state):
        self.decisions.append(POLICIES[self.policy](v, state))
        return self.decisions[-1]


@pytest.mark.eval
@pytest.mark.parametrize(
    "policy, end, replies", [("algorithm1", "max_turns", 3), ("recommended_action", "hard_stop", 1)]
)
def test_orchestrator_a_severe_fail_recommending_a_hard_stop(policy, end, replies):
    """Algorithm 1 discards and regenerates the turn; the recommended action ends the session there."""
    educator, patient = StubAgent("educator", policy="observe"), StubAgent("patient")
    sup = PolicySupervisor({("patient", 1): Verdict(verdict="FAIL", severity="severe", action="hard_stop")}, policy)
    result = run([educator, patient], sup, min_turns=0, max_turns=4)
    assert result.end_reason == end and len(patient.seen) == replies and len(result.discards) == 1
