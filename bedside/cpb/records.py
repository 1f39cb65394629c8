"""CPB-Bench records and their loaders (arXiv 2603.29373; data from the public repository
``yli-z/cpb-bench-challenging-patient-behaviors``, folder ``cpb-bench_data``).

Two file shapes, both normalised to pydantic records:

*Positive cases* (``Pos_behavior_692/<DATASET>_safety_benchmark.json``): one JSON object per source
corpus with ``dataset_name``, ``total_cases``, ``behavior_categories`` (declared counts) and
``cases``; each case has ``case_id``, ``dialog_id``, ``turn_index``, ``behavior_category``,
``patient_behavior_text``, ``conversation_segment`` (the dialogue cut at the challenging patient
turn) and ``complete_conversation``. A dialogue is a list of ``{"Doctor"|"Patient": text,
"turn index": n}``. → :class:`CPBCase`.

*Control cases* (``Neg_behavior_352/<DATASET>_negative_cases_sampled.json``; upstream
``Negative_cases/Negative_sampling_segment``): a JSON list of ``dataset``, ``dialog_id``,
``conversation`` and ``conversation_segment`` (lists, or the same lists stored as Python-literal
strings, which are read with :func:`ast.literal_eval`), ``turn_index`` (int or string),
``target_pct``/``actual_pct`` (sampling bookkeeping). They carry no case id: bedside names them
``<dataset>_ctrl_<dialog_id>_t<turn_index>``. → :class:`ControlCase`.

Types are normalised (ids to strings, turn indices to ints, dialogue turns to
:class:`DialogueTurn`); non-utterance entries (MediTOD's closing ``{"control": ...}`` marker) are
moved out of the dialogues into ``annotations``. Language follows the source corpus: ACI and MediTOD are English, IMCS /
IMCS21 and MedDG are Chinese.

Loader contract (as for DischargeBench): everything is validated before any model call; every bad
record is reported with file, case id and field, and one bad record rejects the load.
:class:`CPBDataError` is an Inspect ``PrerequisiteError`` (via :class:`~bedside.params.SetupError`):
``inspect eval`` prints the report without a Python traceback.

Bad data, rejected with file, case id (or ``record #i``) and field: a file that is empty, not JSON
or truncated (line and column), or not UTF-8 (line and byte offset; case and field when the rest of
the file still parses); a record that is not an object; missing or mistyped fields (a category or a
turn given as a list, a ``turn_index`` that is no integer, ...); unknown behaviour categories or
source datasets; empty dialogues; duplicate case ids (within or across files, both files named);
declared counts that disagree with the cases. A UTF-8 byte-order mark is accepted.

Legitimately odd data, accepted as published: the quirks below; an empty utterance inside a
dialogue (passed on as an empty turn); texts of any length (no cap: a 1 MB utterance is loaded as
is, and a doctor model whose context it overflows gets no reply, which the scorers count as
``no_reply``).

Published quirks, kept as published and listed in :attr:`CPBCase.quirks` (and the sample
metadata): in 4 positive cases the segment ends with a *doctor* turn (the annotated "patient
behaviour" text is a doctor question), and in 2 MediTOD cases ``turn_index`` lies beyond the
segment (one of them has an empty ``patient_behavior_text``).

Cases of the category "Emotional Pressure" are left out when present (:data:`EXCLUDED_CATEGORIES`),
not rejected. They are not in the 692-case release, but the official single-turn runs did generate and
judge them (163 of the 855 results per model in ``evaluators_single/output_single_turn/``); the
authors excluded them later, in the analysis (``EXCLUDE_BEHAVIORS``), so the paper's rates are over
the four categories, as bedside's.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bedside.params import SetupError
from bedside.paths import user_path
from bedside.records import paths_containing

Speaker = Literal["Doctor", "Patient"]

#: The four behaviour categories (the paper's labels) and, in the same order, the short names bedside
#: uses (task filters, DischargeBench's stress overlays).
Category = Literal["Information Contradiction", "Factual Inaccuracy", "Self-diagnosis", "Care Resistance"]
CategoryName = Literal["contradiction", "false_belief", "self_diagnosis", "care_resistance"]
CATEGORIES: dict[str, str] = dict(zip(get_args(Category), get_args(CategoryName), strict=True))
#: Categories the official analysis excludes (``EXCLUDE_BEHAVIORS`` upstream; run and judged, then dropped).
EXCLUDED_CATEGORIES: frozenset[str] = frozenset({"Emotional Pressure"})

#: The source corpora by language. IMCS21 is the control-set name of the IMCS-21 corpus (positives: IMCS).
Language = Literal["en", "zh"]
EnglishDataset = Literal["ACI", "MediTOD"]
ChineseDataset = Literal["IMCS", "IMCS21", "MedDG"]
SourceDataset = Literal[EnglishDataset, ChineseDataset]
LANGUAGES: tuple[str, ...] = get_args(Language)
DATASET_LANGUAGE: dict[str, str] = {
    **dict.fromkeys(get_args(EnglishDataset), "en"),
    **dict.fromkeys(get_args(ChineseDataset), "zh"),
}

POSITIVE_DIR = "Pos_behavior_692"
CONTROL_DIR = "Neg_behavior_352"
POSITIVE_GLOB = "*_safety_benchmark.json"
CONTROL_GLOB = "*_negative_cases_sampled.json"

HOW_TO_OBTAIN = (
    "bedside does not ship CPB-Bench (its data has no licence that allows redistribution). Get it from "
    "the authors' repository: `git clone https://github.com/yli-z/cpb-bench-challenging-patient-behaviors`; "
    "the positive cases are in `cpb-bench_data/Pos_behavior_692/`, the controls in "
    "`Negative_cases/Negative_sampling_segment/` (or `cpb-bench_data/Neg_behavior_352/` in a packaged "
    "copy). Pass the `cpb-bench_data` folder (or the repository root) with `-T data=/path/...`."
)


class CPBDataError(SetupError):
    """CPB-Bench data that cannot be used; the message names file, case id and field. A
    ``PrerequisiteError`` and a ``ValueError``: the ``inspect eval`` CLI prints it without a traceback."""


class DialogueTurn(BaseModel):
    """One utterance of a consultation (``{"Doctor"|"Patient": text, "turn index": n}`` upstream)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    speaker: Speaker
    text: str
    index: int

    @model_validator(mode="before")
    @classmethod
    def _from_upstream(cls, raw: Any) -> Any:
        if not isinstance(raw, dict) or "speaker" in raw:
            return raw
        speakers = [k for k in raw if k != "turn index"]
        if len(speakers) != 1:
            raise ValueError(
                f"a turn needs exactly one of 'Doctor'/'Patient' besides 'turn index', got keys {sorted(raw)}"
            )
        if "turn index" not in raw:
            raise ValueError("turn without 'turn index'")
        return {"speaker": speakers[0], "text": raw[speakers[0]], "index": raw["turn index"]}

    @field_validator("index", mode="before")
    @classmethod
    def _int_index(cls, v: Any) -> Any:
        return _to_int(v)


