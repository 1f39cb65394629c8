"""DischargeBench protocols (prompts in ``prompts/discharge/``)."""

from __future__ import annotations

import re
from typing import Any

from inspect_ai.model import ChatMessage

from bedside.protocols import Protocol, last_user_text

UTTERANCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"utterance": {"type": "string"}},
    "required": ["utterance"],
}


def verdict_schema(messages: list[ChatMessage] | None = None) -> dict[str, Any]:
    from bedside.solvers.encounter import Verdict

    return Verdict.model_json_schema()


REASON = {"type": "string", "maxLength": 300}


def _keyed(ids: list[str], item: dict[str, Any]) -> dict[str, Any]:
    """An object with exactly these keys, each holding ``item``; free keys when ``ids`` is empty."""
    if not ids:
        return {"type": "object", "additionalProperties": item}
    return {"type": "object", "properties": {i: item for i in ids}, "required": ids}


QUALITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        axis: {
            "type": "object",
            "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}, "reason": REASON},
            "required": ["score", "reason"],
        }
        for axis in ("naturalness", "responsiveness", "clarity", "clinical_relevance")
    },
    "required": ["naturalness", "responsiveness", "clarity", "clinical_relevance"],
}

CHECKLIST_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}, "reason": REASON},
    "required": ["answer", "reason"],
}

GRADE_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["correct", "partially correct", "incorrect"]}, "reason": REASON},
    "required": ["label", "reason"],
}


def checklist_schema(messages: list[ChatMessage] | None = None) -> dict[str, Any]:
    """Every question id listed in the prompt's checklist is a required key."""
    prompt = last_user_text(messages or [])
    checklist = prompt.split("Checklist:", 1)[-1].split("Patient Note:", 1)[0]
    return _keyed(re.findall(r"^(Q\d(?:\.\d)?)\. ", checklist, re.MULTILINE), CHECKLIST_ITEM)


def grades_schema(messages: list[ChatMessage] | None = None) -> dict[str, Any]:
    """Every item id of the prompt is a required key."""
    return _keyed(re.findall(r"^Item (\w+)$", last_user_text(messages or []), re.MULTILINE), GRADE_ITEM)

FACTUAL_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "question": {"type": "string", "maxLength": 120},
            "answer": {"anyOf": [
                {"type": "string", "maxLength": 400},
                {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": 12},
            ]},
        },
        "required": ["question", "answer"],
    },
    "minItems": 6,
    "maxItems": 6,
}

PROTOCOLS = (
    # judges (a single user message each)
    Protocol("discharge.judge_quality", "You are a professional medical dialogue evaluator", "user", QUALITY_SCHEMA, 768),
    Protocol("discharge.judge_checklist", "You are an expert medical annotator. Your task is to analyze the conversation history", "user", checklist_schema, 2048),
    Protocol("discharge.judge_reference", "You are a medical information extractor", "user", None, 256),
    Protocol("discharge.judge_comprehension", "Grade how well the patient's post-conversation answer reflects what is in the discharge note", "user", grades_schema, 1024),
    Protocol("discharge.judge_factual", "your job is to answer the question as accurately as possible using the provided source", "user", FACTUAL_SCHEMA, 1536),
    # simulation
    Protocol("discharge.comprehension", "Based on the conversation you just had with the Educator", "user", UTTERANCE_SCHEMA),
    Protocol("discharge.educator", "You are a Patient Educator conducting a discharge education session", "system"),
    Protocol("discharge.patient", "You are roleplaying as a real hospital patient", "system", UTTERANCE_SCHEMA),
    Protocol("discharge.monitor", "You are an Environment Agent overseeing a clinical simulation", "system", verdict_schema, 768),
)
