"""MedSP1000 frozen rubrics (paper 5.4) and subsets (MedSP1000-Q100): records, readers and the
problems they report (:class:`Unusable`). The loader contract is in :mod:`bedside.medsp.records`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bedside.intervals import UNIT, case_bootstrap, mean_interval
from bedside.params import SetupError

#: The six ACGME core competencies, in the rubric files' order (paper 5.4).
COMPETENCIES: tuple[str, ...] = ("PC", "MK", "SBP", "ICS", "PBLI", "PROF")
COMPETENCY_NAMES: dict[str, str] = {
    "PC": "Patient Care",
    "MK": "Medical Knowledge",
    "SBP": "Systems-Based Practice",
    "ICS": "Interpersonal and Communication Skills",
    "PBLI": "Practice-Based Learning and Improvement",
    "PROF": "Professionalism",
}
RUBRIC_FILE = re.compile(r"^(?P<case_id>.+)_(?P<scenario>scenario\d+)\.json$")


class MedSPError(SetupError):
    """MedSP data that cannot be used at all (nothing loadable, a bad subset file, ...). A
    ``PrerequisiteError`` and a ``ValueError``: the ``inspect eval`` CLI prints it without a traceback."""


def _not_utf8(data: bytes, ex: UnicodeDecodeError) -> str:
    line = data[: ex.start].count(b"\n") + 1
    return f"not UTF-8 text (byte 0x{data[ex.start]:02x} at line {line}, byte offset {ex.start})"


class Unusable(BaseModel):
    """One file or scenario that could not be used, and why."""

    path: str
    record: str = "-"  # "case_id/scenario" when known
    field: str | None = None
    reason: str

    def __str__(self) -> str:
        where = f" field {self.field!r}:" if self.field else ""
        return f"{self.path}: {self.record}:{where} {self.reason}"


# ---------------------------------------------------------------------------------------------
# rubric


class RubricItem(BaseModel):
    id: str  # "<competency>.<1-based position>", e.g. "PC.3"
    competency: str
    text: str


class Rubric(BaseModel):
    """A frozen MedSP1000 rubric (paper 5.4): six arrays of unique verbatim item strings."""

    model_config = ConfigDict(extra="forbid")

    case_id: str = Field(min_length=1)
    scenario: str = Field(pattern=r"^scenario\d+$")
    rubric_version: str = Field(min_length=1)
    scenario_dir: str | None = None  # the release records the authors' source folder; unused
    PC: list[str]
    MK: list[str]
    SBP: list[str]
    ICS: list[str]
    PBLI: list[str]
    PROF: list[str]

    @field_validator(*COMPETENCIES)
    @classmethod
    def _items(cls, items: list[str]) -> list[str]:
        for i, item in enumerate(items):
            if not item.strip():
                raise ValueError(f"item {i + 1} is empty")
        return items

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        seen: dict[str, str] = {}
        for item in self.items():
            if item.text in seen:
                raise ValueError(f"item {item.id} repeats item {seen[item.text]} (items are unique, paper 5.4)")
            seen[item.text] = item.id
        return self

    @property
    def key(self) -> str:
        return f"{self.case_id}/{self.scenario}"

    def items(self) -> list[RubricItem]:
        return [
            RubricItem(id=f"{c}.{i + 1}", competency=c, text=text)
            for c in COMPETENCIES
            for i, text in enumerate(getattr(self, c))
        ]

    def counts(self) -> dict[str, int]:
        return {c: len(getattr(self, c)) for c in COMPETENCIES}

    @property
    def n_items(self) -> int:
        return sum(self.counts().values())


def _pydantic_problems(path: Path, record: str, ex: ValidationError) -> list[Unusable]:
    out = []
    for err in ex.errors():
        field = ".".join(str(p) for p in err["loc"]) or None
        out.append(Unusable(path=str(path), record=record, field=field, reason=err["msg"]))
    return out


def read_rubric(path: str | Path) -> tuple[Rubric | None, list[Unusable]]:
    """One rubric file → (rubric, []) or (None, problems naming file, record and field)."""
    path = Path(path)
    m = RUBRIC_FILE.match(path.name)
    record = f"{m['case_id']}/{m['scenario']}" if m else "-"
    if not m:
        return None, [Unusable(path=str(path), reason="file name is not <case_id>_<scenarioN>.json")]
    try:
        raw_bytes = path.read_bytes()
    except OSError as ex:
        return None, [Unusable(path=str(path), record=record, reason=f"cannot read: {ex}")]
    if not raw_bytes.strip():
        return None, [Unusable(path=str(path), record=record, reason=f"empty file ({len(raw_bytes)} bytes): unusable")]
    try:
        raw = json.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError as ex:
        return None, [Unusable(path=str(path), record=record, reason=_not_utf8(raw_bytes, ex))]
    except json.JSONDecodeError as ex:
        return None, [
            Unusable(
                path=str(path), record=record, reason=f"not valid JSON ({ex.msg} at line {ex.lineno} column {ex.colno})"
            )
        ]
    if not isinstance(raw, dict):
        return None, [
            Unusable(path=str(path), record=record, reason=f"expected a JSON object, got {type(raw).__name__}")
        ]
    try:
        rubric = Rubric.model_validate(raw)
    except ValidationError as ex:
        return None, _pydantic_problems(path, record, ex)
    problems = [
        Unusable(path=str(path), record=record, field=name, reason=f"{value!r} does not match the file name")
        for name, value, expected in (
            ("case_id", rubric.case_id, m["case_id"]),
            ("scenario", rubric.scenario, m["scenario"]),
        )
        if value != expected
    ]
    return (None, problems) if problems else (rubric, [])


class RubricSet(BaseModel):
    """Every rubric of a folder, plus what could not be read."""

    folder: str
    rubrics: dict[str, Rubric] = Field(default_factory=dict)  # "case_id/scenario" -> rubric
    unusable: list[Unusable] = Field(default_factory=list)

    @property
    def n_items(self) -> int:
        return sum(r.n_items for r in self.rubrics.values())

    def counts(self) -> dict[str, int]:
        return {c: sum(r.counts()[c] for r in self.rubrics.values()) for c in COMPETENCIES}

    def without_items(self) -> list[str]:
        """Keys of rubrics that hold no item at all (valid, but nothing to score)."""
        return sorted(k for k, r in self.rubrics.items() if r.n_items == 0)


def load_rubrics(folder: str | Path) -> RubricSet:
    """Read every ``*.json`` rubric of ``folder`` (not recursive). Unreadable files are returned in
    ``unusable`` by name; the call raises only when the folder itself does not exist."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MedSPError(f"{folder}: no such rubric folder")
    result = RubricSet(folder=str(folder))
    for path in sorted(folder.glob("*.json")):
        rubric, problems = read_rubric(path)
        result.unusable.extend(problems)
        if rubric is not None:
            if rubric.key in result.rubrics:  # pragma: no cover - file names are unique per folder
                result.unusable.append(Unusable(path=str(path), record=rubric.key, reason="duplicate rubric"))
            else:
                result.rubrics[rubric.key] = rubric
    return result


