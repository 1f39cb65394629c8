"""DischargeBench case record and its JSONL loader.

One record is one patient case of MIMIC-IV-Ext-DischargeBench (paper Appendix A.1 and A.2.1):
the structured profile (demographics, ICD code/version/chapter), the clinical variables the
paper extracted from the discharge note (chief complaint ... family history), the full note,
the extracted discharge information used by the educator and the judge, the applicable
Topic-Checklist question ids, and optional fixed persona fields.

Loader contract: a file is validated whole before any model call; a bad record raises
:class:`CaseFileError` naming the file, line, case id and field, and a file with one bad
record is rejected whole. Besides the schema, the loader rejects bytes that are not UTF-8
(naming the line), duplicate keys within a JSON object, whitespace-only required strings,
boolean ages and ICD chapter labels outside the 24 of Table 2 (or of the other ICD version).
:class:`CaseFileError` is an Inspect ``PrerequisiteError``, so ``inspect eval`` prints it as a
plain message without a Python traceback.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from bedside.params import SetupError
from bedside.prompts import load_yaml
from bedside.records import paths_containing

Personality = Literal["neutral", "anxious", "distrustful", "high_conscientiousness", "minimiser"]
EducationLevel = Literal["elementary", "high_school", "college"]
HealthLiteracy = Literal["low", "high"]
RecallLevel = Literal["poor", "partial", "accurate"]


def topic_checklist_questions() -> list[dict[str, Any]]:
    """The Topic-Checklist questions (``prompts/discharge/topic_checklist.yaml``: id, weight, topic, text,
    applies_when), in the paper's Figure 11 order (parents Q1-Q6, their sub-questions)."""
    return list(load_yaml("discharge/topic_checklist.yaml")["questions"])


#: The Topic-Checklist question ids, as ``prompts/discharge/topic_checklist.yaml`` lists them.
TOPIC_CHECKLIST_IDS: tuple[str, ...] = tuple(q["id"] for q in topic_checklist_questions())

#: The ICD chapter labels of the paper's Table 2 (24 in all, ``ICD_CHAPTER_LABELS``). Chapters
#: whose names coincide in ICD-9 and ICD-10 form one label (valid for both versions); the others
#: stay separate strata (paper A.1) and are valid only for their own ``icd_version``.
ICD_CHAPTER_LABELS_BOTH: tuple[str, ...] = (
    "Neoplasms",
    "Diseases of the Circulatory System",
    "Diseases of the Musculoskeletal System and Connective Tissue",
    "Diseases of the Genitourinary System",
    "Diseases of the Digestive System",
    "Diseases of the Respiratory System",
    "Diseases of the Skin and Subcutaneous Tissue",
)
ICD9_ONLY_CHAPTER_LABELS: tuple[str, ...] = (
    "Endocrine, Nutritional and Metabolic Diseases, and Immunity Disorders",
    "Infectious and Parasitic Diseases",
    "Injury and Poisoning",
    "Diseases of the Blood and Blood-Forming Organs",
    "Supplementary Classification of Factors Influencing Health Status and Contact with Health Services",
    "Symptoms, Signs, and Ill-Defined Conditions",
    "Complications of Pregnancy, Childbirth, and the Puerperium",
    "Congenital Anomalies",
    "Diseases of the Nervous System and Sense Organs",
)
ICD10_ONLY_CHAPTER_LABELS: tuple[str, ...] = (
    "Injury, Poisoning and Certain Other Consequences of External Causes",
    "Factors Influencing Health Status and Contact with Health Services",
    "Certain Infectious and Parasitic Diseases",
    "Diseases of the Nervous System",
    "Endocrine, Nutritional and Metabolic Diseases",
    "Pregnancy, Childbirth and the Puerperium",
    "Symptoms, Signs and Abnormal Clinical and Laboratory Findings",
    "Congenital Malformations, Deformations and Chromosomal Abnormalities",
)
ICD_CHAPTER_LABELS: tuple[str, ...] = ICD_CHAPTER_LABELS_BOTH + ICD9_ONLY_CHAPTER_LABELS + ICD10_ONLY_CHAPTER_LABELS
#: The chapter labels allowed for each ``icd_version``.
ICD_CHAPTERS_BY_VERSION: dict[int, frozenset[str]] = {
    9: frozenset(ICD_CHAPTER_LABELS_BOTH + ICD9_ONLY_CHAPTER_LABELS),
    10: frozenset(ICD_CHAPTER_LABELS_BOTH + ICD10_ONLY_CHAPTER_LABELS),
}


def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty or whitespace only")
    return v


