"""CPB-Bench (Challenging Patient Behaviors, arXiv 2603.29373): a doctor replies to patients who
contradict themselves, assert false facts, self-diagnose or resist care; failure and overreaction
judges. Tasks ``cpb`` (with an optional multi-turn continuation, ``-T turns=N``) and ``cpb_control``."""

from __future__ import annotations

from enum import StrEnum

from bedside.benchmark import Benchmark
from bedside.end_reasons import EndReason


class CPBEndReason(StrEnum):
    """CPB-Bench's own end reason of the multi-turn continuation (single-turn samples have none)."""

    #: the continuation patient said ``[End of Conversation]``
    PATIENT_ENDED = "patient_ended"


BENCHMARK = Benchmark(
    name="cpb",
    title="CPB-Bench",
    tasks=("cpb", "cpb_control"),
    subject_role="doctor",
    roles=("patient", "grader"),
    # the continuation's ends (single-turn samples have none)
    end_reasons=(*CPBEndReason, EndReason.CLEAN_COMPLETE, EndReason.MAX_TURNS, EndReason.ERROR),
    strata=("category", "dataset", "language"),
    ranked_keys=("failure", "overreaction"),
    variant_args=("mitigation", "turns"),
    # the simulated patient's LLM checker: used only when bound (bedside.simulator_checker)
    optional_roles=("simulator_checker",),
)