# ---------------------------------------------------------------------------------------------
# subsets (MedSP1000-Q100)


class SubsetFile(BaseModel):
    """``subset.json`` of the release: the scenarios of a named subset, as ``case_id/scenarioN``."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str = ""
    n_scenarios: int
    scenarios: list[str]

    @field_validator("scenarios")
    @classmethod
    def _keys(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if not re.fullmatch(r"[^/]+/scenario\d+", s)]
        if bad:
            raise ValueError(f"entries must look like <case_id>/scenarioN: {bad[:5]}")
        if len(set(v)) != len(v):
            raise ValueError("duplicate entries")
        return v

    @model_validator(mode="after")
    def _count(self) -> SubsetFile:
        if self.n_scenarios != len(self.scenarios):
            raise ValueError(f"n_scenarios is {self.n_scenarios} but {len(self.scenarios)} scenarios are listed")
        return self


def load_subset(path: str | Path) -> SubsetFile:
    path = Path(path)
    if not path.is_file():
        raise MedSPError(f"{path}: no such subset file")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as ex:
        raise MedSPError(f"{path}: not a valid JSON subset file ({ex})") from ex
    try:
        return SubsetFile.model_validate(raw)
    except ValidationError as ex:
        raise MedSPError("; ".join(str(u) for u in _pydantic_problems(path, "subset", ex))) from ex


# ---------------------------------------------------------------------------------------------
# rates pooled over a group of cases (the scorer's metric and ``bedside strata``/``report``)

#: one case's rubric counts: competency -> [met, judged]
Counts = dict[str, list[int]]


def _per_case(cases: Sequence[Counts]) -> tuple[np.ndarray, np.ndarray]:
    """(met, judged) per case × competency (in :data:`COMPETENCIES` order)."""
    met = np.array([[c[comp][0] for comp in COMPETENCIES] for c in cases], dtype=float)
    judged = np.array([[c[comp][1] for comp in COMPETENCIES] for c in cases], dtype=float)
    return met, judged


def item_ratio(met: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """met / judged, NaN where nothing was judged."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return met / judged


