"""Which DischargeBench sessions a report averages (``bedside report`` / ``bedside strata`` ``--population``).

The paper names three populations for its main results:

- ``evaluable`` (default; Table 1's caption): clean-complete plus erroneous-but-evaluable sessions
  (hard stop, max turns); system-level failures excluded;
- ``clean_complete``: clean-complete sessions only (Eq. 1's "successful sessions" read narrowly);
- ``audited``: the clean-complete sessions that pass the Appendix A.7.2 audit ("the clean
  complete-case subset used in the main analysis"): without the short sessions (≤ 15 turns) whose
  Topic Checklist score is below 0.5 and without the sessions in which the patient broke character
  (:func:`bedside.discharge.audit.audit_table`'s ``complete_after_audit``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from inspect_ai.log import EvalLog, EvalSample

from bedside.discharge import BENCHMARK
from bedside.discharge.audit import audit_flags
from bedside.reporting.load import LoadedLog, benchmark_of

POPULATIONS = ("evaluable", "clean_complete", "audited")


def in_population(sample: EvalSample, population: str) -> bool:
    """Whether a DischargeBench sample belongs to ``population`` (module docstring); a sample
    without an ``encounter_outcome`` score belongs to none."""
    if population not in POPULATIONS:
        raise ValueError(f"population must be one of {', '.join(POPULATIONS)}, not {population!r}")
    outcome = (sample.scores or {}).get("encounter_outcome")
    if outcome is None or not isinstance(outcome.value, dict):
        return False
    if population == "evaluable":
        return outcome.value.get("system_failure") != 1.0
    clean, _, low_tcs_short, char_break = audit_flags(sample)
    return clean and (population == "clean_complete" or not (low_tcs_short or char_break))


def restrict_log(log: EvalLog, population: str) -> EvalLog:
    """A DischargeBench log with only the samples of ``population``; ``evaluable`` (the default) and logs of
    other benchmarks are kept as they are (system-level failures stay, unscored and counted)."""
    if population not in POPULATIONS:
        raise ValueError(f"population must be one of {', '.join(POPULATIONS)}, not {population!r}")
    if population == "evaluable" or benchmark_of(log) != BENCHMARK.name:
        return log
    return log.model_copy(update={"samples": [s for s in log.samples or [] if in_population(s, population)]})


def restrict_frame(frame: pd.DataFrame, logs: Sequence[LoadedLog], population: str) -> pd.DataFrame:
    """The scores frame (:func:`bedside.reporting.load.scores_frame`) with DischargeBench's rows limited to
    the samples of ``population``; ``evaluable`` keeps it as it is, other benchmarks' rows stay."""
    if population not in POPULATIONS:
        raise ValueError(f"population must be one of {', '.join(POPULATIONS)}, not {population!r}")
    if population == "evaluable":
        return frame
    kept = {
        (item.path, str(s.id), s.epoch)
        for item in logs
        if item.benchmark == BENCHMARK.name
        for s in item.log.samples or []
        if in_population(s, population)
    }
    rows = [
        benchmark != BENCHMARK.name or (log, i, e) in kept
        for benchmark, log, i, e in zip(frame["benchmark"], frame["log"], frame["id"], frame["epoch"])
    ]
    return frame[pd.Series(rows, index=frame.index, dtype=bool)]
