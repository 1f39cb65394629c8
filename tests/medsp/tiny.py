"""MedSP1000's tiny run of its task, for the shared tests (:mod:`tests.benchmarks`)."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks import Tiny


def medsp(tmp: Path) -> Tiny:
    from bedside.medsp.samples import DEMO_DIR

    return Tiny({"data": str(DEMO_DIR), "max_turns": 2}, {"cases": DEMO_DIR}, ("environment", "grader", "patient"))


TINY = {"medsp": medsp}
