"""DischargeBench's supervision policy (paper arXiv 2609.20827, Section 2.2, Appendix A.3.3 and
Algorithm 1) as a pure function: :func:`decide` maps the Education Monitor's verdict on one candidate
turn and the turn's state to what the orchestrator (:func:`bedside.solvers.orchestrator.run_encounter`)
does with it. It calls no model and changes nothing; ``tests/discharge/test_supervision.py`` checks every
row of Algorithm 1.

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
:attr:`SupervisionState.max_retries` (2 by default). The monitor's own ``action`` field is recorded but not
obeyed: the policy above decides, as in Algorithm 1. A FAIL without a severity counts as severe (the only
case Algorithm 1 leaves for the discard branch). Session completion (rows 7 and 13: ``session_complete``
honoured once ``|H| ≥ T_min``) is the orchestrator's minimum-turn guard.
"""

from __future__ import annotations

from bedside.protocols.discharge import Verdict
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
