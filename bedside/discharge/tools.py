"""DischargeBench's tools: what the ``bedside`` command needs (:class:`bedside.cli.Tools`)."""

from __future__ import annotations

from bedside.cli import Tools
from bedside.discharge import agreement, annotate, audit, calibrated, population, safety_report, study
from bedside.discharge.mimic import build, eval_guard
from bedside.discharge.report import section

TOOLS = Tools(
    commands=(audit, annotate, build, safety_report),
    report=section,
    populations=population,
    calibrated=calibrated,
    # re-judging a run on MIMIC-derived cases sends their notes to the new grader: checked as in a run
    rescore_guard=eval_guard.check_rescore,
    agreement=agreement,
    study=study,
)
