"""MedSP1000 scenarios: the four role packets of a scenario, its rubric and metadata, and the loader
(:func:`load_scenarios`). The layout and the loader contract are in :mod:`bedside.medsp.records`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bedside.medsp.rubric import (
    MedSPError,
    Rubric,
    Unusable,
    _not_utf8,
    _pydantic_problems,
    load_rubrics,
    read_rubric,
)

#: The four role packets (paper Section 4), as folder names of the official layout.
ROLES: tuple[str, ...] = ("examinee", "sp_actor", "environment_controller", "evaluator")
#: Other folder names the official loader accepts for each role (``case_loader.ROLE_DIR_ALIASES``).
ROLE_ALIASES: dict[str, tuple[str, ...]] = {
    "examinee": ("examinee", "受试者"),
    "sp_actor": ("sp_actor", "SP", "sp"),
    "environment_controller": ("environment_controller", "environment", "环境控制"),
    "evaluator": ("evaluator", "评估者"),
}
TEXT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".txt", ".json", ".yaml", ".yml", ".csv", ".html", ".xml")
LAYOUT = f"<root>/<case_id>/<scenarioN>/{{{','.join(ROLES)}}}/"
SCENARIO_DIR = re.compile(r"^scenario\d+$")
METADATA_NAMES: tuple[str, ...] = ("metadata.json", "metadata.yaml", "metadata.yml")


# ---------------------------------------------------------------------------------------------
# scenarios


STRIKETHROUGH = re.compile(r"~~.*?~~", re.DOTALL)
ORPHAN_MARKER = re.compile(r"#{1,6}|[-*+]|\d+\.")


def normalise_packet_text(text: str) -> str:
    """A packet file's text as the official code shows it to an agent (``sim_types``
    ``strip_markdown_strikethrough``): struck-through Markdown (``~~text~~``, non-greedy, also across
    lines) removed; leading blank lines dropped and runs of blank lines collapsed to one; lines left
    holding only a heading, bullet or number marker (``##``, ``-``, ``3.``) dropped; trailing spaces of
    each line removed. No other normalisation (no Unicode or inner-whitespace changes)."""
    lines: list[str] = []
    blank = False
    for line in STRIKETHROUGH.sub("", text).splitlines():
        stripped = line.strip()
        if not stripped:
            blank = bool(lines)
            continue
        if ORPHAN_MARKER.fullmatch(stripped):
            continue
        if blank:
            lines.append("")
            blank = False
        lines.append(line.rstrip())
    return "\n".join(lines).strip()


class PacketFile(BaseModel):
    name: str  # path relative to the role folder
    text: str  # as read (raw); agents see it normalised (RolePacket.text)


class RolePacket(BaseModel):
    """The text files of one role folder."""

    role: str
    files: list[PacketFile]
    skipped: list[str] = Field(default_factory=list)  # non-text files, not shown to any agent
    folder: str = ""  # the folder's name (an official alternative name such as ``SP`` when used)

    def compiled_text(self, strip_strikethrough: bool = True) -> str:
        """All files in path order, each as ``## <file name>`` (the name only, not its folder), a
        blank line and its text (:func:`normalise_packet_text` unless ``strip_strikethrough`` is
        false), as the official ``RoleBundle.compiled_text`` assembles a packet."""
        chunks = []
        for f in self.files:
            content = f.text.strip()
            if strip_strikethrough:
                content = normalise_packet_text(content)
            chunks.append(f"## {Path(f.name).name}\n\n{content}\n")
        return "\n".join(chunks).strip()

    def text(self) -> str:
        """What the role's agent reads: :meth:`compiled_text` with the normalisation."""
        return self.compiled_text(strip_strikethrough=True)


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
        return None, Unusable(path=str(path), record=record, field=field, reason=_not_utf8(data, ex))
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            json.loads(text)
        elif suffix in (".yaml", ".yml"):
            yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as ex:
        kind = "JSON" if suffix == ".json" else "YAML"
        return None, Unusable(
            path=str(path), record=record, field=field, reason=f"not valid {kind}: {str(ex).splitlines()[0]}"
        )
    return text, None


def role_folder(scen_dir: Path, role: str) -> Path | None:
    """The folder of ``role`` in a scenario folder, under its own or an official alternative name."""
    return next((scen_dir / name for name in ROLE_ALIASES[role] if (scen_dir / name).is_dir()), None)


def read_packet(
    folder: Path | None, role: str, record: str, scen_dir: Path | None = None
) -> tuple[RolePacket | None, list[Unusable]]:
    if folder is None or not folder.is_dir():
        where = scen_dir if scen_dir is not None else folder
        names = " or ".join(f"{n}/" for n in ROLE_ALIASES[role])
        return None, [
            Unusable(
                path=str(where),
                record=record,
                field=role,
                reason=f"role folder is missing: expected {names} in this scenario folder ({LAYOUT})",
            )
        ]
    files: list[PacketFile] = []
    skipped: list[str] = []
    problems: list[Unusable] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        name = rel.as_posix()
        if any(part.startswith(".") for part in rel.parts):
            continue  # hidden files and folders are ignored, as by the official loader
        if path.suffix and path.suffix.lower() not in TEXT_SUFFIXES:
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
        reason = f"no text file ({'/'.join(TEXT_SUFFIXES)} or no suffix)" + (f"; skipped {skipped}" if skipped else "")
        return None, [Unusable(path=str(folder), record=record, field=role, reason=reason)]
    return RolePacket(role=role, files=files, skipped=skipped, folder=folder.name), []


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


def _visible_dirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _looks_like_scenario(folder: Path) -> bool:
    return any(role_folder(folder, role) is not None for role in ROLES)


def scenario_dirs(root: Path) -> Iterable[tuple[Path, Path]]:
    """(case folder, scenario folder) pairs under ``root``, sorted."""
    for case_dir in _visible_dirs(root):
        for scen_dir in _visible_dirs(case_dir):
            if SCENARIO_DIR.match(scen_dir.name):
                yield case_dir, scen_dir


def layout_problems(root: Path) -> list[Unusable]:
    """Folders under ``root`` that do not follow the layout ``<root>/<case_id>/<scenarioN>/<role>/``,
    each named with what is wrong (scenario folders with a missing role folder are reported by
    :func:`load_scenarios`). Hidden folders (``.git``, ...) are ignored."""
    problems: list[Unusable] = []
    for case_dir in _visible_dirs(root):
        subdirs = _visible_dirs(case_dir)
        scenarios = [d for d in subdirs if SCENARIO_DIR.match(d.name)]
        if not scenarios:
            if _looks_like_scenario(case_dir):
                hint = (
                    f"it holds role folders itself, so it looks like a scenario folder: pass the folder two "
                    f"levels above it as data ({LAYOUT})"
                )
            elif any(SCENARIO_DIR.match(d.name) for d in _visible_dirs(root)) or _looks_like_scenario(root):
                hint = f"the data folder itself looks like a case or scenario folder: pass its parent ({LAYOUT})"
            else:
                found = ", ".join(d.name + "/" for d in subdirs[:5]) or "no sub-folder"
                hint = f"it holds {found}; expected one <scenarioN>/ folder per scenario ({LAYOUT})"
            problems.append(
                Unusable(
                    path=str(case_dir),
                    record=case_dir.name,
                    field="layout",
                    reason=f"case folder without any scenarioN folder: {hint}",
                )
            )
            continue
        for other in subdirs:
            if not SCENARIO_DIR.match(other.name):
                problems.append(
                    Unusable(
                        path=str(other),
                        record=f"{case_dir.name}/{other.name}",
                        field="layout",
                        reason=f"folder name is not scenarioN (scenario1, scenario2, ...): not loaded ({LAYOUT})",
                    )
                )
    return problems


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
    layout = layout_problems(root)
    if not pairs:
        listed = "".join(f"\n  {u}" for u in layout[:20])
        raise MedSPError(f"{root}: no scenario folders found; expected {LAYOUT} (paper Section 4 layout){listed}")
    result.unusable.extend(layout)
    used_rubrics: set[str] = set()
    for case_dir, scen_dir in pairs:
        record = f"{case_dir.name}/{scen_dir.name}"
        problems: list[Unusable] = []
        packets: dict[str, RolePacket] = {}
        for role in ROLES:
            packet, found = read_packet(role_folder(scen_dir, role), role, record, scen_dir)
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
                problems.append(
                    Unusable(
                        path=str(rubric_path), record=record, field="rubric", reason="no rubric file for this scenario"
                    )
                )
        else:
            rubric_path = next((p for p in _rubric_candidates(root, case_dir, scen_dir, None) if p.is_file()), None)
            if rubric_path is None:
                problems.append(
                    Unusable(
                        path=str(scen_dir),
                        record=record,
                        field="rubric",
                        reason=f"no rubric {case_dir.name}_{scen_dir.name}.json in the scenario, case or root folder "
                        "(pass rubrics=<folder> for a separate rubric folder)",
                    )
                )
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