def _to_int(v: Any) -> Any:
    """A turn index: an int or a string holding one; a boolean (``true`` would pass as 1) or a
    negative number is an error."""
    if isinstance(v, bool):
        raise ValueError(f"must be a whole number >= 0, not the boolean {v!r}")
    if isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v):
        v = int(v)
    if isinstance(v, int) and v < 0:
        raise ValueError(f"must be a whole number >= 0, got {v}")
    return v


def _to_str(v: Any) -> Any:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _literal_list(v: Any) -> Any:
    """A dialogue stored as a Python-literal string (``"[{'Doctor': ...}]"``) → list."""
    if isinstance(v, str):
        try:
            parsed = ast.literal_eval(v)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as ex:
            raise ValueError(f"string is not a Python-literal list of turns ({type(ex).__name__})") from None
        if not isinstance(parsed, list):
            raise ValueError(f"string holds a {type(parsed).__name__}, not a list of turns")
        return parsed
    return v


#: Non-utterance entries some corpora put into a dialogue (MediTOD ends every complete conversation
#: with ``{"control": "Add differential diagnosis", "turn index": n}``, a dialogue-state marker).
ANNOTATION_KEYS = ("control",)


def _split_annotations(turns: Any) -> tuple[Any, list[dict[str, Any]]]:
    if not isinstance(turns, list):
        return turns, []
    keep, notes = [], []
    for t in turns:
        if isinstance(t, dict) and any(k in t for k in ANNOTATION_KEYS) and not ({"Doctor", "Patient"} & set(t)):
            notes.append(t)
        else:
            keep.append(t)
    return keep, notes


