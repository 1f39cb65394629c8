"""A corpus of simulated-patient turns, each labelled with the error it shows or as realistic.

Written from the literature on simulated-patient failures, not from bedside's rules, so that the rules'
recall is measured on wordings they were not written from: tau2-bench's user-simulator guidelines and error
analysis, PatientSim's persona axes, CPB-Bench's four patient behaviours (realistic in a patient, so its
self-diagnosis and care resistance are hard negatives here), DischargeBench's Virtual Patient prompt,
traits and Education Monitor failure categories (Appendix A), MedSP1000's patient packets. Each item says
which it was written from (``source``).

``cases.yaml``     the patient's materials and persona each turn is checked against (invented cases in the
                   shape of DischargeBench, MedSP1000 and CPB-Bench data)
``dev.yaml``       half of the items, for improving the rules
``held_out.yaml``  the other half, for measuring them

An item: ``id``, ``kind`` (one of :data:`KINDS` or ``realistic``), ``case``, ``source``, optional ``voice``
(how a realistic turn speaks), optional ``history`` (``[speaker, text]`` turns before the clinician's),
``clinician`` (the turn the patient answers), ``patient`` (the turn that is checked), optional ``after``
(turns that followed it). The halves are a seeded split of every kind (:func:`assign_splits`);

    python -m tests.corpus.simulator_errors            # counts per kind and split
    python -m tests.corpus.simulator_errors --resplit  # deal the union again into dev.yaml / held_out.yaml
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
KINDS = ("unsupported_fact", "persona_break", "role_reversal", "early_end")
REALISTIC = "realistic"
LABELS = (*KINDS, REALISTIC)
SPLITS = ("dev", "held_out")
SPLIT_SEED = 20261207
SPEAKERS = ("clinician", "patient")
FIELDS = ("id", "kind", "case", "source", "voice", "history", "clinician", "patient", "after")


@dataclass(frozen=True)
class Item:
    id: str
    kind: str
    case: str
    source: str
    clinician: str
    patient: str
    history: tuple[tuple[str, str], ...] = ()
    after: tuple[tuple[str, str], ...] = ()
    voice: str = ""


def cases() -> dict[str, dict[str, Any]]:
    """The cases by id: ``benchmark`` (discharge, medsp or cpb), ``materials`` and (DischargeBench) ``persona``."""
    return yaml.safe_load((HERE / "cases.yaml").read_text(encoding="utf-8"))


def _turns(path: Path, record: str, field: str, raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list) or not all(
        isinstance(t, list) and len(t) == 2 and t[0] in SPEAKERS and isinstance(t[1], str) for t in raw
    ):
        raise ValueError(f"{path.name}: item {record}: field {field}: not a list of [clinician|patient, text]")
    return tuple((t[0], t[1]) for t in raw)


def _item(path: Path, raw: dict[str, Any], known_cases: set[str]) -> Item:
    record = str(raw.get("id", "?"))
    unknown = set(raw) - set(FIELDS)
    if unknown:
        raise ValueError(f"{path.name}: item {record}: field {sorted(unknown)[0]}: not a field of an item")
    for field in ("id", "kind", "case", "source", "clinician", "patient"):
        if not isinstance(raw.get(field), str):
            raise ValueError(f"{path.name}: item {record}: field {field}: missing or not text")
    if raw["kind"] not in LABELS:
        raise ValueError(f"{path.name}: item {record}: field kind: {raw['kind']!r} is not one of {LABELS}")
    if raw["case"] not in known_cases:
        raise ValueError(f"{path.name}: item {record}: field case: {raw['case']!r} is not in cases.yaml")
    return Item(
        id=raw["id"],
        kind=raw["kind"],
        case=raw["case"],
        source=raw["source"],
        clinician=raw["clinician"],
        patient=raw["patient"],
        history=_turns(path, record, "history", raw.get("history", [])),
        after=_turns(path, record, "after", raw.get("after", [])),
        voice=str(raw.get("voice", "")),
    )


def load(split: str) -> list[Item]:
    """The items of one split (``dev`` or ``held_out``)."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {SPLITS}")
    path = HERE / f"{split}.yaml"
    known = set(cases())
    return [_item(path, raw, known) for raw in yaml.safe_load(path.read_text(encoding="utf-8"))]


def assign_splits(ids_by_label: dict[str, list[str]], seed: int = SPLIT_SEED) -> dict[str, str]:
    """Each id's split: per label, the ids in sorted order shuffled by ``seed``, the first half ``dev``."""
    assignment: dict[str, str] = {}
    for label in sorted(ids_by_label):
        ids = sorted(ids_by_label[label])
        random.Random(f"{seed}:{label}").shuffle(ids)
        half = (len(ids) + 1) // 2
        assignment.update({i: "dev" for i in ids[:half]})
        assignment.update({i: "held_out" for i in ids[half:]})
    return assignment


def _raw(item: Item) -> dict[str, Any]:
    out: dict[str, Any] = {"id": item.id, "kind": item.kind, "case": item.case, "source": item.source}
    if item.voice:
        out["voice"] = item.voice
    if item.history:
        out["history"] = [list(t) for t in item.history]
    out["clinician"] = item.clinician
    out["patient"] = item.patient
    if item.after:
        out["after"] = [list(t) for t in item.after]
    return out


HEADER = (
    "# {split} half of the simulated-patient corpus (tests/corpus/simulator_errors/__init__.py says what an item is;\n"
    "# `python -m tests.corpus.simulator_errors --resplit` deals the union of both halves again, seeded).\n"
)


def write_splits(items: list[Item]) -> None:
    """Deal ``items`` into dev.yaml and held_out.yaml by :func:`assign_splits`."""
    by_label: dict[str, list[str]] = {}
    for item in items:
        by_label.setdefault(item.kind, []).append(item.id)
    assignment = assign_splits(by_label)
    order = {label: i for i, label in enumerate(LABELS)}
    for split in SPLITS:
        chosen = sorted((i for i in items if assignment[i.id] == split), key=lambda i: (order[i.kind], i.id))
        text = yaml.safe_dump([_raw(i) for i in chosen], allow_unicode=True, sort_keys=False, width=110)
        (HERE / f"{split}.yaml").write_text(HEADER.format(split=split) + text, encoding="utf-8")


def counts() -> dict[str, dict[str, int]]:
    """Items per split and label."""
    return {split: {label: sum(i.kind == label for i in load(split)) for label in LABELS} for split in SPLITS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.simulator_errors", description=__doc__.split("\n")[0])
    parser.add_argument("--resplit", action="store_true", help="deal the union of both halves again (seeded)")
    args = parser.parse_args(argv)
    if args.resplit:
        write_splits([i for split in SPLITS for i in load(split)])
    for split, row in counts().items():
        print(split, " ".join(f"{label}={n}" for label, n in row.items()), f"total={sum(row.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