#: A required string: at least one character that is not whitespace (the value is kept as given).
RequiredStr = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]


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

    case_id: RequiredStr
    synthetic: bool = Field(default=False, description="True for cases written by us (fictional, not patient data).")
    provenance: str | None = Field(
        default=None,
        description="The data the case was derived from ('MIMIC-IV-Note': a run checks every role is local).",
    )
    # demographics
    age: int = Field(ge=0, le=120, strict=True)  # strict: JSON true is not age 1
    gender: RequiredStr
    race: RequiredStr
    # diagnosis coding
    icd_code: RequiredStr
    icd_version: Literal[9, 10]
    icd_chapter: RequiredStr
    # medical profile (A.2.1)
    chief_complaint: str
    main_diagnosis: RequiredStr
    reason_for_admission: str
    medications_on_admission: str
    allergies: str
    medical_history: str
    family_history: str
    # the note and what was extracted from it
    discharge_note: RequiredStr
    discharge_info: DischargeInfo
    checklist_questions: list[str] = Field(
        description="Applicable Topic-Checklist question ids (subset of Q1 ... Q6.2)."
    )
    persona: PersonaFields = Field(default_factory=PersonaFields)

    @field_validator("icd_chapter")
    @classmethod
    def _known_icd_chapter(cls, v: str, info: ValidationInfo) -> str:
        if v not in ICD_CHAPTER_LABELS:
            close = difflib.get_close_matches(v, ICD_CHAPTER_LABELS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{v!r} is not one of the 24 ICD chapter labels of the paper's Table 2{hint}")
        version = info.data.get("icd_version")
        if version in ICD_CHAPTERS_BY_VERSION and v not in ICD_CHAPTERS_BY_VERSION[version]:
            other = 10 if version == 9 else 9
            raise ValueError(f"{v!r} is an ICD-{other} chapter label, but icd_version is {version}")
        return v

    @field_validator("checklist_questions")
    @classmethod
    def _known_question_ids(cls, v: list[str]) -> list[str]:
        unknown = [q for q in v if q not in TOPIC_CHECKLIST_IDS]
        if unknown:
            raise ValueError(
                f"unknown Topic-Checklist question id(s) {unknown}; expected ids from {list(TOPIC_CHECKLIST_IDS)}"
            )
        if len(set(v)) != len(v):
            raise ValueError("duplicate question ids")
        return v


class CaseFileError(SetupError):
    """A case file that cannot be used; the message names file, line, case id and field.

    A ``PrerequisiteError`` (and a ``ValueError``): the ``inspect eval`` CLI prints the message
    without a Python traceback."""


class _JSONObject(dict[str, Any]):
    """A decoded JSON object that remembers the keys it held more than once."""

    duplicates: list[str]


def _object_pairs(pairs: list[tuple[str, Any]]) -> _JSONObject:
    obj = _JSONObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj and key not in obj.duplicates:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _duplicate_keys(value: Any, prefix: str = "") -> list[str]:
    """Dotted paths (``discharge_info.new_medications``) of keys repeated within one object."""
    found: list[str] = []
    if isinstance(value, dict):
        found += [f"{prefix}{key}" for key in getattr(value, "duplicates", [])]
        for key, item in value.items():
            found += _duplicate_keys(item, f"{prefix}{key}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _duplicate_keys(item, f"{prefix}{i}.")
    return found


def _message(err: Any) -> str:
    """A pydantic error's message, plus the offending value when short and scalar
    (``Input should be a valid integer (got True)``)."""
    msg = str(err["msg"])
    if err.get("type") == "value_error":  # our validators name the value themselves
        return msg.removeprefix("Value error, ")
    value = err.get("input")
    if err.get("type") == "missing" or not isinstance(value, (str, int, float, type(None))):
        return msg
    text = repr(value)
    return f"{msg} (got {text if len(text) <= 40 else text[:37] + '...'})"


def _undecodable_where(data: bytes) -> str:
    """``case 'x': field 'discharge_note': `` for a line that is not UTF-8, when the rest of the
    line still parses as JSON (else empty): the case id and the first field holding a bad byte."""
    try:
        raw = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return ""
    if not isinstance(raw, dict):
        return ""
    case_id = raw.get("case_id", "<no case_id>")
    fields = paths_containing(raw, "\ufffd")
    return f"case {case_id!r}: " + (f"field {fields[0]!r}: " if fields else "")


def load_cases(path: str | Path) -> list[DischargeCase]:
    """Read and validate a JSONL file of :class:`DischargeCase` records.

    The whole file is validated first; every bad record is reported (file, line, case id,
    field), and a file with any bad record is rejected whole.
    """
    path = Path(path)
    if path.is_dir():
        raise CaseFileError(f"{path}: is a folder, not a JSONL case file")
    if not path.is_file():
        raise CaseFileError(f"{path}: no such case file")
    problems: list[str] = []
    cases: list[DischargeCase] = []
    seen: dict[str, int] = {}
    offset = 0  # byte offset of the current line in the file
    with path.open("rb") as f:
        for lineno, data in enumerate(f, start=1):
            start, offset = offset, offset + len(data)
            try:
                line = data.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as e:
                where = _undecodable_where(data)
                problems.append(
                    f"{path}:{lineno}: {where}not valid UTF-8 (byte 0x{data[e.start]:02x} at column "
                    f"{len(data[: e.start].decode('utf-8', 'replace')) + 1}, byte offset {start + e.start} of the file)"
                )
                continue
            if not line.strip():
                continue
            try:
                raw = json.loads(line, object_pairs_hook=_object_pairs)
            except json.JSONDecodeError as e:
                problems.append(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})")
                continue
            case_id = raw.get("case_id", "<no case_id>") if isinstance(raw, dict) else "<not an object>"
            if isinstance(case_id, str) and case_id in seen:
                problems.append(
                    f"{path}:{lineno}: case {case_id!r}: field 'case_id': duplicate of line {seen[case_id]}"
                )
            elif isinstance(case_id, str):
                seen[case_id] = lineno
            duplicates = _duplicate_keys(raw)
            for field in duplicates:
                problems.append(
                    f"{path}:{lineno}: case {case_id!r}: field {field!r}: key given more than once in the record"
                )
            try:
                case = DischargeCase.model_validate(raw)
            except ValidationError as e:
                for err in e.errors():
                    field = ".".join(str(p) for p in err["loc"]) or "<record>"
                    problems.append(f"{path}:{lineno}: case {case_id!r}: field {field!r}: {_message(err)}")
            else:
                cases.append(case)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise CaseFileError(f"{path}: rejected, {len(problems)} problem(s):\n  {shown}{more}")
    if not cases:
        raise CaseFileError(f"{path}: no case records")
    return cases
