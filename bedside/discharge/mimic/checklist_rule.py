"""Which Topic-Checklist questions apply to an extracted case, and how extracted values are cleaned.

**Topic-Checklist rule** (paper 2.3.1: "questions deemed not applicable to a given patient note are
excluded"; Q and Q_i "are constructed during dataset curation", without a published rule). A case's
applicable ids follow the ``applies_when`` of ``prompts/discharge/topic_checklist.yaml``, read from
the *extracted* fields (a field is "stated" when it is not empty after :func:`clean`):

- Q1, Q3, Q5, Q5.2: always;
- Q2, Q2.1, Q2.3, Q2.4: ``new_medications`` stated; Q2.2: it also gives a dose or schedule (a
  number with a unit, or a frequency such as daily, BID, q6h, PRN, twice, at bedtime);
- Q3.1 / Q3.2 / Q3.3: ``treatment_during_stay`` names a procedure or surgery / a test or result /
  an in-hospital medication or therapy (word lists :data:`PROCEDURE_WORDS`, :data:`TEST_WORDS`,
  :data:`THERAPY_WORDS`);
- Q4: ``post_discharge_treatment`` stated; Q4.1: it gives self-care instructions
  (:data:`SELF_CARE_WORDS`); Q4.2: it changes an existing medication (:data:`CHANGE_WORDS`);
  Q4.3: it or ``follow_up_appointments`` schedules a test, procedure or service (:data:`SERVICE_WORDS`);
- Q5.1: ``return_to_hospital_signs`` stated; Q5.3: it gives a threshold (a number, or more/less
  than, above, below, over, under);
- Q6: ``follow_up_appointments`` stated; Q6.1: it names a clinician or clinic
  (:data:`CLINICIAN_WORDS`); Q6.2: it gives a date or time frame (a number, a day, week or month,
  a weekday, AM/PM, "within").

A sub-question never applies without its parent. The audit lists the ids with the fields, so a
reviewer can correct them by hand.
"""

from __future__ import annotations

import re

from bedside.discharge.mimic.protocol import DISCHARGE_FIELDS
from bedside.discharge.records import TOPIC_CHECKLIST_IDS

# ---------------------------------------------------------------------------------------------
# cleaning and the Topic-Checklist rule

#: answers that mean "the note does not say" (read as "")
NOT_STATED = frozenset(
    {
        "",
        "-",
        "n/a",
        "na",
        "n.a.",
        "not applicable",
        "not stated",
        "not mentioned",
        "not documented",
        "not available",
        "not specified",
        "not provided",
        "not reported",
        "unknown",
        "none stated",
        "none documented",
        "none mentioned",
        "none listed",
        "not answerable",
    }
)
#: ... and, for the discharge information, "none" too (no new medications, no follow-up)
NOT_STATED_DISCHARGE = NOT_STATED | {"none", "no", "none.", "nil"}


def clean(value: str, field_name: str) -> str:
    text = re.sub(r"[ \t]+", " ", str(value)).strip()
    key = text.lower().strip(" .;:")
    empty = NOT_STATED_DISCHARGE if field_name in DISCHARGE_FIELDS else NOT_STATED
    return "" if key in empty or key.rstrip(".") in empty else text


