"""DischargeBench's tiny run of each of its tasks, for the shared tests (:mod:`tests.benchmarks`)."""

from __future__ import annotations

from pathlib import Path

from bedside.paths import DATASETS_DIR
from tests.benchmarks import Tiny

DEMO = DATASETS_DIR / "discharge" / "demo.jsonl"


def discharge(tmp: Path) -> Tiny:
    return Tiny({"data": str(DEMO), "min_turns": 2, "max_turns": 2}, {"cases": DEMO}, ("grader", "monitor", "patient"))


def safety_probe(tmp: Path) -> Tiny:
    from bedside.discharge.safety_probe import PROBES

    # its grader's fallback is recorded in the advice-safety score's metadata (grader_fallback), not counted
    return Tiny({"data": str(PROBES), "cases": str(DEMO)}, {"cases": DEMO, "probes": PROBES})


def build_cases(tmp: Path) -> Tiny:
    from bedside.discharge.mimic.cohort import select_cohort, write_cohort
    from tests.discharge.mimic.fixture import write_fixture

    fx = write_fixture(tmp / "mimic")
    cohort = tmp / "cases.cohort.jsonl"
    write_cohort(select_cohort(fx.mimic, fx.note, per_chapter=1, seed=0).records, cohort)
    return Tiny({"cohort": str(cohort), "out": str(tmp / "cases.jsonl")}, {"cases": cohort})


TINY = {"discharge": discharge, "discharge_safety_probe": safety_probe, "build_discharge_cases": build_cases}
