"""DischargeBench (paper: arXiv 2609.20827): an educator teaches a
persona-grounded virtual patient from a discharge note, supervised by an education monitor.

Its tasks: ``discharge`` (the benchmark) and ``discharge_safety_probe`` (replayed transcripts judged
for advice safety; reported with DischargeBench, its end reason is ``probe_transcript``).
``build_discharge_cases`` (MIMIC → case files, ``bedside build-cases``) prepares data and has no
scores to report: one of its ``preparation_tasks``, whose logs are checked against its prompt set
(``bedside rescore``) but never reported with its runs.
"""

from __future__ import annotations

from enum import StrEnum

from bedside.benchmark import Benchmark
from bedside.end_reasons import EndReason


class DischargeEndReason(StrEnum):
    """DischargeBench's own end reason (besides the shared ones of its encounters)."""

    #: the safety probe's replayed transcript (no live encounter)
    PROBE_TRANSCRIPT = "probe_transcript"


#: the persona axes of DischargeBench (paper Appendix A.2), in the order of the paper
PERSONA_AXES = ("personality", "education_level", "health_literacy", "recall_level")

BENCHMARK = Benchmark(
    name="discharge",
    title="DischargeBench",
    tasks=("discharge", "discharge_safety_probe"),
    preparation_tasks=("build_discharge_cases",),
    subject_role="educator",
    roles=("patient", "monitor", "grader"),
    end_reasons=(
        EndReason.CLEAN_COMPLETE,
        EndReason.HARD_STOP,
        EndReason.MAX_TURNS,
        EndReason.ERROR,
        EndReason.SYSTEM_FAILURE,
        *DischargeEndReason,
    ),
    end_reason_scorer="encounter_outcome",
    # paper Sections 3.2.5-3.2.6 and 2.4, plus the end reason (erroneous-but-evaluable sessions)
    strata=("icd_chapter", *PERSONA_AXES, "end_reason"),
    variant_args=("behavior",),
    # the paper-silent options of its task, recorded in the task's metadata (their defaults: the task's)
    run_options=("monitor_policy", "checklist_applicability", "comprehension_divisor"),
    # the probe replays transcripts (no monitor) and scores only advice safety: none of them applies
    tasks_without_run_options=("discharge_safety_probe",),
    # the simulated patient's LLM checker: used only when bound (bedside.simulator_checker)
    optional_roles=("simulator_checker",),
)
