"""``bedside audit LOG [LOG ...]``: DischargeBench's clean-complete audit (paper Appendix A.7.2).

Among clean-complete sessions: the short ones (≤ 15 turns), the short ones with a Topic Checklist
score below 0.5, and those in which the Virtual Patient broke character, with counts and case ids.
``bedside report`` shows the same audit per model (:func:`bedside.discharge.report.audit`).
"""

from __future__ import annotations

import argparse
from typing import TypedDict

from inspect_ai.log import EvalLog, EvalSample, EvalSampleSummary

from bedside.cli import LOGS_HELP, add_command, bad_input
from bedside.end_reasons import EndReason
from bedside.reporting.load import read_runs
from bedside.reporting.run import Run
from bedside.reporting.scores import label

LOW_TCS = 0.5  # A.7.2: "TCS below 0.5 (fewer than half of the required discharge topics covered)"


class Audit(TypedDict):
    """One log's audit (:func:`audit_table`): counts, and the case ids of the low-TCS short sessions
    and of the character breaks."""

    log: str
    clean_complete: int
    short: int
    low_tcs_short: int
    char_break: int
    complete_after_audit: int
    low_tcs_short_ids: list[str]
    char_break_ids: list[str]


def audit_flags(sample: EvalSample | EvalSampleSummary) -> tuple[bool, bool, bool, bool]:
    """One sample's audit (A.7.2): (clean-complete, short, short with TCS below 0.5, broke character);
    the last three are false for a session that is not clean-complete."""
    outcome = (sample.scores or {}).get("encounter_outcome")
    if outcome is None or outcome.answer != EndReason.CLEAN_COMPLETE:
        return False, False, False, False
    flags = outcome.value if isinstance(outcome.value, dict) else {}  # encounter_outcome's values: a dict
    short = flags.get("short_session") == 1.0
    tcs = (sample.scores or {}).get("topic_checklist")
    value = tcs.value.get("tcs") if tcs is not None and isinstance(tcs.value, dict) else None
    low = short and isinstance(value, float) and value == value and value < LOW_TCS
    return True, short, low, flags.get("char_break") == 1.0


def audit_table(log: EvalLog | Run) -> Audit:
    """DischargeBench's clean-complete audit (A.7.2) of one log."""
    clean: list[str] = []
    short: list[str] = []
    low: list[str] = []
    breaks: list[str] = []
    for sample in log.samples or []:
        is_clean, is_short, is_low, is_break = audit_flags(sample)
        if not is_clean:
            continue
        sid = str(sample.id)
        clean.append(sid)
        if is_short:
            short.append(sid)
        if is_low:
            low.append(sid)
        if is_break:
            breaks.append(sid)
    return {
        "log": label(log),
        "clean_complete": len(clean),
        "short": len(short),
        "low_tcs_short": len(low),
        "char_break": len(breaks),
        "complete_after_audit": len(set(clean) - set(low) - set(breaks)),
        "low_tcs_short_ids": low,
        "char_break_ids": breaks,
    }


def run(args: argparse.Namespace) -> int:
    with bad_input("audit", FileNotFoundError, ValueError):
        runs = read_runs(args.logs)  # a sharded or retried run's logs as one run
    for log in runs:
        row = audit_table(log)
        print(row["log"])
        for key, value in row.items():
            if key != "log":
                print(f"  {key}: {value}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``audit`` sub-command (module docstring)."""
    parser = add_command(sub, "audit", "DischargeBench clean-complete audit (Appendix A.7.2)", __doc__, run)
    parser.add_argument("logs", nargs="+", metavar="LOG", help=LOGS_HELP)
