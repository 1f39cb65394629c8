"""MedSP1000's golden runs (``tests/golden/make_golden.py``): the shipped demo data with
``bedside/scripted`` for every role; the scripted-model options per role ("model" = under test)."""

from __future__ import annotations

from typing import Any


def _medsp(**args: Any) -> Any:
    from bedside.tasks.medsp import medsp

    return medsp(**args)


#: run name -> temporary folder -> (task, eval arguments, scripted-model options per role)
RUNS = {
    "medsp": lambda tmp: (_medsp(), {}, {}),
    "medsp_evaluator_omits": lambda tmp: (
        _medsp(),
        {"limit": 2},
        {"grader": {"medsp_evaluator_missing_item_attempts": 3}},
    ),
    "medsp_panel": lambda tmp: (_medsp(scaling="panel", panel_size=2), {"limit": 2}, {}),
}
