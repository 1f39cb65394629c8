"""MedSP1000 records and loaders (paper arXiv 2606.05112, Sections 2.1.1, 4 and 5.4).

A MedSP1000 *scenario* is one independently runnable SP encounter of a source case. Its material
is split into four role packets (paper Section 4, "Role-specific packets"), one folder each::

    <root>/<case_id>/<scenarioN>/examinee/                scenario initialisation (the model under test)
    <root>/<case_id>/<scenarioN>/sp_actor/                the standardized-patient script
    <root>/<case_id>/<scenarioN>/environment_controller/  environment materials (results, timed events, team)
    <root>/<case_id>/<scenarioN>/evaluator/               scoring references (never shown to the other agents)

Each folder holds text files (``.md``, ``.txt``, ``.json``, ``.yaml``/``.yml``; read recursively,
in path order; other files are listed as skipped). The frozen rubric of a scenario is
``<case_id>_<scenarioN>.json`` with the keys ``case_id``, ``scenario``, ``rubric_version`` and
the six ACGME arrays ``PC``, ``MK``, ``SBP``, ``ICS``, ``PBLI``, ``PROF`` of verbatim item
strings (paper 5.4; the official release also carries the authors' ``scenario_dir``). It is
looked up in a separate folder when one is given (``rubrics=``, as in the official release),
otherwise next to the scenario: in the scenario folder, the case folder, then the root.

Optional case metadata (e.g. the HealthBench specialty the paper assigns to every case) is read
from ``<root>/<case_id>/metadata.json`` (or ``.yaml``/``.yml``) and may be refined per scenario
by ``<root>/<case_id>/<scenarioN>/metadata.json``.

Loader contract. Bad input never crashes the loader and is never dropped silently: every file or
scenario that cannot be used is returned as an :class:`Unusable` entry naming the file, the
record (``case_id/scenario``) and the field, with the reason (an empty rubric file, invalid JSON,
a missing role folder, an empty packet file, a rubric whose ids do not match its file name, ...).
Callers report them (the task logs a warning and writes them into the eval log). A rubric with
zero items is valid (the release has 86) but cannot be scored; :func:`load_rubrics` lists them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

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
#: The four role packets (paper Section 4), as folder names of the official layout.
ROLES: tuple[str, ...] = ("examinee", "sp_actor", "environment_controller", "evaluator")
TEXT_SUFFIXES: tuple[str, ...] = (".md", ".txt", ".json", ".yaml", ".yml")
SCENARIO_DIR = re.compile(r"^scenario\d+$")
RUBRIC_FILE = re.compile(r"^(?P<case_id>.+)_(?P<scenario>scenario\d+)\.json$")
METADATA_NAMES: tuple[str, ...] = ("metadata.json", "metadata.yaml", "metadata.yml")


class MedSPError(ValueError):
    """MedSP data that cannot be used at all (nothing loadable, a bad subset file, ...)."""


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
        return None, [Unusable(path=str(path), record=record, reason=f"not UTF-8 text ({ex.reason})")]
    except json.JSONDecodeError as ex:
        return None, [Unusable(path=str(path), record=record, reason=f"not valid JSON ({ex.msg} at line {ex.lineno} column {ex.colno})")]
    if not isinstance(raw, dict):
        return None, [Unusable(path=str(path), record=record, reason=f"expected a JSON object, got {type(raw).__name__}")]
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
# scenarios


class PacketFile(BaseModel):
    name: str  # path relative to the role folder
    text: str


class RolePacket(BaseModel):
    """The text files of one role folder."""

    role: str
    files: list[PacketFile]
    skipped: list[str] = Field(default_factory=list)  # non-text files, not shown to any agent

    def text(self) -> str:
        """All files, each under a ``--- file: name ---`` header (a lone file has no header)."""
        if len(self.files) == 1:
            return self.files[0].text.strip()
        return "\n\n".join(f"--- file: {f.name} ---\n{f.text.strip()}" for f in self.files)


class CaseMeta(BaseModel):
    """Optional case metadata; unknown keys are kept (``extra``)."""

    model_config = ConfigDict(extra="allow")

    specialty: str | None = None
    title: str | None = None
    synthetic: bool = False


class Scenario(BaseModel):
    """One runnable MedSP1000 scenario: four role packets, its frozen rubric and metadata."""

    case_id: str
    scenario: str
    path: str
    examinee: RolePacket
    sp_actor: RolePacket
    environment_controller: RolePacket
    evaluator: RolePacket
    rubric: Rubric
    rubric_path: str
    meta: CaseMeta = Field(default_factory=CaseMeta)

    @property
    def key(self) -> str:
        return f"{self.case_id}/{self.scenario}"

    def packet(self, role: str) -> RolePacket:
        if role not in ROLES:
            raise ValueError(f"unknown role packet {role!r}; roles are {list(ROLES)}")
        return getattr(self, role)


class ScenarioSet(BaseModel):
    root: str
    rubric_folder: str | None = None
    scenarios: list[Scenario] = Field(default_factory=list)
    unusable: list[Unusable] = Field(default_factory=list)
    rubric_items_empty: list[str] = Field(default_factory=list)  # scenarios whose rubric has no item
    unused_rubrics: int = 0  # rubrics of the separate folder with no scenario here (normal for a subset)


def _read_text_file(path: Path, record: str, field: str) -> tuple[str | None, Unusable | None]:
    try:
        data = path.read_bytes()
    except OSError as ex:
        return None, Unusable(path=str(path), record=record, field=field, reason=f"cannot read: {ex}")
    if not data.strip():
        return None, Unusable(path=str(path), record=record, field=field, reason=f"empty file ({len(data)} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as ex:
        return None, Unusable(path=str(path), record=record, field=field, reason=f"not UTF-8 text ({ex.reason})")
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            json.loads(text)
        elif suffix in (".yaml", ".yml"):
            yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as ex:
        kind = "JSON" if suffix == ".json" else "YAML"
        return None, Unusable(path=str(path), record=record, field=field, reason=f"not valid {kind}: {str(ex).splitlines()[0]}")
    return text, None


def read_packet(folder: Path, role: str, record: str) -> tuple[RolePacket | None, list[Unusable]]:
    if not folder.is_dir():
        return None, [Unusable(path=str(folder), record=record, field=role, reason="role folder is missing")]
    files: list[PacketFile] = []
    skipped: list[str] = []
    problems: list[Unusable] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        if path.suffix.lower() not in TEXT_SUFFIXES or path.name.startswith("."):
            skipped.append(name)
            continue
        text, problem = _read_text_file(path, record, f"{role}/{name}")
        if problem:
            problems.append(problem)
        else:
            files.append(PacketFile(name=name, text=text or ""))
    if problems:
        return None, problems
    if not files:
        reason = "no text file (.md/.txt/.json/.yaml)" + (f"; skipped {skipped}" if skipped else "")
        return None, [Unusable(path=str(folder), record=record, field=role, reason=reason)]
    return RolePacket(role=role, files=files, skipped=skipped), []


def _read_meta_file(folder: Path, record: str) -> tuple[dict[str, Any], list[Unusable]]:
    for name in METADATA_NAMES:
        path = folder / name
        if not path.is_file():
            continue
        text, problem = _read_text_file(path, record, "metadata")
        if problem:
            return {}, [problem]
        raw = json.loads(text or "") if name.endswith(".json") else yaml.safe_load(text or "")
        if not isinstance(raw, dict):
            return {}, [Unusable(path=str(path), record=record, field="metadata", reason="expected a mapping")]
        return raw, []
    return {}, []


def _rubric_candidates(root: Path, case_dir: Path, scen_dir: Path, rubric_folder: Path | None) -> list[Path]:
    name = f"{case_dir.name}_{scen_dir.name}.json"
    if rubric_folder is not None:
        return [rubric_folder / name]
    return [scen_dir / name, case_dir / name, root / name]


def scenario_dirs(root: Path) -> Iterable[tuple[Path, Path]]:
    """(case folder, scenario folder) pairs under ``root``, sorted."""
    for case_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for scen_dir in sorted(p for p in case_dir.iterdir() if p.is_dir() and SCENARIO_DIR.match(p.name)):
            yield case_dir, scen_dir


def load_scenarios(root: str | Path, rubrics: str | Path | None = None) -> ScenarioSet:
    """Read every ``<root>/<case_id>/<scenarioN>/`` scenario with its four packets and rubric.

    Scenarios that cannot be used are returned in ``unusable`` (file, record, field, reason), never
    dropped silently. Raises :class:`MedSPError` only when ``root`` (or ``rubrics``) is not a
    folder or holds no scenario folder at all."""
    root = Path(root)
    if not root.is_dir():
        raise MedSPError(f"{root}: no such MedSP data folder")
    rubric_folder = Path(rubrics) if rubrics else None
    rubric_set = load_rubrics(rubric_folder) if rubric_folder is not None else None
    result = ScenarioSet(root=str(root), rubric_folder=str(rubric_folder) if rubric_folder else None)
    if rubric_set is not None:
        result.unusable.extend(rubric_set.unusable)
    pairs = list(scenario_dirs(root))
    if not pairs:
        raise MedSPError(
            f"{root}: no scenario folders found; expected <root>/<case_id>/<scenarioN>/"
            f"{{{','.join(ROLES)}}}/ (paper Section 4 layout)"
        )
    used_rubrics: set[str] = set()
    for case_dir, scen_dir in pairs:
        record = f"{case_dir.name}/{scen_dir.name}"
        problems: list[Unusable] = []
        packets: dict[str, RolePacket] = {}
        for role in ROLES:
            packet, found = read_packet(scen_dir / role, role, record)
            problems.extend(found)
            if packet is not None:
                packets[role] = packet
        # rubric
        rubric: Rubric | None = None
        rubric_path: Path | None = None
        if rubric_set is not None:
            rubric_path = rubric_folder / f"{case_dir.name}_{scen_dir.name}.json"  # type: ignore[operator]
            rubric = rubric_set.rubrics.get(record)
            # an unreadable rubric file is already reported (with every unusable file of the folder)
            if rubric is None and not any(u.record == record for u in rubric_set.unusable):
                problems.append(Unusable(path=str(rubric_path), record=record, field="rubric", reason="no rubric file for this scenario"))
        else:
            rubric_path = next((p for p in _rubric_candidates(root, case_dir, scen_dir, None) if p.is_file()), None)
            if rubric_path is None:
                problems.append(
                    Unusable(path=str(scen_dir), record=record, field="rubric",
                             reason=f"no rubric {case_dir.name}_{scen_dir.name}.json in the scenario, case or root folder "
                                    "(pass rubrics=<folder> for a separate rubric folder)")
                )  # fmt: skip
            else:
                rubric, found = read_rubric(rubric_path)
                problems.extend(found)
        used_rubrics.add(record)
        # metadata: case level, refined by scenario level
        case_meta, found = _read_meta_file(case_dir, record)
        problems.extend(found)
        scen_meta, found = _read_meta_file(scen_dir, record)
        problems.extend(found)
        meta: CaseMeta | None = None
        try:
            meta = CaseMeta.model_validate({**case_meta, **scen_meta})
        except ValidationError as ex:
            problems.extend(_pydantic_problems(case_dir / "metadata.json", record, ex))
        if problems or rubric is None or meta is None or len(packets) != len(ROLES):
            result.unusable.extend(problems)
            continue
        if rubric.n_items == 0:
            result.rubric_items_empty.append(record)
        result.scenarios.append(
            Scenario(
                case_id=case_dir.name,
                scenario=scen_dir.name,
                path=str(scen_dir),
                rubric=rubric,
                rubric_path=str(rubric_path),
                meta=meta,
                **packets,
            )
        )
    if rubric_set is not None:
        result.unused_rubrics = len(set(rubric_set.rubrics) - used_rubrics)
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
