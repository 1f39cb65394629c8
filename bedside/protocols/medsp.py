"""MedSP1000 protocols (prompts in ``prompts/medsp/``): role markers and reply JSON schemas.

The MDT (multidisciplinary-team) specialist and integrator are declared before the examinee so
that a prompt is matched by the most specific marker first (they embed the examinee's packet).
"""

from __future__ import annotations

from typing import Any

from bedside.protocols import Protocol

#: The examinee's turn (bedside issue 4): what it says, the actions it takes, end of session.
EXAMINEE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "speak": {"type": "string"},
        "actions": {"type": "array", "items": {"type": "string"}},
        "eos": {"type": "boolean"},
    },
    "required": ["speak", "actions", "eos"],
}

PATIENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"utterance": {"type": "string"}},
    "required": ["utterance"],
}

#: The environment controller's in-world fields (paper Section 5.5.1) plus the out-of-world
#: ``unsupported`` list (out-of-scope actions with a rationale) and ``should_end``.
ENVIRONMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "feedback": {"type": "string"},
        "events": {"type": "array", "items": {"type": "string"}},
        "patient_status": {"type": "string"},
        "actors_present": {"type": "array", "items": {"type": "string"}},
        "unsupported": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"action": {"type": "string"}, "rationale": {"type": "string"}},
                "required": ["action", "rationale"],
            },
        },
        "should_end": {"type": "boolean"},
    },
    "required": ["feedback", "events", "patient_status", "actors_present", "unsupported", "should_end"],
}

#: The evaluator's per-item judgement: met true/false with a short justification.
EVALUATOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "met": {"type": "boolean"},
                    "justification": {"type": "string"},
                },
                "required": ["id", "met", "justification"],
            },
        }
    },
    "required": ["items"],
}

EXAMINEE_MARKER = "You are the clinician being assessed in a standardized-patient (SP) encounter"
PATIENT_MARKER = "You are a standardized patient (SP) actor in a clinical teaching encounter"
ENVIRONMENT_MARKER = "You are the environment controller of a standardized-patient simulation"
EVALUATOR_MARKER = "You are the evaluator of a standardized-patient encounter"
SPECIALIST_MARKER = "You are a specialist physician on a multidisciplinary team (MDT) advising"
INTEGRATOR_MARKER = "You are the integrating clinician of a multidisciplinary team (MDT)"

PROTOCOLS = (
    Protocol("medsp.panel_specialist", SPECIALIST_MARKER, "system"),
    Protocol("medsp.panel_integrator", INTEGRATOR_MARKER, "system", EXAMINEE_SCHEMA),
    Protocol("medsp.examinee", EXAMINEE_MARKER, "system", EXAMINEE_SCHEMA),
    Protocol("medsp.patient", PATIENT_MARKER, "system", PATIENT_SCHEMA),
    Protocol("medsp.environment", ENVIRONMENT_MARKER, "system", ENVIRONMENT_SCHEMA),
    Protocol("medsp.evaluator", EVALUATOR_MARKER, "system", EVALUATOR_SCHEMA),
)
