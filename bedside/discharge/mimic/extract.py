"""What the extraction task (``tasks/discharge_build_cases.py``) does around the model call.

- :func:`assemble`: one cohort record plus one extraction reply -> a :class:`DischargeCase` record
  (validated), or the reason it is invalid; with the audit rows of every field.
- :func:`~bedside.discharge.mimic.checklist_rule.applicable_questions` (in ``checklist_rule``): the
  Topic-Checklist questions that apply to a case, and the cleaning of extracted values;
- :func:`~bedside.discharge.mimic.data_use.check_endpoint` (in ``data_use``): the PhysioNet data-use guard, run
  before any model call.
- :class:`CaseWriter`: writes the output files once the task's samples are done.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from bedside.discharge.mimic.checklist_rule import applicable_questions, clean
from bedside.discharge.mimic.data_use import MIMIC_PROVENANCE
from bedside.discharge.mimic.protocol import DISCHARGE_FIELDS, EXTRACTED_FIELDS, PROFILE_FIELDS, CaseExtraction
from bedside.discharge.records import DischargeCase, load_cases

if TYPE_CHECKING:
    from inspect_ai.dataset import Sample
    from inspect_ai.log import EvalSpec
    from inspect_ai.scorer import SampleScore
    from inspect_ai.util import EarlyStop

# ---------------------------------------------------------------------------------------------
# note sections (MIMIC-IV-Note headers) and where each field comes from

NOTE_HEADERS: tuple[str, ...] = (
    "Name",
    "Unit No",
    "Admission Date",
    "Discharge Date",
    "Date of Birth",
    "Service",
    "Allergies",
    "Attending",
    "Chief Complaint",
    "Major Surgical or Invasive Procedure",
    "History of Present Illness",
    "Past Medical History",
    "Social History",
    "Family History",
    "Physical Exam",
    "Pertinent Results",
    "Brief Hospital Course",
    "Medications on Admission",
    "Discharge Medications",
    "Discharge Disposition",
    "Facility",
    "Discharge Diagnosis",
    "Discharge Condition",
    "Discharge Instructions",
    "Followup Instructions",
)
_HEADER_RE = re.compile(
    r"^[ \t]*(" + "|".join(re.escape(h) for h in sorted(NOTE_HEADERS, key=len, reverse=True)) + r")[ \t]*:[ \t]*(.*)$",
    re.MULTILINE | re.IGNORECASE,
)
_CANONICAL = {h.lower(): h for h in NOTE_HEADERS}

#: the note sections each extracted field is read from (for the audit; paper A.1's manual audit)
SOURCE_SECTIONS: dict[str, tuple[str, ...]] = {
    "chief_complaint": ("Chief Complaint",),
    "main_diagnosis": ("Discharge Diagnosis",),
    "reason_for_admission": ("History of Present Illness", "Chief Complaint"),
    "medications_on_admission": ("Medications on Admission",),
    "allergies": ("Allergies",),
    "medical_history": ("Past Medical History",),
    "family_history": ("Family History",),
    "discharge_diagnosis": ("Discharge Diagnosis",),
    "new_medications": ("Discharge Medications", "Medications on Admission"),
    "treatment_during_stay": ("Major Surgical or Invasive Procedure", "Brief Hospital Course"),
    "post_discharge_treatment": ("Discharge Instructions",),
    "return_to_hospital_signs": ("Discharge Instructions",),
    "follow_up_appointments": ("Followup Instructions",),
}
#: the longest excerpt written into one audit cell (spreadsheets cap a cell at 32,767 characters)
EXCERPT_LIMIT = 32_000


def note_sections(note: str) -> dict[str, str]:
    """Section header -> body of a MIMIC-style discharge note (headers as in :data:`NOTE_HEADERS`,
    any case, at the start of a line, followed by a colon). The first occurrence of a header wins."""
    matches = list(_HEADER_RE.finditer(note))
    sections: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(note)
        body = (m.group(2) + "\n" + note[m.end() : end]).strip()
        sections.setdefault(_CANONICAL[m.group(1).lower()], body)
    return sections


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "the and for with was were has had have this that from you your are not but his her she him per day".split()
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


def excerpt_for(note: str, field_name: str, value: str, sections: dict[str, str] | None = None) -> tuple[str, str]:
    """(where, excerpt): the note section(s) ``field_name`` is read from; when the note has none of
    them, the paragraph of the note that shares the most words with ``value``."""
    sections = note_sections(note) if sections is None else sections
    found = [(name, sections[name]) for name in SOURCE_SECTIONS[field_name] if sections.get(name)]
    if found:
        where = " + ".join(name for name, _ in found)
        text = "\n\n".join(f"{name}:\n{body}" if len(found) > 1 else body for name, body in found)
        return where, text[:EXCERPT_LIMIT]
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", note) if p.strip()]
    want = _words(value)
    if not paragraphs or not want:
        return "(section not found)", ""
    best = max(range(len(paragraphs)), key=lambda i: (len(want & _words(paragraphs[i])), -i))
    return f"(section not found; best-matching paragraph {best + 1})", paragraphs[best][:EXCERPT_LIMIT]


def support(value: str, excerpt: str) -> float | None:
    """Share of the value's words (3+ letters, no stop words) that occur in the excerpt."""
    want = _words(value)
    if not want:
        return None
    return round(len(want & _words(excerpt)) / len(want), 2)


