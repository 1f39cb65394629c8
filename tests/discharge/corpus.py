"""DischargeBench's protocols in the reply corpus (:mod:`tests.corpus.replies`), the case extraction's too."""

from __future__ import annotations

import json

from bedside.discharge.protocols import checklist_protocol, grade_protocol
from bedside.parts import protocol
from tests.corpus.replies import JSON_STYLES, PROSE_STYLES, Case, dump, simulator_checker_case

#: prose calls read by the same one-line rule as a case here
SAME_AS_COVERED = {"discharge.comprehension"}


def cases() -> list[Case]:
    j = json.dumps
    verdict = {
        "verdict": "WARN",
        "issue": "prompt_unfaithful",
        "severity": "minor",
        "action": "soft_correction",
        "correction_instruction": "Use simpler words.",
        "prompt_faithfulness": "partial",
        "faithfulness_note": None,
        "reasoning": "Too technical.",
        "session_complete": False,
    }
    rating = {"score": 4, "reason": "clear"}
    extraction = {f: "" for f in protocol("mimic.extract").reply.model_fields}  # type: ignore[union-attr]
    extraction["main_diagnosis"] = "Community-acquired pneumonia"
    return [
        Case(
            "discharge.patient",
            protocol("discharge.patient"),
            j({"utterance": "So I take the new pill twice a day?"}),
            JSON_STYLES,
            lambda v: v.message,
        ),
        Case(
            "discharge.comprehension",
            protocol("discharge.comprehension"),
            j({"utterance": "Twice a day with food."}),
            JSON_STYLES,
            lambda v: v.message,
        ),
        Case(
            "discharge.monitor",
            protocol("discharge.monitor"),
            j(verdict, indent=1),
            JSON_STYLES,
            lambda v: (v.verdict, v.severity, v.session_complete, v.correction_instruction),
        ),
        Case(
            "discharge.judge_quality",
            protocol("discharge.judge_quality"),
            j({a: rating for a in ("naturalness", "responsiveness", "clarity", "clinical_relevance")}, indent=1),
            JSON_STYLES,
            lambda v: {a: r.score for a, r in v.items()},
        ),
        Case(
            "discharge.judge_checklist",
            checklist_protocol(["Q1", "Q2.1"], ["Q1", "Q2.1"]),
            j({"Q1": {"answer": "yes", "reason": "said"}, "Q2.1": {"answer": "no", "reason": "missing"}}, indent=1),
            JSON_STYLES,
            lambda v: {q: a for q, (a, _) in v.items()},
        ),
        Case(
            "discharge.judge_comprehension",
            grade_protocol(["q1", "q2"]),
            j(
                {"q1": {"label": "correct", "reason": "r"}, "q2": {"label": "partially correct", "reason": "r"}},
                indent=1,
            ),
            JSON_STYLES,
            lambda v: {q: g for q, (g, _) in v.items()},
        ),
        Case(
            "discharge.judge_factual",
            protocol("discharge.judge_factual"),
            j([{"question": f"q{i}", "answer": f"a{i}"} for i in range(6)], indent=1),
            JSON_STYLES,
            lambda v: v,
        ),
        Case(
            "discharge.judge_safety",
            protocol("discharge.judge_safety"),
            j({"category": "false_reassurance", "evidence": "no need to call", "note_evidence": "call 911"}, indent=1),
            JSON_STYLES,
            lambda v: v.category,
        ),
        Case(
            "discharge.judge_reference",
            protocol("discharge.judge_reference"),
            "Amoxicillin 500 mg three times a day.",
            PROSE_STYLES,
            lambda v: v,
        ),
        Case(
            "discharge.educator",
            protocol("discharge.educator"),
            "Let's go over your new medicines.",
            PROSE_STYLES,
            lambda v: v.message,
        ),
        Case("mimic.extract", protocol("mimic.extract"), j(extraction, indent=1), JSON_STYLES, dump),
        simulator_checker_case("discharge"),
    ]
