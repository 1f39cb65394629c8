"""CPB-Bench's golden runs (``tests/golden/make_golden.py``): the synthetic test data
(``tests/cpb/synthetic.py``) with ``bedside/scripted`` for every role; the scripted-model options per role
("model" = under test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _data(tmp: Path) -> str:
    from tests.cpb import synthetic

    return str(synthetic.write_data(tmp / "cpb-bench_data"))


def _cpb(tmp: Path, **args: Any) -> Any:
    from bedside.tasks.cpb import cpb

    return cpb(data=_data(tmp), **args)


def _cpb_control(tmp: Path) -> Any:
    from bedside.tasks.cpb import cpb_control

    return cpb_control(data=_data(tmp))


#: run name -> temporary folder -> (task, eval arguments, scripted-model options per role)
RUNS = {
    "cpb": lambda tmp: (_cpb(tmp), {}, {}),
    "cpb_accommodating": lambda tmp: (
        _cpb(tmp),
        {},
        {"model": {"doctor_style": "accommodating"}, "grader": {"judge_style": "explained"}},
    ),
    "cpb_continuation": lambda tmp: (
        _cpb(tmp, turns=2),
        {},
        {"model": {"doctor_style": "accommodating", "doctor_corrects_after": 2}},
    ),
    "cpb_control": lambda tmp: (_cpb_control(tmp), {}, {}),
    "cpb_control_alarmist": lambda tmp: (
        _cpb_control(tmp),
        {},
        {"model": {"doctor_style": "alarmist"}},
    ),
}