class _Dialogue(BaseModel):
    annotations: list[dict[str, Any]] = Field(
        default_factory=list, description="Non-utterance entries removed from the dialogues (ANNOTATION_KEYS)."
    )

    @model_validator(mode="before")
    @classmethod
    def _normalise_dialogues(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        raw = dict(raw)
        notes: list[dict[str, Any]] = list(raw.get("annotations") or [])
        for key in ("conversation_segment", "complete_conversation"):
            if key in raw:
                try:
                    raw[key] = _literal_list(raw[key])
                except ValueError:
                    continue  # reported by the field validator below, with the field name
                raw[key], found = _split_annotations(raw[key])
                notes.extend(n for n in found if n not in notes)
        raw["annotations"] = notes
        return raw

    @field_validator("conversation_segment", "complete_conversation", mode="before", check_fields=False)
    @classmethod
    def _parse_literal(cls, v: Any) -> Any:
        return _literal_list(v)

    @field_validator("dialog_id", "case_id", mode="before", check_fields=False)
    @classmethod
    def _id_str(cls, v: Any) -> Any:
        return _to_str(v)

    @field_validator("turn_index", mode="before", check_fields=False)
    @classmethod
    def _turn_int(cls, v: Any) -> Any:
        return _to_int(v)

    @field_validator("dataset", check_fields=False)
    @classmethod
    def _known_dataset(cls, v: str) -> str:
        if v not in DATASET_LANGUAGE:
            raise ValueError(f"unknown source dataset {v!r}; expected one of {sorted(DATASET_LANGUAGE)}")
        return v

    @property
    def language(self) -> str:
        return DATASET_LANGUAGE[self.dataset]  # type: ignore[attr-defined]


class CPBCase(_Dialogue):
    """One positive case: a consultation cut at a challenging patient turn."""

    model_config = ConfigDict(extra="forbid")

    case_id: str = Field(min_length=1)
    dataset: str
    dialog_id: str = Field(min_length=1)
    turn_index: int
    behavior_category: Category
    patient_behavior_text: str
    conversation_segment: list[DialogueTurn] = Field(min_length=1)
    complete_conversation: list[DialogueTurn] = Field(min_length=1)

    @property
    def category_slug(self) -> str:
        return CATEGORIES[self.behavior_category]

    @property
    def quirks(self) -> list[str]:
        """Deviations from the documented shape, kept as published (module docstring)."""
        out = []
        last = self.conversation_segment[-1]
        if last.speaker != "Patient":
            out.append("segment_ends_with_doctor")
        if last.index != self.turn_index:
            out.append("turn_index_not_last_segment_turn")
        if not self.patient_behavior_text.strip():
            out.append("empty_patient_behavior_text")
        return out


class ControlCase(_Dialogue):
    """One control case: a consultation cut at an ordinary patient turn (no challenging behaviour)."""

    model_config = ConfigDict(extra="forbid")

    case_id: str = Field(min_length=1)
    dataset: str
    dialog_id: str = Field(min_length=1)
    turn_index: int
    conversation_segment: list[DialogueTurn] = Field(min_length=1)
    complete_conversation: list[DialogueTurn] = Field(min_length=1)
    target_pct: float | None = None
    actual_pct: float | None = None

    @property
    def patient_text(self) -> str:
        """The last patient turn of the segment (the turn the doctor answers)."""
        return next((t.text for t in reversed(self.conversation_segment) if t.speaker == "Patient"), "")

    @property
    def quirks(self) -> list[str]:
        return [] if self.conversation_segment[-1].speaker == "Patient" else ["segment_ends_with_doctor"]


# ---------------------------------------------------------------------------------------------
# loading


def _errors(ex: ValidationError) -> list[tuple[str, str]]:
    out = []
    for e in ex.errors():
        msg = e["msg"]
        value = e.get("input")
        short = isinstance(value, int | float | bool) or (isinstance(value, str) and len(value) <= 80)
        if e["type"] != "missing" and short:
            msg = f"{msg} (got {value!r})"
        out.append((".".join(str(p) for p in e["loc"]) or "<record>", msg))
    return out


def _read_json(path: Path, problems: list[str]) -> Any:
    try:
        data = path.read_bytes()
    except OSError as e:
        problems.append(f"{path}: cannot be read ({e.strerror or e})")
        return None
    if not data.strip():
        problems.append(f"{path}: empty file (expected JSON)")
        return None
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        problems.append(
            f"{path}: {_undecodable_where(data)}not valid UTF-8 (byte 0x{data[e.start]:02x} at line {line}, "
            f"byte offset {e.start} of the file)"
        )
    except json.JSONDecodeError as e:
        problems.append(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})")
    return None


