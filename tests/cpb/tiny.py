"""CPB-Bench's tiny run of each of its tasks (single turn: the grader only), for the shared tests
(:mod:`tests.benchmarks`)."""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks import Tiny


def cpb(tmp: Path) -> Tiny:
    from tests.cpb import synthetic

    data = synthetic.write_data(tmp / "cpb-bench_data")
    return Tiny({"data": str(data)}, {"cases": data}, ("grader",))


TINY = {"cpb": cpb, "cpb_control": cpb}