# ---------------------------------------------------------------------------------------------
# one case


AUDIT_COLUMNS = (
    "case_id",
    "subject_id",
    "hadm_id",
    "note_id",
    "status",
    "field",
    "value",
    "source_section",
    "source_excerpt",
    "support",
    "flags",
    "problem",
)
INVALID_COLUMNS = ("case_id", "subject_id", "hadm_id", "note_id", "icd_chapter", "stage", "problem", "last_reply")


@dataclass
class Assembled:
    """A case record (None when invalid), the reason it is invalid, and the audit rows."""

    case: dict[str, Any] | None
    problem: str | None = None
    stage: str | None = None  # "extraction" (no usable reply) or "schema" (the case record is invalid)
    audit: list[dict[str, Any]] = field(default_factory=list)
    last_reply: str = ""


def _ids(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record.get(k, "") for k in ("case_id", "subject_id", "hadm_id", "note_id")}


def assemble(
    record: dict[str, Any], extraction: CaseExtraction | None, problem: str | None = None, last_reply: str = ""
) -> Assembled:
    """The :class:`DischargeCase` record of a cohort record and its extraction (validated), or why
    there is none; every field's audit row either way."""
    note = str(record.get("discharge_note", ""))
    sections = note_sections(note)
    if extraction is None:
        result = Assembled(None, problem or "no usable extraction reply", "extraction", last_reply=last_reply)
        result.audit = [_audit_row(record, "invalid", "<record>", "", "", "", None, [], result.problem)]
        return result
    values = {name: clean(getattr(extraction, name), name) for name in EXTRACTED_FIELDS}
    flags: dict[str, list[str]] = {name: [] if values[name] else ["empty"] for name in EXTRACTED_FIELDS}
    if not values["main_diagnosis"] and str(record.get("icd_title", "")).strip():
        values["main_diagnosis"] = str(record["icd_title"]).strip()
        flags["main_diagnosis"] = ["empty in the note extraction; d_icd_diagnoses long_title used"]
    info = {name: values[name] for name in DISCHARGE_FIELDS}
    case = {
        "case_id": record.get("case_id"),
        "synthetic": False,
        "provenance": MIMIC_PROVENANCE,
        "age": record.get("age"),
        "gender": record.get("gender"),
        "race": record.get("race"),
        "icd_code": record.get("icd_code"),
        "icd_version": record.get("icd_version"),
        "icd_chapter": record.get("icd_chapter"),
        **{name: values[name] for name in PROFILE_FIELDS},
        "discharge_note": note,
        "discharge_info": info,
        "checklist_questions": applicable_questions(info),
    }
    try:
        case = DischargeCase.model_validate(case).model_dump(mode="json")
        status, stage, problem = "valid", None, None
    except ValidationError as ex:
        problem = "; ".join(f"field {'.'.join(map(str, e['loc'])) or '<record>'!r}: {e['msg']}" for e in ex.errors())
        status, stage = "invalid", "schema"
    rows = []
    for name in EXTRACTED_FIELDS:
        where, excerpt = excerpt_for(note, name, values[name], sections)
        score = support(values[name], excerpt)
        row_flags = list(flags[name])
        if score is not None and score < 0.5:
            row_flags.append("low support: fewer than half of its words are in the excerpt")
        rows.append(_audit_row(record, status, name, values[name], where, excerpt, score, row_flags, problem))
    questions = cast(list[str], case["checklist_questions"]) if status == "valid" else applicable_questions(info)
    rows.append(
        _audit_row(
            record,
            status,
            "checklist_questions",
            " ".join(questions),
            "(rule on the discharge information)",
            "",
            None,
            [],
            problem,
        )
    )
    return Assembled(case if status == "valid" else None, problem, stage, rows, last_reply)


def _audit_row(
    record: dict[str, Any],
    status: str,
    name: str,
    value: Any,
    where: str,
    excerpt: str,
    score: float | None,
    flags: list[str],
    problem: str | None,
) -> dict[str, Any]:
    return {
        **_ids(record),
        "status": status,
        "field": name,
        "value": value,
        "source_section": where,
        "source_excerpt": excerpt,
        "support": "" if score is None else score,
        "flags": "; ".join(flags),
        "problem": problem or "",
    }