def _undecodable_where(data: bytes) -> str:
    """``case 'x': field 'f': `` (or ``record #i``) of the first record holding a byte that is not
    UTF-8, when the rest of the file still parses as JSON; else empty."""
    try:
        raw = json.loads(data.decode("utf-8-sig", "replace"))
    except ValueError:
        return ""
    records = raw.get("cases") if isinstance(raw, dict) else raw
    for i, item in enumerate(records if isinstance(records, list) else []):
        fields = paths_containing(item, "\ufffd")
        if fields:
            name = f"case {item['case_id']!r}" if isinstance(item, dict) and "case_id" in item else f"record #{i}"
            return f"{name}: field {fields[0]!r}: "
    return ""


def _reject(what: str, problems: list[str]) -> None:
    if problems:
        shown = "\n  ".join(problems[:25])
        more = f"\n  ... and {len(problems) - 25} more" if len(problems) > 25 else ""
        raise CPBDataError(f"{what}: rejected, {len(problems)} problem(s):\n  {shown}{more}")


def _positive_file(path: Path, problems: list[str]) -> list[CPBCase]:
    raw = _read_json(path, problems)
    if raw is None:
        return []
    if not isinstance(raw, dict) or not isinstance(raw.get("cases"), list):
        problems.append(f"{path}: expected a JSON object with a 'cases' list (the Pos_behavior_692 shape)")
        return []
    dataset = raw.get("dataset_name")
    if not isinstance(dataset, str):
        problems.append(f"{path}: field 'dataset_name': missing or not a string")
        return []
    cases: list[CPBCase] = []
    excluded = 0
    for i, item in enumerate(raw["cases"]):
        case_id = item.get("case_id", f"<case #{i}>") if isinstance(item, dict) else f"<case #{i}: not an object>"
        if not isinstance(item, dict):
            problems.append(f"{path}: case {case_id}: not a JSON object")
            continue
        category = item.get("behavior_category")
        if isinstance(category, str) and category in EXCLUDED_CATEGORIES:  # (a list would be unhashable)
            excluded += 1
            continue
        try:
            cases.append(CPBCase.model_validate({**item, "dataset": dataset}))
        except ValidationError as ex:
            for field, msg in _errors(ex):
                problems.append(f"{path}: case {case_id!r}: field {field!r}: {msg}")
    declared = raw.get("total_cases")
    if isinstance(declared, int) and declared != len(raw["cases"]):
        problems.append(f"{path}: field 'total_cases': declares {declared} cases, the file holds {len(raw['cases'])}")
    declared_categories = raw.get("behavior_categories")
    if isinstance(declared_categories, dict) and len(cases) + excluded == len(raw["cases"]):
        found = Counter(c.behavior_category for c in cases)
        declared_kept = {k: v for k, v in declared_categories.items() if v and k not in EXCLUDED_CATEGORIES}
        if declared_kept != dict(found):
            problems.append(
                f"{path}: field 'behavior_categories': declares {declared_categories}, the cases hold {dict(found)}"
            )
    return cases


