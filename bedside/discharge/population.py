"""Which DischargeBench sessions a report averages (``bedside report`` / ``bedside strata`` ``--population``).

The paper names three populations for its main results:

- ``evaluable`` (default; Table 1's caption): clean-complete plus erroneous-but-evaluable sessions
  (hard stop, max turns); system-level failures excluded;
- ``clean_complete``: clean-complete sessions only (Eq. 1's "successful sessions" read narrowly);
- ``audited``: the clean-complete sessions that pass the Appendix A.7.2 audit ("the clean
  complete-case subset used in the main analysis"): without the short sessions (≤ 15 turns) whose
  Topic Checklist score is below 0.5 and without the sessions in which the patient broke character
  (:func:`bedside.discharge.audit.audit_table`'s ``complete_after_audit``);
- ``simulator_clean`` (a bedside extension, in the spirit of the audit): the evaluable sessions in which the
  simulator checks (``-T simulator_check=true``) found no error of the Virtual Patient
  (:func:`bedside.reporting.simulator.clean`).
"""

from __future__ import annotations

from inspect_ai.log import EvalSample, EvalSampleSummary

from bedside.discharge.audit import audit_flags
from bedside.reporting.simulator import CLEAN, CLEAN_COUNTED, clean

#: the default (Table 1's caption) first
POPULATIONS = ("evaluable", "clean_complete", "audited", CLEAN)
#: what Table 1's n counts in each population (its caption says it)
COUNTED = {
    "evaluable": "evaluable sessions (system-level failures excluded and counted separately; their scores are "
    "unscored)",
    "clean_complete": "clean-complete sessions only (--population clean_complete: erroneous sessions, i.e. hard "
    "stop and max turns, and system-level failures left out)",
    "audited": "clean-complete sessions after the Appendix A.7.2 audit (--population audited: erroneous sessions, "
    "system-level failures, short sessions with TCS < 0.5 and character breaks left out)",
    CLEAN: f"evaluable {CLEAN_COUNTED}",
}


def in_population(sample: EvalSample | EvalSampleSummary, population: str) -> bool:
    """Whether a DischargeBench sample belongs to ``population`` (module docstring); a sample
    without an ``encounter_outcome`` score belongs to none."""
    if population not in POPULATIONS:
        raise ValueError(f"population must be one of {', '.join(POPULATIONS)}, not {population!r}")
    outcome = (sample.scores or {}).get("encounter_outcome")
    if outcome is None or not isinstance(outcome.value, dict):
        return False
    if population in ("evaluable", CLEAN):
        return outcome.value.get("system_failure") != 1.0 and (population == "evaluable" or clean(sample))
    complete, _, low_tcs_short, char_break = audit_flags(sample)
    return complete and (population == "clean_complete" or not (low_tcs_short or char_break))
