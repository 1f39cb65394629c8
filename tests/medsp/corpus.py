"""MedSP1000's protocols in the reply corpus (:mod:`tests.corpus.replies`)."""

from __future__ import annotations

import json

from bedside.medsp.records import RubricItem
from bedside.parts import protocol
from tests.corpus.replies import JSON_STYLES, NO_ANSWER, PROSE_STYLES, Case, reply_key, simulator_checker_case

#: prose calls read by the same one-line rule as a case here
SAME_AS_COVERED = {"medsp.panel_domains", "medsp.panel_integrator"}

ITEMS = [
    RubricItem(id="PC.1", competency="PC", text="Checked the airway"),
    RubricItem(id="ICS.1", competency="ICS", text="Explained the plan"),
]


def cases() -> list[Case]:
    from bedside.scorers.medsp.evaluator import BedsideEvaluatorPrompts

    j = json.dumps
    return [
        Case(
            "medsp.examinee",
            protocol("medsp.examinee"),
            j({"speak": "Any allergies?", "actions": ["check vitals"], "eos": False}, indent=1),
            JSON_STYLES,
            reply_key,
        ),
        Case(
            "medsp.patient",
            protocol("medsp.patient"),
            j({"speak": ["No allergies."], "actors_present": {"Patient": "speaks"}}, indent=1),
            JSON_STYLES,
            reply_key,
        ),
        Case(
            "medsp.environment",
            protocol("medsp.environment"),
            j(
                {
                    "feedback": ["BP 120/80"],
                    "events": [],
                    "actors_present": {},
                    "action_assessments": [],
                    "patient_status": "stable",
                    "progress_index": 1,
                    "state_label": "assessment",
                    "should_end": False,
                    "completion_reason": "",
                },
                indent=1,
            ),
            JSON_STYLES,
            reply_key,
        ),
        Case(
            "medsp.evaluator",
            BedsideEvaluatorPrompts().evaluator_protocol(ITEMS),
            j(
                {
                    "reasoning": ["ok"],
                    "items": {"PC.1": {"met": True, "evidence": "t3"}, "ICS.1": {"met": False, "evidence": ""}},
                },
                indent=1,
            ),
            {
                **JSON_STYLES,
                "item_left_out": lambda t: j({"reasoning": [], "items": {"PC.1": {"met": True, "evidence": "t3"}}}),
            },
            lambda v: {k: x["met"] for k, x in v.verdicts.items()},
            unreadable={"official": NO_ANSWER, "strict": NO_ANSWER | {"item_left_out"}},
            other={"official": frozenset({"item_left_out"})},  # one item judged: the other leaves the denominator
        ),
        Case(
            "medsp.bon_selector",
            protocol("medsp.bon_selector"),
            j({"choice": 2, "rationale": "safest"}),
            JSON_STYLES,
            reply_key,
        ),
        Case(
            "medsp.panel_vote",
            protocol("medsp.panel_vote"),
            j({"agree": False, "advice": "give oxygen first"}),
            JSON_STYLES,
            reply_key,
        ),
        Case(
            "medsp.panel_specialist",
            protocol("medsp.panel_specialist"),
            "Check the airway first.",
            PROSE_STYLES,
            lambda v: v.message,
        ),
        simulator_checker_case("medsp"),
    ]
