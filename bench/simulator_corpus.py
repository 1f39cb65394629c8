"""Recall and false alarms of the simulator rules on the bedside corpus of simulated-patient turns
(``tests/corpus/simulator_errors``): errors and realistic turns written from the literature on simulated-patient
failures, not from the rules, each checked in a transcript of its own (the turns before it, the clinician's turn
it answers, the patient turn, the turns after it) against its case's materials and persona, as the benchmark's
``simulator_check`` builds them.

- recall of a kind: the turns of that kind that the rules flag with that kind at that turn (a persona break of
  the whole transcript, its reading level, counts: the transcript is the item's), over the turns of the kind;
- false alarms: the realistic turns flagged (at the turn, or the transcript's reading level), any kind and by kind,
  over the realistic turns.

Each rate has its n and a 95 % Wilson interval, for each half of the corpus (``dev``: the one the rules may be
improved on; ``held_out``: the one that measures them). ``--write`` keeps both halves' counts, the date and the
rules' commit in :data:`RECORD`, which the report's simulator section states (``tests/test_simulator_corpus.py``
checks it against a fresh measurement).

    .venv/bin/python -m bench.simulator_corpus [--split dev|held_out|both] [--misses] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from statsmodels.stats.proportion import proportion_confint

from bedside.discharge import PERSONA_AXES
from bedside.discharge.simulator import READING_CEILING
from bedside.prompts import load_yaml
from bedside.reporting.simulator import CORPUS_RECORD as RECORD
from bedside.simulator_checks import (
    KINDS,
    Finding,
    PatientTranscript,
    SpokenTurn,
    early_farewell,
    rule_findings,
    writing_system,
)
from tests.corpus.simulator_errors import REALISTIC, SPLITS, Item, cases, load

#: the corpus's persona fields, by DischargeBench's persona axis
PERSONA_FIELDS = dict(zip(PERSONA_AXES, ("personality", "education", "health_literacy", "recall"), strict=True))
#: each benchmark's role names: the patient's and the clinician's
ROLES = {"discharge": ("patient", "educator"), "medsp": ("patient", "examinee"), "cpb": ("patient", "doctor")}


def _axis_value(text: str) -> str:
    return text.replace(" ", "_")


def transcript(item: Item, case: dict[str, Any]) -> tuple[PatientTranscript, int]:
    """The item's transcript as its benchmark's check builds it, and the index of the checked patient turn."""
    benchmark, materials = case["benchmark"], case["materials"]
    patient, clinician = ROLES[benchmark]
    role = {"patient": patient, "clinician": clinician}
    spoken = [*item.history, ("clinician", item.clinician), ("patient", item.patient), *item.after]
    turns = tuple(SpokenTurn(i, role[speaker], text) for i, (speaker, text) in enumerate(spoken))
    checked = len(item.history) + 1
    if benchmark == "discharge":
        persona = {axis: _axis_value(case["persona"][name]) for axis, name in PERSONA_FIELDS.items()}
        descriptions = load_yaml("discharge/personas.yaml")
        script = {
            "demographics": f"Age {materials['age']}, {materials['gender']}",
            **{part: str(materials[part]) for part in materials if part not in ("age", "gender")},
            "persona": "\n".join(descriptions[axis][value]["description"] for axis, value in persona.items()),
        }
        view = PatientTranscript(
            script=script,
            turns=turns,
            persona=persona,
            reading_ceiling=READING_CEILING[persona["education_level"]],
            recall_limited=("medication", "medical_history") if persona["recall_level"] == "poor" else (),
            early_end=early_farewell(turns),
        )
    elif benchmark == "medsp":
        view = PatientTranscript(
            script={"sp_script": materials["script"]},
            turns=turns,
            persona={"specialty": materials["specialty"]},
            empty_allowed=True,
            early_end=early_farewell(turns),
        )
    else:
        view = PatientTranscript(
            script={"original_consultation": materials["consultation"]},
            turns=turns,
            persona={"category": materials["category"], "language": materials["language"]},
            writing_system=writing_system(materials["consultation"]),
            early_end=early_farewell(turns),
        )
    return view, checked


def findings_at(item: Item, case: dict[str, Any]) -> list[Finding]:
    """The rules' findings at the item's patient turn, and those of its whole transcript."""
    view, checked = transcript(item, case)
    found, _, _ = rule_findings(view)
    return [f for f in found if f.turn in (checked, None)]


@dataclass(frozen=True)
class Rate:
    """k of n, with its 95 % Wilson interval."""

    k: int
    n: int

    @property
    def interval(self) -> tuple[float, float]:
        low, high = proportion_confint(self.k, self.n, alpha=0.05, method="wilson")
        return float(low), float(high)

    def __str__(self) -> str:
        low, high = self.interval
        return f"{self.k}/{self.n} = {self.k / self.n:.2f} [{low:.2f}, {high:.2f}]"


@dataclass(frozen=True)
class Measurement:
    """One split: recall per kind, false alarms on the realistic turns (any kind and per kind), the misses."""

    split: str
    recall: dict[str, Rate]
    false_alarms: Rate
    false_alarms_by_kind: dict[str, Rate]
    misses: dict[str, list[str]]
    alarms: list[tuple[str, str]]


def measure(split: str) -> Measurement:
    """Run the rules on every item of ``split``."""
    by_case = cases()
    items = load(split)
    found = {item.id: {f.kind for f in findings_at(item, by_case[item.case])} for item in items}
    recall, misses = {}, {}
    for kind in KINDS:
        of_kind = [i for i in items if i.kind == kind]
        recall[kind] = Rate(sum(kind in found[i.id] for i in of_kind), len(of_kind))
        misses[kind] = [i.id for i in of_kind if kind not in found[i.id]]
    clean = [i for i in items if i.kind == REALISTIC]
    return Measurement(
        split=split,
        recall=recall,
        false_alarms=Rate(sum(bool(found[i.id]) for i in clean), len(clean)),
        false_alarms_by_kind={k: Rate(sum(k in found[i.id] for i in clean), len(clean)) for k in KINDS},
        misses=misses,
        alarms=[(i.id, kind) for i in clean for kind in sorted(found[i.id])],
    )


def table(measurements: Iterable[Measurement]) -> str:
    """A markdown table: per split, each kind's recall and false alarms, then any kind's false alarms."""
    rows = ["| split | kind | recall (flagged / errors of the kind) | false alarms (realistic turns flagged) |"]
    rows.append("|---|---|---|---|")
    for m in measurements:
        for kind in KINDS:
            rows.append(f"| {m.split} | `{kind}` | {m.recall[kind]} | {m.false_alarms_by_kind[kind]} |")
        rows.append(f"| {m.split} | any kind | | {m.false_alarms} |")
    return "\n".join(rows)


def counts(m: Measurement) -> dict[str, Any]:
    """A split's counts as :data:`RECORD` keeps them: recall and false alarms per kind, false alarms of any kind."""
    return {
        "recall": {kind: {"k": r.k, "n": r.n} for kind, r in m.recall.items()},
        "false_alarms": {kind: {"k": r.k, "n": r.n} for kind, r in m.false_alarms_by_kind.items()},
        "false_alarms_any": {"k": m.false_alarms.k, "n": m.false_alarms.n},
    }


