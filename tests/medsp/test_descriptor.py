"""MedSP1000's descriptor as reporting reads it: the directions its scorer declares (the keys reporting used
to keep in a central table), its stratum with its minimum n, its pooled rates and its tasks."""

from __future__ import annotations

from bedside import benchmarks
from bedside.medsp import BENCHMARK
from bedside.parts import protocols_of

#: its lower-is-better keys of the central table reporting used before the descriptors
OLD_LOWER_IS_BETTER = {"erroneous", "role_fallbacks", "judge_unscored", "items_unscored", "unsupported_actions"}


#: the simulator checks' rates and unparsed count (every benchmark with a simulated patient)
SIMULATOR_LOWER_IS_BETTER = {
    "simulator_error",
    "unsupported_fact",
    "persona_break",
    "role_reversal",
    "early_end",
    "checker_unparsed",
}


def test_its_scorer_declares_the_directions_reporting_used():
    assert BENCHMARK.lower_is_better == OLD_LOWER_IS_BETTER | SIMULATOR_LOWER_IS_BETTER
    assert benchmarks.lower_is_better("medsp") == BENCHMARK.lower_is_better


def test_its_stratum_pooled_rates_and_tasks():
    assert BENCHMARK.strata == ("specialty",) and benchmarks.min_n("specialty") == 5
    assert BENCHMARK.pooled_keys == {"micro", "macro"}
    assert benchmarks.of_task("bedside/medsp_smoke", preparation=True) is BENCHMARK


def test_its_balloted_judges_and_the_panel_rules_of_their_keys():
    """The judge protocols a panel of graders may answer (a ``Ballot``) and how a panel combines each key they
    vote on (tests/test_panel.py checks every registered benchmark's ballots against their keys)."""
    assert sorted(p.name for p in protocols_of(BENCHMARK) if p.ballot is not None) == ["medsp.evaluator"]
    assert {k.name: k.panel for k in BENCHMARK.keys.values() if k.panel} == {"micro": "majority"}
