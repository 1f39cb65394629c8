"""MedSP1000 (paper: arXiv 2606.05112): a clinician agent (the examinee)
works a standardized-patient case with a patient agent and an environment controller; an evaluator
marks frozen ACGME rubric items."""

from __future__ import annotations

from enum import StrEnum

from bedside.benchmark import Benchmark
from bedside.end_reasons import EndReason


class MedSPEndReason(StrEnum):
    """MedSP1000's own end reasons (besides the shared ``max_turns`` and ``error``)."""

    #: the examinee finished the case: the environment ended it on an ``eos`` turn, no state left
    SCENARIO_COMPLETE = "scenario_complete"
    #: the environment controller ended the encounter on any other turn
    ENVIRONMENT_END = "environment_end"


BENCHMARK = Benchmark(
    name="medsp",
    title="MedSP1000",
    tasks=("medsp",),
    subject_role="examinee",
    roles=("patient", "environment", "grader"),
    end_reasons=(*MedSPEndReason, EndReason.MAX_TURNS, EndReason.ERROR),
    end_reason_scorer="medsp_rubric",
    strata=("specialty",),
    min_n={"specialty": 5},  # per-specialty rates need 5 scored cases (as the paper reports them)
    # a sweep ranks on the per-case rate (the pooled rates are not per-case means)
    ranked_keys=("scenario_mean",),
    variant_args=("scaling",),
    # the simulated patient's LLM checker: used only when bound (bedside.simulator_checker)
    optional_roles=("simulator_checker",),
)
