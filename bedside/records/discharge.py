"""DischargeBench case record and its JSONL loader.

One record is one patient case of MIMIC-IV-Ext-DischargeBench (paper Appendix A.1 and A.2.1):
the structured profile (demographics, ICD code/version/chapter), the clinical variables the
paper extracted from the discharge note (chief complaint ... family history), the full note,
the extracted discharge information used by the educator and the judge, the applicable
Topic-Checklist question ids, and optional fixed persona fields.

Loader contract: a file is validated whole before any model call; a bad record raises
:class:`CaseFileError` naming the file, line, case id and field, and a file with one bad
record is rejected whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Personality = Literal["neutral", "anxious", "distrustful", "high_conscientiousness", "minimiser"]
EducationLevel = Literal["elementary", "high_school", "college"]
HealthLiteracy = Literal["low", "high"]
RecallLevel = Literal["poor", "partial", "accurate"]

#: The Topic-Checklist question ids of the paper's Figure 11 (parents Q1-Q6, sub-questions).
TOPIC_CHECKLIST_IDS: tuple[str, ...] = (
    "Q1",
    "Q2", "Q2.1", "Q2.2", "Q2.3", "Q2.4",
    "Q3", "Q3.1", "Q3.2", "Q3.3",
    "Q4", "Q4.1", "Q4.2", "Q4.3",
    "Q5", "Q5.1", "Q5.2", "Q5.3",
    "Q6", "Q6.1", "Q6.2",
)  # fmt: skip

#: The 24 ICD chapter labels of the paper's Table 2. Chapters whose names coincide in ICD-9 and
#: ICD-10 form one label; the others stay separate strata (paper A.1).
ICD_CHAPTER_LABELS: tuple[str, ...] = (
    "Neoplasms",
    "Diseases of the Circulatory System",
    "Diseases of the Musculoskeletal System and Connective Tissue",
    "Diseases of the Genitourinary System",
    "Diseases of the Digestive System",
    "Diseases of the Respiratory System",
    "Diseases of the Skin and Subcutaneous Tissue",
    # ICD-9 only
    "Endocrine, Nutritional and Metabolic Diseases, and Immunity Disorders",
    "Infectious and Parasitic Diseases",
    "Injury and Poisoning",
    "Diseases of the Blood and Blood-Forming Organs",
    "Supplementary Classification of Factors Influencing Health Status and Contact with Health Services",
    "Symptoms, Signs, and Ill-Defined Conditions",
    "Complications of Pregnancy, Childbirth, and the Puerperium",
    "Congenital Anomalies",
    "Diseases of the Nervous System and Sense Organs",
    # ICD-10 only
    "Injury, Poisoning and Certain Other Consequences of External Causes",
    "Factors Influencing Health Status and Contact with Health Services",
    "Certain Infectious and Parasitic Diseases",
    "Diseases of the Nervous System",
    "Endocrine, Nutritional and Metabolic Diseases",
    "Pregnancy, Childbirth and the Puerperium",
    "Symptoms, Signs and Abnormal Clinical and Laboratory Findings",
    "Congenital Malformations, Deformations and Chromosomal Abnormalities",
)


class DischargeInfo(BaseModel):
    """The discharge information extracted from the note (paper A.1, 'Profile and
    discharge-information extraction'). Empty string = not applicable for this case."""

    model_config = ConfigDict(extra="forbid")

    discharge_diagnosis: str
    new_medications: str
    treatment_during_stay: str
    post_discharge_treatment: str
    return_to_hospital_signs: str
    follow_up_appointments: str


class PersonaFields(BaseModel):
    """Optional fixed persona fields; any field left unset is assigned from the seed."""

    model_config = ConfigDict(extra="forbid")

    personality: Personality | None = None
    education_level: EducationLevel | None = None
    health_literacy: HealthLiteracy | None = None
    recall_level: RecallLevel | None = None


class DischargeCase(BaseModel):
    """One DischargeBench case."""

    model_config = ConfigDict(extra="forbid")

    case_id: str = Field(min_length=1)
    synthetic: bool = Field(
        default=False, description="True for cases written by us (fictional, not patient data)."
    )
    # demographics
    age: int = Field(ge=0, le=120)
    gender: str = Field(min_length=1)
    race: str = Field(min_length=1)
    # diagnosis coding
    icd_code: str = Field(min_length=1)
    icd_version: Literal[9, 10]
    icd_chapter: str = Field(min_length=1)
    # medical profile (A.2.1)
    chief_complaint: str
    main_diagnosis: str = Field(min_length=1)
    reason_for_admission: str
    medications_on_admission: str
    allergies: str
    medical_history: str
    family_history: str
    # the note and what was extracted from it
    discharge_note: str = Field(min_length=1)
    discharge_info: DischargeInfo
    checklist_questions: list[str] = Field(
        description="Applicable Topic-Checklist question ids (subset of Q1 ... Q6.2)."
    )
    persona: PersonaFields = Field(default_factory=PersonaFields)

    @field_validator("checklist_questions")
    @classmethod
    def _known_question_ids(cls, v: list[str]) -> list[str]:
        unknown = [q for q in v if q not in TOPIC_CHECKLIST_IDS]
        if unknown:
            raise ValueError(f"unknown Topic-Checklist question id(s) {unknown}; expected ids from {list(TOPIC_CHECKLIST_IDS)}")
        if len(set(v)) != len(v):
            raise ValueError("duplicate question ids")
        return v


class CaseFileError(ValueError):
    """A case file that cannot be used; the message names file, line, case id and field."""


def load_cases(path: str | Path) -> list[DischargeCase]:
    """Read and validate a JSONL file of :class:`DischargeCase` records.

    The whole file is validated first; every bad record is reported (file, line, case id,
    field), and a file with any bad record is rejected whole.
    """
    path = Path(path)
    if not path.is_file():
        raise CaseFileError(f"{path}: no such case file")
    problems: list[str] = []
    cases: list[DischargeCase] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as e:
                problems.append(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})")
                continue
            case_id = raw.get("case_id", "<no case_id>") if isinstance(raw, dict) else "<not an object>"
            if isinstance(case_id, str) and case_id in seen:
                problems.append(f"{path}:{lineno}: case {case_id!r}: field 'case_id': duplicate of line {seen[case_id]}")
            elif isinstance(case_id, str):
                seen[case_id] = lineno
            try:
                cases.append(DischargeCase.model_validate(raw))
            except ValidationError as e:
                for err in e.errors():
                    field = ".".join(str(p) for p in err["loc"]) or "<record>"
                    problems.append(f"{path}:{lineno}: case {case_id!r}: field {field!r}: {err['msg']}")
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise CaseFileError(f"{path}: rejected, {len(problems)} problem(s):\n  {shown}{more}")
    if not cases:
        raise CaseFileError(f"{path}: no case records")
    return cases
