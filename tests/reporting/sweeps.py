"""A scripted multi-model sweep: several ``bedside/scripted`` educators made to differ (``-M``
options) on the same DischargeBench cases and roles, run with Inspect's ``eval_set`` as the recipe in
docs/reports.md does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai import eval_set
from inspect_ai.log import EvalLog, read_eval_log

from bedside.tasks.discharge import discharge
from tests.conftest import scripted

#: educators that differ: how many topics each covers before signing off (0 = all six)
EDUCATORS: tuple[dict[str, Any], ...] = ({"educator_topics": 1}, {"educator_topics": 3}, {})


def run_sweep(
    log_dir: Path,
    educators: tuple[dict[str, Any], ...] = EDUCATORS,
    limit: int = 4,
    grader: dict[str, Any] | None = None,
) -> list[EvalLog]:
    """One log per educator, the same ``limit`` cases and the same patient, monitor and grader."""
    ok, logs = eval_set(
        discharge(min_turns=4),
        log_dir=str(log_dir),
        model=[scripted(**options) for options in educators],
        model_roles={"patient": scripted(), "monitor": scripted(), "grader": scripted(**(grader or {}))},
        limit=limit,
        display="none",
        log_realtime=False,  # no live sample buffer: the test reads the finished log
    )
    assert ok, [log.error for log in logs]
    return [read_eval_log(log.location) for log in logs]