def rubric_rates_from_counts(cases: Sequence[Counts]) -> dict[str, float]:
    """Pooled rates of a group of cases from their counts: ``micro`` (all items pooled), each
    competency (``PC`` ... pooled over its items, with ``<c> n`` cases holding it and ``<c> items``),
    ``macro`` (the paper's: the six competencies weighted equally, with ``macro k`` competencies
    averaged) and ``scenario_mean`` (the mean of the case completion ratios), each with
    ``lower``/``upper`` (95 %; bedside's interval rule, :mod:`bedside.intervals`: case bootstrap for
    the pooled rates, the mean's rule for ``scenario_mean``) — for reports over any stratum."""
    out: dict[str, float] = {}
    cases = [c for c in cases if sum(v[1] for v in c.values()) > 0]
    n = len(cases)
    if n == 0:
        return out
    met, judged = _per_case(cases)
    case_met, case_items = met.sum(1), judged.sum(1)

    def add(name: str, value: float, ci: tuple[float, float] | None, count: int, **extra: float) -> None:
        out.update(
            {
                name: value,
                f"{name} lower": ci[0] if ci else math.nan,
                f"{name} upper": ci[1] if ci else math.nan,
                f"{name} n": float(count),
                **{f"{name} {k}": v for k, v in extra.items()},
            }
        )

    add(
        "micro",
        float(case_met.sum() / case_items.sum()),
        case_bootstrap(n, lambda idx: item_ratio(case_met[idx].sum(-1), case_items[idx].sum(-1)), UNIT),
        n,
        items=float(case_items.sum()),
    )
    present = [i for i, _ in enumerate(COMPETENCIES) if judged[:, i].sum() > 0]
    for i in present:
        holders = judged[:, i] > 0
        m_i, s_i = met[holders, i], judged[holders, i]

        def ratio(idx: np.ndarray, m: np.ndarray = m_i, s: np.ndarray = s_i) -> np.ndarray:
            return item_ratio(m[idx].sum(-1), s[idx].sum(-1))

        add(
            COMPETENCIES[i],
            float(m_i.sum() / s_i.sum()),
            case_bootstrap(len(m_i), ratio, UNIT),  # a competency's pooled rate
            len(m_i),
            items=float(s_i.sum()),
        )

    def macro(idx: np.ndarray) -> np.ndarray:
        rates = np.stack([item_ratio(met[idx, i].sum(-1), judged[idx, i].sum(-1)) for i in present], axis=-1)
        with np.errstate(invalid="ignore"):
            return np.nanmean(rates, axis=-1) if rates.ndim > 1 else rates

    point = float(np.mean([met[:, i].sum() / judged[:, i].sum() for i in present]))
    add("macro", point, case_bootstrap(n, macro, UNIT), n, k=float(len(present)))
    ratios = case_met / case_items
    add("scenario_mean", float(ratios.mean()), mean_interval(ratios, UNIT), n)
    return out
