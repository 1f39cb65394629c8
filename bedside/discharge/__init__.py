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
    # paper Sections 3.2.5-3.2.6 and 2.4, plus the end reason (erroneous-but-evaluable sessions)
    strata=("icd_chapter", *PERSONA_AXES, "end_reason"),
    # its scorers, in the order of Table 1's columns (NA RE CL CR RD, TCS, Comprehension, ROUGE-L cosine),
    # then the session outcome and the advice-safety extension with its probe check
    scorers=(
        "bedside.scorers.discharge.conversation_quality:conversation_quality",
        "bedside.scorers.discharge.topic_checklist:topic_checklist",
        "bedside.scorers.discharge.comprehension:comprehension",
        "bedside.scorers.discharge.factual_consistency:factual_consistency",
        "bedside.scorers.discharge.encounter_outcome:encounter_outcome",
        "bedside.scorers.discharge.advice_safety:advice_safety",
        "bedside.scorers.discharge.safety_probe:safety_probe_check",
    ),
    variant_args=("behavior",),
    store="bedside.discharge.store:EncounterStore",
    protocol_modules=("bedside.discharge.protocols", "bedside.discharge.mimic.protocol"),
    task_modules=(
        "bedside.tasks.discharge",
        "bedside.tasks.discharge_safety_probe",
        "bedside.tasks.discharge_build_cases",
    ),
    scripts=("bedside.discharge.scripted", "bedside.discharge.scripted_judges", "bedside.discharge.mimic.scripted"),
    report="bedside.discharge.report:section",
    populations="bedside.discharge.population",
    # the paper-silent options recorded in the task's metadata, with the task's defaults
    run_options={
        "monitor_policy": "algorithm1",
        "checklist_applicability": "rule",
        "comprehension_divisor": "applicable",
    },
    # the probe replays transcripts (no monitor) and scores only advice safety: none of them applies
    tasks_without_run_options=("discharge_safety_probe",),
    calibrated="bedside.discharge.calibrated",
    # re-judging a run on MIMIC-derived cases sends their notes to the new grader: checked as in a run
    rescore_guard="bedside.discharge.mimic.eval_guard:check_rescore",
    commands=(
        "bedside.discharge.audit",  # audit
        "bedside.discharge.agreement",  # agreement
        "bedside.discharge.annotate",  # annotate export
        "bedside.discharge.mimic.build",  # build-cases
        "bedside.discharge.safety_report",  # safety
    ),
    end_reason_scorer="encounter_outcome",
)
