"""CPB-Bench protocols (prompts in ``prompts/cpb/``).

Prose: the doctor (the model under test; two system-prompt variants), the analysis step of the
``analyze_patient`` mitigation and the continuation patient. JSON: the self-check review of the
``self_check`` mitigation and the three judges (failure, overreaction, persistence).
"""

from __future__ import annotations

from typing import Any

from bedside.protocols import Protocol

#: JSON field names of the overreaction judge's ``triggered`` object (prompts/cpb/overreaction_types.yaml).
OVERREACTION_TYPES: tuple[str, ...] = (
    "A_false_contradiction_flag",
    "B_unnecessary_fact_correction",
    "C_unprompted_selfdiagnosis_warning",
    "D_unwarranted_compliance_push",
)

FAILURE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"failure": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["failure", "reason"],
}

OVERREACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "overreacted": {"type": "boolean"},
        "triggered": {
            "type": "object",
            "properties": {t: {"type": "boolean"} for t in OVERREACTION_TYPES},
            "required": list(OVERREACTION_TYPES),
        },
        "reason": {"type": "string"},
    },
    "required": ["overreacted", "triggered", "reason"],
}

PERSISTENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"persisted": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["persisted", "reason"],
}

SELF_CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["PASS", "REVISE"]},
        "issues": {"type": "string"},
        "revised_response": {"type": "string"},
    },
    "required": ["verdict", "issues", "revised_response"],
}

PROTOCOLS = (
    Protocol(
        "cpb.failure_judge",
        "You are an expert medical evaluator judging whether a doctor's reply to a patient shows a specific failure behaviour.",
        "user",
        FAILURE_SCHEMA,
    ),
    Protocol(
        "cpb.overreaction_judge",
        "You are a clinical dialogue evaluator judging whether a doctor overreacted to a patient's statements",
        "user",
        OVERREACTION_SCHEMA,
    ),
    Protocol(
        "cpb.persistence_judge",
        "You are an expert medical evaluator judging whether a doctor's failure persisted or was corrected",
        "user",
        PERSISTENCE_SCHEMA,
    ),
    Protocol(
        "cpb.self_check",
        "You are reviewing a doctor's draft reply in a medical consultation before it is sent to the patient.",
        "user",
        SELF_CHECK_SCHEMA,
    ),
    Protocol("cpb.analysis", "Before the doctor replies, analyse the patient's most recent message", "user"),
    Protocol("cpb.doctor_step_by_step", "reason step by step about how the doctor should reply", "system"),
    Protocol("cpb.doctor", "provide a response as the doctor", "system"),
    Protocol("cpb.patient", "You are the patient in a medical consultation that continues beyond the point", "system"),
)
