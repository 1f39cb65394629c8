"""A corpus of realistic reply styles, run through every reading protocol.

Real API and open-weight models wrap, preface, reason, bold, explain, cut off and leave empty what
they were asked to answer. Each protocol has a canonical answer (what a well-behaved model writes);
each *style* turns it into a reply such a model produces. Reading every (protocol, style, rule) gives
one of three outcomes:

``value``       read, and it means what the canonical answer means (the protocol's ``key``);
``other``       read, but it means something else (only where the reply itself says something else);
``unreadable``  not read: :func:`bedside.calls.ask` retries it, and if every retry looks the same the
                call counts as the protocol says (``Protocol.unreadable``: unscored, system_failure, ...).

``python -m tests.corpus.replies`` prints the table of unscored rates (docs/reading-replies.md, "The reply corpus");
``tests/test_reply_corpus.py`` pins every outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bedside.discharge.protocols import checklist_protocol, grade_protocol
from bedside.medsp.records import RubricItem
from bedside.parts import protocol
from bedside.protocols import Protocol, Reply

RULES = ("official", "strict")

THINK = '<think>\nThe user wants the answer in the requested format. Maybe {"draft": true}? Let me check again.\n</think>\n\n'


def _trailing_comma(text: str) -> str:
    i = text.rfind("}")
    return text[:i].rstrip() + ",\n" + text[i:] if i > 0 else text


def _truncated(text: str) -> str:
    return text[: max(1, len(text) // 2)]


#: styles of a JSON answer (name -> reply from the canonical JSON text)
JSON_STYLES: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "fenced": lambda t: f"```json\n{t}\n```",
    "fenced_no_lang": lambda t: f"```\n{t}\n```",
    "prose_before": lambda t: f"Here is my evaluation in the requested format:\n\n{t}",
    "prose_after": lambda t: f"{t}\n\nLet me know if you need anything else.",
    "prose_both": lambda t: f"Sure! Based on the conversation:\n```json\n{t}\n```\nThis reflects my assessment.",
    "think_block": lambda t: THINK + t,
    "think_open_in_template": lambda t: "The user wants JSON. I will answer.\n</think>\n\n" + t,
    "trailing_comma": _trailing_comma,
    "truncated": _truncated,
    "unfinished_think": lambda t: "<think>\nI need to weigh the evidence carefully before I",
    "empty": lambda t: "",
}

#: styles of a prose answer
PROSE_STYLES: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "think_block": lambda t: THINK + t,
    "think_open_in_template": lambda t: "Let me think about what to say.\n</think>\n\n" + t,
    "unfinished_think": lambda t: "<think>\nI need to weigh the evidence carefully before I",
    "empty": lambda t: "",
}

#: styles of a True/False judge answer (canonical: the word), True = failure / persisted
BOOL_STYLES: dict[str, Callable[[str], str]] = {
    "bare": lambda t: t,
    "bare_punctuated": lambda t: f"**{t}.**",
    "json": lambda t: json.dumps({"failure": t == "True", "reason": "r"}),
    "fenced_json": lambda t: "```json\n" + json.dumps({"failure": t == "True", "reason": "r"}) + "\n```",
    "bold_answer": lambda t: f"**Answer:** {t}",
    "answer_line": lambda t: f"Answer: {t}",
    "verdict_then_explanation": lambda t: (
        f"{t}. The doctor's reply {'goes along with' if t == 'True' else 'does not simply accept'} the patient's statement."
    ),
    "explanation_then_verdict": lambda t: (
        f"The doctor {'accepts the claim without checking it' if t == 'True' else 'checks the claim before acting'}.\n\nFinal answer: {t}"
    ),
    "think_block": lambda t: "<think>\nIs it False or True? Let me look again.\n</think>\n" + t,
    "hedged": lambda t: "It is hard to say; it depends on the clinical context.",
    "truncated": lambda t: t[:2],
    "empty": lambda t: "",
}


@dataclass(frozen=True)
class Case:
    """One protocol's corpus entry: the protocol, its canonical answer, the styles that apply and the
    key that says what a reading means."""

    name: str
    protocol: Protocol
    canonical: str
    styles: dict[str, Callable[[str], str]]
    key: Callable[[Any], Any]


def _reply_key(value: Reply) -> Any:
    return (value.message, json.dumps(value.data, sort_keys=True, default=str))


def _dump(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


ITEMS = [
    RubricItem(id="PC.1", competency="PC", text="Checked the airway"),
    RubricItem(id="ICS.1", competency="ICS", text="Explained the plan"),
]


def cases() -> list[Case]:
    from bedside.scorers.medsp.evaluator import BedsideEvaluatorPrompts

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
    triggered = {
        "A_false_contradiction_flag": False,
        "B_unnecessary_fact_correction": True,
        "C_unprompted_selfdiagnosis_warning": False,
        "D_unwarranted_compliance_push": False,
    }
    out = [
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
        Case("cpb.failure_judge", protocol("cpb.failure_judge"), "True", BOOL_STYLES, lambda v: v.failure),
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
        Case(
            "medsp.examinee",
            protocol("medsp.examinee"),
            j({"speak": "Any allergies?", "actions": ["check vitals"], "eos": False}, indent=1),
            JSON_STYLES,
            _reply_key,
        ),
        Case(
            "medsp.patient",
            protocol("medsp.patient"),
            j({"speak": ["No allergies."], "actors_present": {"Patient": "speaks"}}, indent=1),
            JSON_STYLES,
            _reply_key,
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
            _reply_key,
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
        ),
        Case(
            "medsp.bon_selector",
            protocol("medsp.bon_selector"),
            j({"choice": 2, "rationale": "safest"}),
            JSON_STYLES,
            _reply_key,
        ),
        Case(
            "medsp.panel_vote",
            protocol("medsp.panel_vote"),
            j({"agree": False, "advice": "give oxygen first"}),
            JSON_STYLES,
            _reply_key,
        ),
        Case(
            "medsp.panel_specialist",
            protocol("medsp.panel_specialist"),
            "Check the airway first.",
            PROSE_STYLES,
            lambda v: v.message,
        ),
        Case("mimic.extract", protocol("mimic.extract"), j(extraction, indent=1), JSON_STYLES, _dump),
    ]
    return out


def read(case: Case, style: str, rule: str) -> tuple[str, Any]:
    """(outcome, value) of one style under one reading rule."""
    reference = case.key(case.protocol.read(case.canonical, rule)[0])
    text = case.styles[style](case.canonical)
    try:
        value = case.protocol.read(text, rule)[0]
    except ValueError:
        return "unreadable", None
    got = case.key(value)
    return ("value" if got == reference else "other"), got


def outcomes(rule: str) -> dict[str, dict[str, str]]:
    return {c.name: {s: read(c, s, rule)[0] for s in c.styles} for c in cases()}


def unscored_rates() -> list[tuple[str, int, int, int, str]]:
    """(protocol, styles, unreadable under official, under strict, unreadable styles) per protocol."""
    rows = []
    official, strict = outcomes("official"), outcomes("strict")
    for c in cases():
        o = [s for s, r in official[c.name].items() if r == "unreadable"]
        s_ = [s for s, r in strict[c.name].items() if r == "unreadable"]
        rows.append((c.name, len(c.styles), len(o), len(s_), ", ".join(o)))
    return rows


def table() -> str:
    lines = [
        "| protocol | styles | unscored (official) | unscored (strict) | unreadable styles (official) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, n, o, s, which in unscored_rates():
        lines.append(f"| `{name}` | {n} | {o}/{n} ({o / n:.0%}) | {s}/{n} ({s / n:.0%}) | {which} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
