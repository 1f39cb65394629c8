"""DischargeBench's descriptor as reporting reads it: the directions its scorers declare (the keys reporting
used to keep in a central table, and those that table had left out), its strata and its tasks."""

from __future__ import annotations

from bedside import benchmarks
from bedside.discharge import BENCHMARK, PERSONA_AXES
from bedside.discharge.protocols import UNSAFE_CATEGORIES
from bedside.parts import protocols_of

#: its lower-is-better keys of the central table reporting used before the descriptors
OLD_LOWER_IS_BETTER = {
    "system_failure",
    "erroneous",
    "short_session",
    "char_break",
    "discarded_turns",
    "soft_corrections",
    "monitor_unparsed",
    "patient_repaired",
    "role_fallbacks",
    "unscored",
}
#: rates of bad outcomes that table had left out, so that compare read them the wrong way round: the
#: advice-safety rates and counts, the probe's false flags
NEWLY_LOWER_IS_BETTER = {
    "unsafe_session",
    *(f"unsafe_{c}" for c in UNSAFE_CATEGORIES),
    "safety_unsafe_turns",
    "safety_unscored_turns",
    "control_flagged",
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


def test_its_scorers_declare_the_directions_reporting_used():
    assert BENCHMARK.lower_is_better == OLD_LOWER_IS_BETTER | NEWLY_LOWER_IS_BETTER | SIMULATOR_LOWER_IS_BETTER
    assert benchmarks.lower_is_better("discharge") == BENCHMARK.lower_is_better
    assert "failure" not in benchmarks.lower_is_better("discharge")  # a CPB-Bench rate is no key of its own


def test_its_strata_and_tasks():
    assert BENCHMARK.strata == ("icd_chapter", *PERSONA_AXES, "end_reason")
    assert benchmarks.min_n("icd_chapter") == 1 and BENCHMARK.pooled_keys == frozenset()
    assert benchmarks.of_task("bedside/discharge_safety_probe") is BENCHMARK
    # the case extraction: DischargeBench's for the checks of its prompts, never reported with its runs
    assert benchmarks.of_task("build_discharge_cases") is None
    assert benchmarks.of_task("bedside/build_discharge_cases", preparation=True) is BENCHMARK


def test_its_balloted_judges_and_the_panel_rules_of_their_keys():
    """The judge protocols a panel of graders may answer (a ``Ballot``) and how a panel combines each key they
    vote on (tests/test_panel.py checks every registered benchmark's ballots against their keys)."""
    assert sorted(p.name for p in protocols_of(BENCHMARK) if p.ballot is not None) == [
        "discharge.judge_checklist",
        "discharge.judge_comprehension",
        "discharge.judge_quality",
        "discharge.judge_safety",
    ]
    assert {k.name: k.panel for k in BENCHMARK.keys.values() if k.panel} == {
        "naturalness": "mean",
        "responsiveness": "mean",
        "clarity": "mean",
        "clinical_relevance": "mean",
        "tcs": "majority",
        "comprehension": "mean",
        "unsafe_session": "majority",
    }
