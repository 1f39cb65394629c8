"""CPB-Bench's protocols in the reply corpus (:mod:`tests.corpus.replies`)."""

from __future__ import annotations

import json

from bedside.parts import protocol
from tests.corpus.replies import BOOL_STYLES, JSON_STYLES, NO_ANSWER, PROSE_STYLES, Case, simulator_checker_case

#: prose calls read by the same one-line rule as a case here
SAME_AS_COVERED = {"cpb.analysis"}
#: no answer in prose: reasoning that never ended, nothing
PROSE_NO_ANSWER = frozenset({"unfinished_think", "empty"})


def cases() -> list[Case]:
    j = json.dumps
    triggered = {
        "A_false_contradiction_flag": False,
        "B_unnecessary_fact_correction": True,
        "C_unprompted_selfdiagnosis_warning": False,
        "D_unwarranted_compliance_push": False,
    }
    return [
        Case(
            "cpb.failure_judge",
            protocol("cpb.failure_judge"),
            "True",
            BOOL_STYLES,
            lambda v: v.failure,
            # upstream judge_utils: the first True/False anywhere; a hedge names neither, "Tr" is cut off; bedside's
            # strict reading: only a bare, leading or JSON answer
            unreadable={
                "official": frozenset({"hedged", "truncated", "empty"}),
                "strict": frozenset(
                    {"hedged", "truncated", "empty", "bold_answer", "answer_line", "explanation_then_verdict"}
                ),
            },
        ),
        Case(
            "cpb.persistence_judge",
            protocol("cpb.persistence_judge"),
            "Result (True or False): True\nReason: never checked.",
            {
                **PROSE_STYLES,
                "bold": lambda t: t.replace("Result (True or False):", "**Result (True or False):**"),
                "bare": lambda t: "True",
                "verdict_then_explanation": lambda t: "True. The doctor never went back to it.",
                "truncated": lambda t: "Result (True or",
            },
            lambda v: v.persisted,
            unreadable={"official": PROSE_NO_ANSWER, "strict": PROSE_NO_ANSWER | {"truncated"}},
        ),
        Case(
            "cpb.overreaction_judge",
            protocol("cpb.overreaction_judge"),
            j({"verdict": "OVERREACTED", "triggered": triggered}, indent=1),
            {
                **JSON_STYLES,
                "verdict_without_flags": lambda t: j({"verdict": "OVERREACTED"}),
                "verdict_contradicts_flags": lambda t: j(
                    {"verdict": "OVERREACTED", "triggered": {k: False for k in triggered}}
                ),
                "lowercase_verdict": lambda t: t.replace("OVERREACTED", "overreacted"),
            },
            lambda v: v.overreacted,
            # strict: every flag required, and consistent with the verdict
            unreadable={
                "official": NO_ANSWER,
                "strict": NO_ANSWER | {"verdict_without_flags", "verdict_contradicts_flags"},
            },
        ),
        Case(
            "cpb.doctor",
            protocol("cpb.doctor"),
            "Could you tell me more about why you'd rather not have the x-ray?",
            {**PROSE_STYLES, "label": lambda t: f"Doctor: {t}", "bold_label": lambda t: f"**Doctor:** {t}"},
            lambda v: v.message,
        ),
        Case(
            "cpb.doctor_step_by_step",
            protocol("cpb.doctor_step_by_step"),
            "The patient refuses a test.\nFinal Doctor's Response: Could you tell me what worries you?",
            {
                **PROSE_STYLES,
                "bold_marker": lambda t: t.replace("Final Doctor's Response:", "**Final Doctor's Response:**"),
            },
            lambda v: v.message,
        ),
        Case(
            "cpb.self_check",
            protocol("cpb.self_check"),
            "Verdict: REVISE\nIssues: accepts the claim\nRevised Response: Let's check that first.",
            {**PROSE_STYLES, "bold": lambda t: t.replace("Verdict:", "**Verdict:**")},
            lambda v: (v["verdict"], v["revised_response"]),
        ),
        Case(
            "cpb.patient",
            protocol("cpb.patient"),
            "I just don't like hospitals.",
            {**PROSE_STYLES, "label": lambda t: f"Patient: {t}"},
            lambda v: v.message,
        ),
        simulator_checker_case("cpb"),
    ]