def write(measurements: list[Measurement]) -> None:
    """Keep both halves' counts in :data:`RECORD`, with the date and the commit of the rules measured."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    record = {
        "measured": datetime.date.today().isoformat(),
        "rules_commit": commit.stdout.strip(),
        "command": ".venv/bin/python -m bench.simulator_corpus --write",
        "splits": {m.split: counts(m) for m in measurements},
    }
    header = "# Written by `python -m bench.simulator_corpus --write`; tests/test_simulator_corpus.py checks it.\n"
    RECORD.write_text(header + yaml.safe_dump(record, sort_keys=False), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulator_corpus", description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=[*SPLITS, "both"], default="both")
    parser.add_argument("--misses", action="store_true", help="list the missed errors and the false alarms by id")
    parser.add_argument("--write", action="store_true", help=f"keep both halves' counts in {RECORD.name}")
    args = parser.parse_args(argv)
    if args.write and args.split != "both":
        parser.error("--write measures both halves: leave --split out")
    measurements = [measure(s) for s in (SPLITS if args.split == "both" else (args.split,))]
    print(table(measurements))
    print("(rates: k/n = share [95 % Wilson interval]; rules only, no LLM checker)")
    if args.write:
        write(measurements)
    if args.misses:
        for m in measurements:
            for kind, ids in m.misses.items():
                print(f"{m.split} missed {kind}: {' '.join(ids) or '-'}")
            print(f"{m.split} false alarms: {' '.join(f'{i}:{k}' for i, k in m.alarms) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
