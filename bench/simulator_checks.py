"""Recall and false alarms of the simulator checks (``simulator_check``) against planted truth: every benchmark's
scripted patient, once faithful and once unfaithful (``patient_plant``: leaks and role reversals planted at
seeded turns, :mod:`bedside.providers.simulator_plants`), scored by the rules only (no LLM checker is bound).

- recall of a planted kind: planted patient turns that the check of its kind flags at that very turn, over the
  planted turns;
- false alarms: patient turns flagged (any kind) that carry no plant, over the unplanted turns; on the faithful
  runs, every flag is one (per turn, and the share of transcripts with any flag); a finding of the whole
  transcript (the reading level) is counted with the flagged transcripts and by kind, not as a turn.

    .venv/bin/python -m bench.simulator_checks [--rate 0.3] [--seed 1] [--discharge 24] [--cpb 40]

CPB-Bench runs need its data in ../shared/data/cpb-bench (skipped without it). One measurement of the rules on
scripted patients whose planted wordings the same authors wrote: an upper bound of their recall on real
patients, not a property of the LLM checker.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai import Task, eval, task_with
from inspect_ai.log import EvalLog
from inspect_ai.model import get_model

from bedside.providers.simulator_plants import FOUND_AS, PLANT_KINDS, planted
from bedside.scorers.simulator import simulator_check

REPO = Path(__file__).resolve().parent.parent
CPB_DATA = REPO.parent / "shared" / "data" / "cpb-bench"


@dataclass
class Tally:
    """Counts over patient turns and transcripts of one benchmark's run."""

    planted: Counter = field(default_factory=Counter)  # kind -> planted turns
    found: Counter = field(default_factory=Counter)  # kind -> planted turns flagged with the kind's check
    clean_turns: int = 0  # turns without a plant
    false_turns: int = 0  # of those, flagged
    false_kinds: Counter = field(default_factory=Counter)  # kind -> false flags
    transcripts: int = 0
    flagged_transcripts: int = 0

    def recall(self, kind: str) -> tuple[int, int]:
        return self.found[kind], self.planted[kind]


def scripted(**options: Any) -> Any:
    return get_model("bedside/scripted", memoize=False, **options)


def tally(log: EvalLog, kinds: list[str], rate: float, seed: int) -> Tally:
    """The log's flags against the truth of :func:`planted` (module docstring)."""
    out = Tally()
    for sample in log.samples or []:
        score = (sample.scores or {}).get("simulator_check")
        if score is None or not score.metadata or not score.metadata.get("patient_turns"):
            continue
        flagged: dict[int | None, set[str]] = {}
        for f in score.metadata["findings"]:
            flagged.setdefault(f["turn"], set()).add(f["kind"])
        out.false_kinds.update(flagged.get(None, set()))
        out.transcripts += 1
        out.flagged_transcripts += bool(flagged)
        for n, index in enumerate(score.metadata["patient_turns"], start=1):
            kind = planted(kinds, [], rate, seed, str(sample.id), n)
            found = flagged.get(index, set())
            if kind is None:
                out.clean_turns += 1
                out.false_turns += bool(found)
                out.false_kinds.update(found)
            else:
                out.planted[kind] += 1
                out.found[kind] += FOUND_AS[kind] in found
    return out


def run(task: Task, benchmark: str, roles: dict[str, Any], patient: dict[str, Any], tmp: Path) -> EvalLog:
    [log] = eval(
        task_with(task, scorer=[simulator_check(benchmark)]),
        model=scripted(**roles.pop("model", {})),
        model_roles={**{r: scripted(**o) for r, o in roles.items()}, "patient": scripted(**patient)},
        log_dir=str(tmp),
        display="none",
        log_realtime=False,
    )
    if log.status != "success":
        raise RuntimeError(f"{benchmark}: {log.error}")
    return log


def runs(args: argparse.Namespace) -> dict[str, Task | None]:
    from bedside.tasks.cpb import cpb
    from bedside.tasks.discharge import discharge
    from bedside.tasks.medsp import medsp

    tasks: dict[str, Task | None] = {"discharge": discharge(), "medsp": medsp()}
    tasks["cpb"] = cpb(data=str(CPB_DATA), turns=4) if CPB_DATA.is_dir() else None
    return tasks


ROLES = {
    "discharge": {"monitor": {}, "grader": {}},
    "medsp": {"environment": {}, "grader": {}},
    "cpb": {"grader": {}, "model": {"doctor_style": "accommodating"}},
}


def measure(
    benchmark: str, task: Task, rate: float, seed: int, tmp: Path, limit: int | None = None
) -> tuple[Tally, Tally]:
    """(faithful run, unfaithful run) of one benchmark."""
    kinds = list(PLANT_KINDS)
    task = task_with(task, dataset=task.dataset[:limit]) if limit else task
    plant = {"patient_plant": kinds, "patient_plant_rate": rate, "patient_plant_seed": seed}
    clean = tally(run(task, benchmark, dict(ROLES[benchmark]), {}, tmp / "clean"), [], rate, seed)
    unfaithful = tally(run(task, benchmark, dict(ROLES[benchmark]), plant, tmp / "plant"), kinds, rate, seed)
    return clean, unfaithful


def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f} %)" if n else "0/0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--discharge", type=int, default=24, help="DischargeBench demo cases")
    parser.add_argument("--cpb", type=int, default=40, help="CPB-Bench cases (of ../shared/data/cpb-bench)")
    args = parser.parse_args(argv)
    limits = {"discharge": args.discharge, "medsp": None, "cpb": args.cpb}
    print(
        "| benchmark | run | transcripts | flagged | "
        + " | ".join(f"recall {k}" for k in PLANT_KINDS)
        + " | false alarms (turns) | false kinds |"
    )
    print("|---|---|---|---|" + "---|" * len(PLANT_KINDS) + "---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, task in runs(args).items():
            if task is None:
                print(f"| {name} | skipped: no data in {CPB_DATA} |")
                continue
            clean, unfaithful = measure(name, task, args.rate, args.seed, Path(tmp) / name, limits[name])
            for label, t in (("faithful", clean), ("unfaithful", unfaithful)):
                recalls = " | ".join(pct(*t.recall(k)) if t.planted[k] else "-" for k in PLANT_KINDS)
                print(
                    f"| {name} | {label} | {t.transcripts} | {t.flagged_transcripts} | {recalls} | "
                    f"{pct(t.false_turns, t.clean_turns)} | {dict(t.false_kinds) or '-'} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
