"""CPB-Bench's descriptor as reporting reads it: the directions its judges declare (the keys reporting used to
keep in a central table, and the false-alarm types that table had left out), its strata and its tasks."""

from __future__ import annotations

from bedside import benchmarks
from bedside.cpb import BENCHMARK
from bedside.cpb.protocols import OVERREACTION_TYPES
from bedside.parts import protocols_of

#: its lower-is-better keys of the central table reporting used before the descriptors
OLD_LOWER_IS_BETTER = {
    "failure",
    "overreaction",
    "persistence",
    "no_reply",
    "persistence_unscored",
    "continuation_error",
    "role_fallbacks",
    "unscored",
}


#: the simulator checks' rates and unparsed count (every benchmark with a simulated patient)
SIMULATOR_LOWER_IS_BETTER = {
    "simulator_error",
    "unsupported_fact",
    "persona_break",
    "role_reversal",
    "early_end",
    "checker_unparsed",
}


def test_its_judges_declare_the_directions_reporting_used():
    # the false-alarm types A-D: left out of the central table, so that compare read them the wrong way round
    assert BENCHMARK.lower_is_better == OLD_LOWER_IS_BETTER | set(OVERREACTION_TYPES) | SIMULATOR_LOWER_IS_BETTER
    assert "failure" in benchmarks.lower_is_better("cpb")


def test_its_strata_and_tasks():
    assert BENCHMARK.strata == ("category", "dataset", "language") and BENCHMARK.pooled_keys == frozenset()
    assert benchmarks.of_task("cpb_control") is BENCHMARK


def test_its_balloted_judges_and_the_panel_rules_of_their_keys():
    """The judge protocols a panel of graders may answer (a ``Ballot``) and how a panel combines each key they
    vote on (tests/test_panel.py checks every registered benchmark's ballots against their keys)."""
    assert sorted(p.name for p in protocols_of(BENCHMARK) if p.ballot is not None) == [
        "cpb.failure_judge",
        "cpb.overreaction_judge",
        "cpb.persistence_judge",
    ]
    assert {k.name: k.panel for k in BENCHMARK.keys.values() if k.panel} == {
        "failure": "majority",
        "overreaction": "majority",
        "A_false_contradiction_flag": "majority",
        "B_unnecessary_fact_correction": "majority",
        "C_unprompted_selfdiagnosis_warning": "majority",
        "D_unwarranted_compliance_push": "majority",
        "persistence": "majority",
    }
