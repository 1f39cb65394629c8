"""DischargeBench protocols (prompts in ``prompts/discharge/``)."""

from __future__ import annotations

from typing import Any

from bedside.protocols import Protocol

UTTERANCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"utterance": {"type": "string"}},
    "required": ["utterance"],
}


def verdict_schema() -> dict[str, Any]:
    from bedside.solvers.encounter import Verdict

    return Verdict.model_json_schema()


QUALITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        axis: {
            "type": "object",
            "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}, "reason": {"type": "string"}},
            "required": ["score", "reason"],
        }
        for axis in ("naturalness", "responsiveness", "clarity", "clinical_relevance")
    },
    "required": ["naturalness", "responsiveness", "clarity", "clinical_relevance"],
}

CHECKLIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}, "reason": {"type": "string"}},
        "required": ["answer", "reason"],
    },
}

GRADES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["correct", "partially correct", "incorrect"]},
            "reason": {"type": "string"},
        },
        "required": ["label", "reason"],
    },
}

FACTUAL_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "question": {"type": "string"},
            "answer": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        },
        "required": ["question", "answer"],
    },
    "minItems": 6,
    "maxItems": 6,
}

PROTOCOLS = (
    # judges (a single user message each)
    Protocol("discharge.judge_quality", "You are a professional medical dialogue evaluator", "user", QUALITY_SCHEMA),
    Protocol("discharge.judge_checklist", "You are an expert medical annotator. Your task is to analyze the conversation history", "user", CHECKLIST_SCHEMA),
    Protocol("discharge.judge_reference", "You are a medical information extractor", "user"),
    Protocol("discharge.judge_comprehension", "Grade how well the patient's post-conversation answer reflects what is in the discharge note", "user", GRADES_SCHEMA),
    Protocol("discharge.judge_factual", "your job is to answer the question as accurately as possible using the provided source", "user", FACTUAL_SCHEMA),
    # simulation
    Protocol("discharge.comprehension", "Based on the conversation you just had with the Educator", "user", UTTERANCE_SCHEMA),
    Protocol("discharge.educator", "You are a Patient Educator conducting a discharge education session", "system"),
    Protocol("discharge.patient", "You are roleplaying as a real hospital patient", "system", UTTERANCE_SCHEMA),
    Protocol("discharge.monitor", "You are an Environment Agent overseeing a clinical simulation", "system", verdict_schema),
)