# ---------------------------------------------------------------------------------------------
# the output files


def output_paths(out: str | Path) -> dict[str, Path]:
    """``cases.jsonl`` -> cases.jsonl, cases.audit.csv, cases.invalid.csv, cases.summary.json/.csv."""
    out = Path(out)
    stem = out.with_suffix("") if out.suffix == ".jsonl" else out
    return {
        "cases": out,
        "audit": stem.with_name(stem.name + ".audit.csv"),
        "invalid": stem.with_name(stem.name + ".invalid.csv"),
        "summary_json": stem.with_name(stem.name + ".summary.json"),
        "summary_csv": stem.with_name(stem.name + ".summary.csv"),
    }


RESULT_KEY = "build_cases"


class CaseWriter:
    """Writes the task's output files when its samples are done.

    Inspect has no task-level completion callback, so the writer plugs into the task through its
    ``early_stopping`` protocol, which is task-scoped: ``start_task`` receives the samples that will
    run (so ``--limit`` and ``--sample-id`` are honoured and the output keeps the cohort order),
    ``complete_sample`` each sample's scores (the scorer puts the assembled case and its audit rows
    in the score's metadata), ``complete_task`` is called once at the end. It never stops a sample
    (``schedule_sample`` returns None). What ``complete_task`` returns (paths and counts) is
    recorded in the log (``results.early_stopping.metadata``).

    Files: the cases (valid records only, loadable by ``load_cases``), the audit CSV (every field of
    every record beside its note excerpt, valid and invalid), the invalid-record list (with the
    stage and reason, incl. samples that ended in an error) and the Table 2 summary of the cases.
    """

    def __init__(self, out: str | Path) -> None:
        self.paths = output_paths(out)
        self.order: list[str] = []
        self.records: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}

    async def start_task(self, task: EvalSpec, samples: list[Sample], epochs: int) -> str:
        self.order = [str(s.id) for s in samples]
        self.records = {str(s.id): dict(s.metadata or {}) for s in samples}
        self.results = {}
        return "bedside.discharge.mimic.CaseWriter (writes the case files; stops nothing)"

    async def schedule_sample(self, id: str | int, epoch: int) -> EarlyStop | None:
        return None

    async def complete_sample(self, id: str | int, epoch: int, scores: dict[str, SampleScore]) -> None:
        if epoch != 1:
            return  # one case per cohort record: later epochs are re-extractions, not new cases
        for sample_score in scores.values():
            meta = sample_score.score.metadata or {}
            if RESULT_KEY in meta:
                self.results[str(id)] = meta[RESULT_KEY]
                return

    async def complete_task(self) -> dict[str, Any]:
        return write_outputs(self.paths, self.order, self.records, self.results)


def write_outputs(
    paths: dict[str, Path], order: list[str], records: dict[str, dict[str, Any]], results: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    from bedside.discharge.mimic.cohort import summarize, write_summary

    paths["cases"].parent.mkdir(parents=True, exist_ok=True)
    cases: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    audit: list[dict[str, Any]] = []
    for sample_id in order:
        record = records.get(sample_id, {})
        result = results.get(sample_id)
        base = {**_ids(record), "icd_chapter": record.get("icd_chapter", "")}
        if result is None:
            problem = "the sample ended in an error (see the eval log); no extraction recorded"
            invalid.append({**base, "stage": "sample_error", "problem": problem, "last_reply": ""})
            audit.append(_audit_row(record, "invalid", "<record>", "", "", "", None, [], problem))
            continue
        audit.extend(result["audit"])
        if result["case"] is not None:
            cases.append(result["case"])
        else:
            invalid.append(
                {
                    **base,
                    "stage": result["stage"],
                    "problem": result["problem"],
                    "last_reply": result["last_reply"][:2000],
                }
            )
    with paths["cases"].open("w", encoding="utf-8") as f:
        for case in cases:
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
    _write_csv(paths["audit"], AUDIT_COLUMNS, audit)
    _write_csv(paths["invalid"], INVALID_COLUMNS, invalid)
    summary = summarize(cases)
    write_summary(summary, paths["summary_json"], paths["summary_csv"])
    if cases:
        load_cases(paths["cases"])  # the contract: the file loads with the benchmark's own loader
    return {
        "cases": str(paths["cases"]),
        "valid": len(cases),
        "invalid": len(invalid),
        "audit": str(paths["audit"]),
        "invalid_list": str(paths["invalid"]),
        "summary": str(paths["summary_json"]),
        "invalid_case_ids": [row["case_id"] for row in invalid],
    }


def _write_csv(path: Path, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