def _control_file(path: Path, problems: list[str]) -> list[ControlCase]:
    raw = _read_json(path, problems)
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f"{path}: expected a JSON list of control cases (the Neg_behavior_352 shape)")
        return []
    cases: list[ControlCase] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            problems.append(f"{path}: record #{i}: not a JSON object")
            continue
        case_id = f"{item.get('dataset', '?')}_ctrl_{item.get('dialog_id', '?')}_t{item.get('turn_index', '?')}"
        record = {k: v for k, v in item.items() if k != "conversation"}
        if "conversation" in item:
            record["complete_conversation"] = item["conversation"]
        try:
            cases.append(ControlCase.model_validate({**record, "case_id": case_id}))
        except ValidationError as ex:
            for field, msg in _errors(ex):
                field = field.replace("complete_conversation", "conversation")
                problems.append(f"{path}: record #{i} ({case_id}): field {field!r}: {msg}")
    return cases


def _files(data: str | Path, subdir: str, pattern: str, upstream_subdir: str) -> list[Path]:
    """The JSON files of one set: ``data`` may be a file, the set's folder, the ``cpb-bench_data``
    folder or the upstream repository root."""
    path = user_path(data)
    if not path.exists():
        raise CPBDataError(f"{data}: no such file or folder. {HOW_TO_OBTAIN}")
    if path.is_file():
        return [path]
    for folder in (path / subdir, path / "cpb-bench_data" / subdir, path / upstream_subdir, path):
        files = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if files:
            return files
    raise CPBDataError(
        f"{path}: no {pattern} files here, nor in {subdir}/ or {upstream_subdir}/ below it. {HOW_TO_OBTAIN}"
    )


def _check_unique(cases: list[Any], problems: list[str], files: list[Path]) -> None:
    seen: dict[str, Path] = {}
    for c, f in zip(cases, files):
        if c.case_id in seen:
            also = "" if seen[c.case_id] == f else f" (also in {seen[c.case_id]})"
            problems.append(f"{f}: case {c.case_id!r}: field 'case_id': duplicate{also}")
        seen.setdefault(c.case_id, f)


def _load(data: str | Path, folder: str, pattern: str, upstream: str, read: Any, label: str) -> list[Any]:
    """Every case of one kind under ``data`` (see :func:`_files`), validated whole."""
    problems: list[str] = []
    cases: list[Any] = []
    files: list[Path] = []  # the file of each case
    for f in _files(data, folder, pattern, upstream):
        found = read(f, problems)
        files += [f] * len(found)
        cases.extend(found)
    _check_unique(cases, problems, files)
    _reject(f"CPB-Bench {label} cases in {data}", problems)
    if not cases:
        raise CPBDataError(f"{data}: no {label} cases")
    return cases


def load_positives(data: str | Path) -> list[CPBCase]:
    """All positive cases under ``data`` (see :func:`_files`), validated whole."""
    return _load(data, POSITIVE_DIR, POSITIVE_GLOB, f"cpb-bench_data/{POSITIVE_DIR}", _positive_file, "positive")


def load_controls(data: str | Path) -> list[ControlCase]:
    """All control cases under ``data`` (see :func:`_files`), validated whole."""
    return _load(data, CONTROL_DIR, CONTROL_GLOB, "Negative_cases/Negative_sampling_segment", _control_file, "control")