def _has(text: str, pattern: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def _any(words: tuple[str, ...]) -> str:
    """A regex matching any of ``words`` as whole words; a trailing ``*`` marks a stem (any ending)."""
    return r"\b(?:" + "|".join(w[:-1] + r"\w*" if w.endswith("*") else w for w in words) + r")\b"


DOSE_PATTERN = (
    r"\d\s*(mg|mcg|g|gram|grams|units?|ml|meq|puffs?|tabs?|tablets?|capsules?|%)\b"
    r"|\b(daily|bid|tid|qid|qhs|qam|qpm|qd|qod|prn|q\s?\d+\s?h"
    r"|every|once|twice|times a day|at bedtime|weekly|nightly|as needed)\b"
)
PROCEDURE_WORDS = (
    "surgery",
    "surgical",
    "operation",
    "operative",
    "procedure",
    r"\w+ectomy",
    r"\w+otomy",
    r"\w+ostomy",
    r"\w+plasty",
    r"\w+scopy",
    r"\w+pexy",
    "repair",
    "resection",
    "excision",
    "biopsy",
    "drainage",
    "drain",
    "catheteri[sz]ation",
    "stent",
    "intubat*",
    "transplant",
    "amputation",
    "ablation",
    "fixation",
    "ORIF",
    "debridement",
    "placement",
    "thoracentesis",
    "paracentesis",
    "lumbar puncture",
    "embolization",
    "cesarean",
    "c-section",
    "delivery",
    "dilation",
    "reduction",
    "incision",
    "bypass",
    "graft",
    "nailing",
    "splint",
    "splinting",
    "tube",
    "decompression",
    "closure",
    "sutur*",
    "PICC",
    "pacemaker",
    "defibrillator",
    "cardioversion",
    "PCI",
    "line placement",
)
TEST_WORDS = (
    "test",
    "tests",
    "lab",
    "labs",
    "laboratory",
    "level",
    "levels",
    "result",
    "results",
    "showed",
    "shows",
    "revealed",
    "found",
    "imaging",
    "CT",
    "CTA",
    "MRI",
    "MRA",
    "x-ray",
    "xray",
    "radiograph",
    "ultrasound",
    "echo",
    "echocardiogram",
    "EKG",
    "ECG",
    "EEG",
    "EMG",
    "culture",
    "cultures",
    "scan",
    "biopsy",
    "pathology",
    "troponin",
    "hemoglobin",
    "Hgb",
    "white count",
    "WBC",
    "INR",
    "A1c",
    "glucose",
    "creatinine",
    "stress test",
    "angiogram",
    "monitoring",
    "telemetry",
    "anion gap",
    "BMP",
    "CBC",
    "panel",
    "study",
    "studies",
    "potassium",
    "sodium",
    "ketones",
    "lactate",
    "peak flow",
    "function tests",
    "contrast",
    "checks",
)
THERAPY_WORDS = (
    "IV",
    "intravenous",
    "antibiotics?",
    "transfusion",
    "transfused",
    "oxygen",
    "fluids",
    "heparin",
    "insulin",
    "infusion",
    "drip",
    "nebuli[sz]er",
    "steroids?",
    "treated with",
    "given",
    "received",
    "started on",
    "dialysis",
    "chemotherapy",
    "radiation",
    "medication",
    "medications",
    "therapy",
    "physical therapy",
    "analgesi*",
    "pain control",
    "anticoagula*",
    "diuresis",
    "diuretic",
    "lasix",
    "furosemide",
    "vancomycin",
    "ceftriaxone",
    "morphine",
    "oxycodone",
    "acetaminophen",
)
SELF_CARE_WORDS = (
    "diet",
    "eat",
    "drink",
    "fluids",
    "activity",
    "walk",
    "walking",
    "exercise",
    "lift",
    "lifting",
    "rest",
    "wound",
    "incision",
    "dressing",
    "shower",
    "bath",
    "drive",
    "driving",
    "weigh",
    "weight",
    "monitor",
    "check your",
    "blood sugar",
    "glucose",
    "device",
    "drain",
    "crutches",
    "brace",
    "splint",
    "cast",
    "elevate",
    "avoid",
    "smoking",
    "alcohol",
    "salt",
    "sodium",
    "weight-bearing",
    "weight bearing",
    "ice",
    "check",
    "rinse",
    "wash",
    "action plan",
    "peak flow",
    "spacer",
    "inhaler",
    "self-inject*",
    "injection",
)
CHANGE_WORDS = (
    "stop",
    "stopped",
    "hold",
    "held",
    "discontinu*",
    "do not take",
    "don't take",
    "no longer",
    "increase",
    "increased",
    "decrease",
    "decreased",
    "reduce",
    "reduced",
    "change",
    "changed",
    "adjust",
    "adjusted",
    "instead of",
    "switch",
    "switched",
    "restart",
    "new dose",
    "dose",
)
SERVICE_WORDS = (
    "blood test",
    "blood work",
    "bloodwork",
    "lab",
    "labs",
    "laboratory",
    "INR",
    "imaging",
    "CT",
    "MRI",
    "x-ray",
    "ultrasound",
    "echo",
    "scan",
    "physical therapy",
    "occupational therapy",
    "PT",
    "OT",
    "home nursing",
    "visiting nurse",
    "VNA",
    "home health",
    "home care",
    "services",
    "rehab",
    "rehabilitation",
    "dialysis",
    "infusion",
    "colonoscopy",
    "endoscopy",
    "biopsy",
    "test",
    "tests",
    "procedure",
    "appointment for",
    "scheduled",
    "stress test",
    "holter",
    "BMP",
    "CBC",
    "panel",
    "function tests",
    "chem*",
    "pathology",
)
CLINICIAN_WORDS = (
    "Dr",
    "doctor",
    "PCP",
    "primary care",
    "physician",
    "provider",
    "clinic",
    "surgeon",
    "surgery",
    "nurse",
    "NP",
    "PA",
    "team",
    "service",
    "department",
    "center",
    "centre",
    "office",
    "specialist",
    r"\w+ology",
    r"\w+ologist",
    r"\w+iatrics?",
    "oncology",
    "cardiology",
    "obstetric",
    "midwife",
)
TIME_PATTERN = (
    r"\d|\b(day|days|week|weeks|month|months|year|tomorrow|today|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday|am|pm|a\.m\.|p\.m\.|within|next|date|time|when:)\b"
)
THRESHOLD_PATTERN = r"\d|\b(more than|greater than|less than|above|below|over|under|higher than|lower than)\b"


def applicable_questions(info: dict[str, str]) -> list[str]:
    """The Topic-Checklist ids that apply to a case, from its discharge information (module docstring)."""
    new = info.get("new_medications", "")
    stay = info.get("treatment_during_stay", "")
    post = info.get("post_discharge_treatment", "")
    back = info.get("return_to_hospital_signs", "")
    follow = info.get("follow_up_appointments", "")
    ids = {"Q1", "Q3", "Q5", "Q5.2"}
    if new:
        ids |= {"Q2", "Q2.1", "Q2.3", "Q2.4"}
        if _has(new, DOSE_PATTERN):
            ids.add("Q2.2")
    if _has(stay, _any(PROCEDURE_WORDS)):
        ids.add("Q3.1")
    if _has(stay, _any(TEST_WORDS)):
        ids.add("Q3.2")
    if _has(stay, _any(THERAPY_WORDS)):
        ids.add("Q3.3")
    if post:
        ids.add("Q4")
        if _has(post, _any(SELF_CARE_WORDS)):
            ids.add("Q4.1")
        if _has(post, _any(CHANGE_WORDS)):
            ids.add("Q4.2")
        if _has(post, _any(SERVICE_WORDS)) or _has(follow, _any(SERVICE_WORDS)):
            ids.add("Q4.3")
    if back:
        ids.add("Q5.1")
        if _has(back, THRESHOLD_PATTERN):
            ids.add("Q5.3")
    if follow:
        ids.add("Q6")
        if _has(follow, _any(CLINICIAN_WORDS)):
            ids.add("Q6.1")
        if _has(follow, TIME_PATTERN):
            ids.add("Q6.2")
    return [q for q in TOPIC_CHECKLIST_IDS if q in ids]
