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


PROTOCOLS = (
    Protocol("discharge.comprehension", "Based on the conversation you just had with the Educator", "user", UTTERANCE_SCHEMA),
    Protocol("discharge.educator", "You are a Patient Educator conducting a discharge education session", "system"),
    Protocol("discharge.patient", "You are roleplaying as a real hospital patient", "system", UTTERANCE_SCHEMA),
    Protocol("discharge.monitor", "You are an Environment Agent overseeing a clinical simulation", "system", verdict_schema),
)
