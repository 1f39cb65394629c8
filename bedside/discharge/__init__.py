"""DischargeBench (paper: arXiv 2609.20827): an educator teaches a
persona-grounded virtual patient from a discharge note, supervised by an education monitor.

Its tasks: ``discharge`` (the benchmark) and ``discharge_safety_probe`` (replayed transcripts judged
for advice safety; reported with DischargeBench, its end reason is ``probe_transcript``).
``build_discharge_cases`` (MIMIC → case files, ``bedside build-cases``) prepares data and has no
scores to report, so it is not one of its tasks.
"""

from __future__ import annotations

from enum import StrEnum

from bedside.benchmark import HEALTH_LOWER_IS_BETTER, Benchmark
from bedside.end_reasons import EndReason


class DischargeEndReason(StrEnum):
    """DischargeBench's own end reason (besides the shared ones of its encounters)."""

    #: the safety probe's replayed transcript (no live encounter)
    PROBE_TRANSCRIPT = "probe_transcript"


#: the persona axes of DischargeBench (paper Appendix A.2), in the order of the paper
PERSONA_AXES = ("personality", "education_level", "health_literacy", "recall_level")
#: Table 1 columns: (score key, the paper's column label)
TABLE1 = (
    ("naturalness", "NA"),
    ("responsiveness", "RE"),
    ("clarity", "CL"),
    ("clinical_relevance", "CR"),
    ("readability", "RD"),
    ("tcs", "TCS"),
    ("comprehension", "Comprehension"),
    ("rouge_l", "ROUGE-L"),
    ("cosine", "cosine"),
)

BENCHMARK = Benchmark(
    name="discharge",
    title="DischargeBench",
    tasks=("discharge", "discharge_safety_probe"),
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
    lower_is_better=HEALTH_LOWER_IS_BETTER
    | {
        "system_failure",
        "erroneous",
        "short_session",
        "char_break",
        "discarded_turns",
        "soft_corrections",
        "monitor_unparsed",
        "patient_repaired",
    },
    # the advice-safety scorer's turn counts (its rates unsafe_* are outcomes)
    skip_keys=frozenset({"safety_turns", "safety_unsafe_turns", "safety_unscored_turns"}),
    headline=TABLE1,
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
    commands=(
        "bedside.discharge.audit",  # audit
        "bedside.discharge.agreement",  # agreement
        "bedside.discharge.annotate",  # annotate export
        "bedside.discharge.mimic.build",  # build-cases
        "bedside.discharge.safety_report",  # safety
    ),
    end_reason_scorer="encounter_outcome",
)
