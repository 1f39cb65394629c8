"""Reply protocol of the MIMIC-IV-Ext-DischargeBench field extraction (``tasks/discharge_build_cases.py``,
prompt ``prompts/discharge/mimic/extract_fields.j2``; paper Appendix A.1, "Profile and discharge-information
extraction").

One JSON object with the seven profile fields and the six discharge-information fields of
:class:`bedside.discharge.records.DischargeCase`, every one a string ("" when the note does not say).
Every key is required: a reply that misses one is unreadable and is asked again (then listed in the
audit as invalid). A list is accepted where a string is expected (models like to list medications)
and joined with ``"; "``; ``null`` reads as "".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from bedside.protocols import Protocol

#: the profile fields (paper A.1 and A.2.1), in the order of the schema
PROFILE_FIELDS: tuple[str, ...] = (
    "chief_complaint",
    "main_diagnosis",
    "reason_for_admission",
    "medications_on_admission",
    "allergies",
    "medical_history",
    "family_history",
)
#: the discharge information used by the educator and the judge (``DischargeInfo``)
DISCHARGE_FIELDS: tuple[str, ...] = (
    "discharge_diagnosis",
    "new_medications",
    "treatment_during_stay",
    "post_discharge_treatment",
    "return_to_hospital_signs",
    "follow_up_appointments",
)
EXTRACTED_FIELDS: tuple[str, ...] = PROFILE_FIELDS + DISCHARGE_FIELDS


def _flatten(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "; ".join(str(_flatten(v)).strip() for v in value if str(_flatten(v)).strip())
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in value.items())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


class CaseExtraction(BaseModel):
    """The fields read from one discharge note (all required; "" = not in the note)."""

    model_config = ConfigDict(extra="ignore")

    chief_complaint: str
    main_diagnosis: str
    reason_for_admission: str
    medications_on_admission: str
    allergies: str
    medical_history: str
    family_history: str
    discharge_diagnosis: str
    new_medications: str
    treatment_during_stay: str
    post_discharge_treatment: str
    return_to_hospital_signs: str
    follow_up_appointments: str

    @field_validator(*EXTRACTED_FIELDS, mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> Any:
        return _flatten(v)


EXTRACT = Protocol("mimic.extract", CaseExtraction, 2048)

PROTOCOLS = (EXTRACT,)
