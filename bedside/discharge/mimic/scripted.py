"""Scripted MIMIC-IV-Ext-DischargeBench field extraction for ``bedside/scripted`` (protocol ``mimic.extract``).

A rule-based reading of the note's MIMIC-IV-Note section headers
(:func:`bedside.discharge.mimic.extract.note_sections`),
not a language model: chief complaint, allergies, past medical and family history, medications on
admission and follow-up are the sections themselves; the main diagnosis is the ``PRIMARY:`` line of
"Discharge Diagnosis" (or its first line); the reason for admission is the first two sentences of the
history of present illness; new medications are the discharge medications whose first word is not
among the admission medications; the treatment during the stay is the procedure section plus the
hospital course; the discharge instructions are split into return-to-hospital sentences and the rest.

The note is the sample's own (its metadata, the record the case is built from), never the prompt.

Options (``-M``): ``mimic_malformed_attempts`` (first k attempts of every extraction are prose, to
exercise the retries) and ``mimic_invalid_on`` (notes that contain this text are answered, on every
attempt, with JSON that lacks the required keys: the record is then invalid and listed in the audit).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from inspect_ai.model import ChatMessage

from bedside.discharge.mimic.extract import note_sections
from bedside.providers.scripts import Call


@dataclass
class Options:
    mimic_malformed_attempts: int = 0
    mimic_invalid_on: str = ""


_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
RETURN_WORDS = ("return", "come back", "seek", "emergency", "911", " er ", " ed ", "call your doctor", "call the")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _sentences(text: str) -> list[str]:
    flat = _flat(text)
    return [s for s in _SENTENCE_RE.split(flat) if s] if flat else []


def _med_names(section: str) -> list[tuple[str, str]]:
    """(first word of the drug name, the line) of each numbered medication line."""
    meds = []
    for line in section.splitlines():
        m = re.match(r"^\s*\d+\.\s*(.+)$", line)
        if m:
            text = m.group(1).strip()
            name = re.sub(r"^(HELD|STOPPED|NEW)\s*-\s*", "", text, flags=re.IGNORECASE).split()[0].lower()
            meds.append((name, text))
    return meds


def extract_fields(note: str) -> dict[str, str]:
    """The rule-based extraction (module docstring)."""
    s = note_sections(note)
    diagnosis = s.get("Discharge Diagnosis", "")
    primary = re.search(r"PRIMARY\s*:?\s*(.+)", diagnosis, re.IGNORECASE)
    main = primary.group(1) if primary else (diagnosis.splitlines() or [""])[0]
    before = {name for name, _ in _med_names(s.get("Medications on Admission", ""))}
    new = [
        line
        for name, line in _med_names(s.get("Discharge Medications", ""))
        if name not in before and not line.upper().startswith("HELD")
    ]
    instructions = _sentences(s.get("Discharge Instructions", ""))
    back = [x for x in instructions if any(w in f" {x.lower()} " for w in RETURN_WORDS)]
    post = [
        x
        for x in instructions
        if x not in back and not x.lower().startswith(("dear", "you were admitted", "we wish", "it was a pleasure"))
    ]
    stay = " ".join(
        x
        for x in (_flat(s.get("Major Surgical or Invasive Procedure", "")), _flat(s.get("Brief Hospital Course", "")))
        if x and x.lower() != "none"
    )
    return {
        "chief_complaint": _flat(s.get("Chief Complaint", "")),
        "main_diagnosis": _flat(main),
        "reason_for_admission": " ".join(_sentences(s.get("History of Present Illness", ""))[:2]),
        "medications_on_admission": "; ".join(line for _, line in _med_names(s.get("Medications on Admission", ""))),
        "allergies": _flat(s.get("Allergies", "")),
        "medical_history": "; ".join(
            x.strip("- ").strip() for x in s.get("Past Medical History", "").splitlines() if x.strip("- ").strip()
        ),
        "family_history": _flat(s.get("Family History", "")),
        "discharge_diagnosis": _flat(diagnosis),
        "new_medications": "; ".join(new),
        "treatment_during_stay": stay,
        "post_discharge_treatment": " ".join(post),
        "return_to_hospital_signs": " ".join(back),
        "follow_up_appointments": _flat(s.get("Followup Instructions", "")),
    }


def extract(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    note = situation["discharge_note"]
    if attempt < o.mimic_malformed_attempts:
        return "Here are the fields you asked for: the chief complaint is in the note."
    if o.mimic_invalid_on and o.mimic_invalid_on in note:
        return json.dumps({"chief_complaint": "see note", "comment": "the other fields were left out"})
    return json.dumps(extract_fields(note), ensure_ascii=False)


def extract_situation(call: Call) -> dict[str, Any]:
    return {"discharge_note": call.metadata["discharge_note"]}


SITUATIONS = {"mimic.extract": extract_situation}
HANDLERS = {"mimic.extract": extract}
