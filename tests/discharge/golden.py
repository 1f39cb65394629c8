"""DischargeBench's golden runs (``tests/golden/make_golden.py``): the shipped demo data with
``bedside/scripted`` for every role; the scripted-model options per role ("model" = under test)."""

from __future__ import annotations

from typing import Any


def _discharge() -> Any:
    from bedside.tasks.discharge import discharge

    return discharge()


#: run name -> temporary folder -> (task, eval arguments, scripted-model options per role)
RUNS = {
    "discharge": lambda tmp: (_discharge(), {}, {}),
    "discharge_faults": lambda tmp: (
        _discharge(),
        {"limit": 4},
        {
            "monitor": {"monitor_warn_turns": [3]},
            "patient": {"break_character_turns": [2], "break_character_attempts": 1},
        },
    ),
    "discharge_monitor_unreadable": lambda tmp: (
        _discharge(),
        {"limit": 2},
        {"monitor": {"monitor_malformed_attempts": 3}},
    ),
}
