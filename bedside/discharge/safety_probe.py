"""Crafted educator transcripts for measuring the advice-safety scorer (``discharge_safety_probe``).

``datasets/discharge/safety_probe.jsonl`` (synthetic, written for bedside; no patient data): one JSON
object per line, ``probe_id``, ``case_id`` (a case of the DischargeBench case file, whose note the
transcript is judged against), ``note`` (free text: what was planted) and ``turns``, a list of
``{"role": "educator"|"patient", "message": ..., "planted": <unsafe category>|null}``. ``planted``
marks an educator turn written to be unsafe in that category (``bedside.discharge.protocols.
UNSAFE_CATEGORIES``); every other educator turn is a safe control, consistent with the note.
Bad records are reported with file, line, probe id and field; one bad record rejects the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from inspect_ai.dataset import MemoryDataset
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bedside.discharge.protocols import UNSAFE_CATEGORIES
from bedside.discharge.records import load_cases
from bedside.discharge.samples import DEMO_CASES, case_sample
from bedside.params import SetupError
from bedside.paths import DATASETS_DIR, user_path

PROBES = DATASETS_DIR / "discharge" / "safety_probe.jsonl"


class ProbeTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["educator", "patient"]
    message: str = Field(min_length=1)
    planted: Literal[UNSAFE_CATEGORIES] | None = None  # type: ignore[valid-type]


class ProbeTranscript(BaseModel):
    model_config = ConfigDict(extra="forbid")

    probe_id: str = Field(min_length=1)
    case_id: str = Field(min_length=1)
    note: str = ""
    turns: list[ProbeTurn] = Field(min_length=1)


def load_probes(path: str | Path) -> list[ProbeTranscript]:
    path = Path(path)
    if not path.is_file():
        raise SetupError(f"{path}: no such probe file")
    problems, probes = [], []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as ex:
            problems.append(f"{path}: line {line_no}: not JSON ({ex.msg}, column {ex.colno})")
            continue
        pid = raw.get("probe_id", "?") if isinstance(raw, dict) else "?"
        try:
            probe = ProbeTranscript.model_validate(raw)
        except ValidationError as ex:
            problems += [
                f"{path}: line {line_no} (probe {pid}): {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in ex.errors()
            ]
            continue
        if any(t.planted and t.role != "educator" for t in probe.turns):
            problems.append(f"{path}: line {line_no} (probe {pid}): turns: only educator turns can be planted")
        probes.append(probe)
    if problems:
        raise SetupError("bad safety-probe records:\n" + "\n".join(problems))
    return probes


def probe_file(data: str | None) -> Path:
    """The probe transcripts file of ``-T data`` (unset: the shipped one)."""
    return user_path(data) if data else PROBES


def case_file(cases: str | None) -> Path:
    """The case file of ``-T cases`` the transcripts' notes come from (unset: the shipped demo set)."""
    return user_path(cases) if cases else DEMO_CASES


def safety_probe_dataset(data: str | None = None, cases: str | None = None, seed: int = 0) -> MemoryDataset:
    """One sample per transcript, with its case's note and strata (ICD chapter, persona)."""
    path = probe_file(data)
    by_id = {c.case_id: c for c in load_cases(case_file(cases))}
    samples = []
    for probe in load_probes(path):
        if probe.case_id not in by_id:
            raise SetupError(f"{path}: probe {probe.probe_id}: case_id: {probe.case_id!r} is not in the case file")
        sample = case_sample(by_id[probe.case_id], seed, {})
        sample.id = probe.probe_id
        sample.metadata = {
            **(sample.metadata or {}),
            "probe": probe.model_dump(mode="json"),
            "planted": sorted({t.planted for t in probe.turns if t.planted}),
        }
        samples.append(sample)
    return MemoryDataset(samples, name="discharge_safety_probe", location=str(path))


def turn_outcomes(probe: dict, verdicts: list[dict]) -> list[dict]:
    """Per educator turn: planted category (None for a safe turn) and the judge's category (None = unscored)."""
    by_turn = {v["turn"]: v for v in verdicts}
    out = []
    for i, turn in enumerate(probe["turns"]):
        if turn["role"] == "educator":
            out.append({"turn": i, "planted": turn.get("planted"), "judged": by_turn.get(i, {}).get("category")})
    return out
