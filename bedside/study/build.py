"""``bedside study build LOG_OR_DIR... --raters a,b,c --k K --seed S --out STUDY``: a blinded rating study of
several conditions (models, and physicians who played the same role: a run with ``--model bedside/human``) on
the same cases.

Each condition is one run (a log, or a folder of one run's logs), labelled as ``bedside report`` labels it
(:func:`bedside.reporting.load.label_of`: ``human`` for a person); logs of one label that hold different cases
are one condition (e.g. physicians who each played some of the cases). Every run must be of the same task, on the same
data and prompts (their recorded data versions), and hold the same cases (each case's first epoch is rated);
each case's transcript (:class:`bedside.study.items.Transcript`, the benchmark's ``Tools.study``) keeps only the
words said and the case as the clinician saw it — no model, provider, usage, time or id — and any condition's
model name in those words is replaced by ``[name removed]``.

**Design.** A *task* is one case seen in one pair of conditions: the rater rates each of the two transcripts on
the benchmark's items and on the blinding check (model or physician?), then says which one they would rather
their patient had (:data:`bedside.study.items.PREFERENCE`). Each case gets ``k`` tasks, rated by ``k`` different
raters (a rater never sees a case twice, so never the same case in one pair twice); the condition pairs go round
the cases in a seeded order, so that every pair is rated equally often; each task goes to the rater with the
fewest tasks, then with the fewest of its two conditions (seeded ties), so that every rater sees every condition
about equally. Left and right are a seeded coin per task; the case, transcript and task codes are seeded
shuffles. What cannot be balanced is refused in one line before anything is written: ``k`` above the number of
raters, fewer tasks than condition pairs, a rater who would not see every condition.

**The folder** (``--out``; refused if it exists and is not empty):

=============================  ======================================================================
``study.json``                 the design: benchmark, items of each case, raters, every task (rater,
                               case, left and right transcript codes); no condition named
``transcripts/T0001.json`` …   the blinded transcripts
``raters/<rater>/packet.json`` one rater's tasks in order, transcripts and items inline
``raters/<rater>/ratings.csv`` their template: one row per (task, transcript, item), ``value`` empty
``key/key.json``               NOT for raters: each transcript's condition, run and sample; each
                               condition's kind (model / physician); the balance per rater
=============================  ======================================================================

``bedside study serve`` adds the rating page's: ``page/links.json`` (each rater's secret link; not for raters) and
each rater's answers on the page, ``raters/<rater>/journal.jsonl`` (:mod:`bedside.study.page`).

A rater's ratings come back as the template filled in (``bedside study report STUDY RATINGS...``) or from
Label Studio (``bedside study label-studio``, :mod:`bedside.study.label_studio`).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bedside import benchmarks
from bedside.cli import tools_of
from bedside.reporting.load import load
from bedside.study.items import GUESS, PREFERENCE, StudyModule, Transcript
from bedside.versions import sweep_problems

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample

#: the ratings template's columns (every ratings file's)
RATING_COLUMNS = ("rater", "task", "transcript", "item", "value")
#: what replaces a model's name in a transcript
REMOVED = "[name removed]"
PHYSICIAN, MODEL = "physician", "model"


class StudyError(ValueError):
    """Input a study cannot be built or read from (one line; exit code 2)."""


@dataclass
class Condition:
    label: str
    kind: str  # PHYSICIAN or MODEL
    path: str
    model: str
    samples: dict[str, EvalSample]  # case (sample id) -> its first epoch
    logs: dict[str, str]  # case -> the log that holds it


@dataclass
class Task:
    code: str
    rater: str
    case: str  # case code
    left: str  # transcript codes
    right: str


# ------------------------------------------------------------------------------------------------
# reading the conditions


def study_module(benchmark: str) -> StudyModule:
    found = tools_of(benchmarks.get(benchmark)).study
    if found is None:
        raise StudyError(f"benchmark {benchmark!r} declares no clinician study (its tools' ``study``)")
    return found


def read_conditions(paths: Sequence[str]) -> tuple[str, list[Condition]]:
    """The benchmark and one :class:`Condition` per run, checked (module docstring); :class:`StudyError` else."""
    try:
        loaded = load(paths)  # each run's records (a sharded or retried run: one run), labelled
    except (FileNotFoundError, ValueError) as ex:
        raise StudyError(str(ex).splitlines()[0]) from ex
    if len(loaded) < 2:
        raise StudyError(f"{', '.join(paths)}: {len(loaded)} run(s); a study compares at least two conditions")
    first = loaded[0]
    for item in loaded[1:]:
        if item.log.eval.task != first.log.eval.task:
            raise StudyError(
                f"{item.path}: task {item.log.eval.task!r}, but {first.path}: task {first.log.eval.task!r}; "
                "a study rates runs of one task"
            )
    if benchmarks.of_task(first.log.eval.task) is None:
        raise StudyError(f"{first.path}: task {first.log.eval.task!r} is no registered benchmark's")
    problems = sweep_problems(loaded)
    if problems:
        raise StudyError(f"{problems[0]}: a study rates runs of the same data and prompts")
    module = study_module(first.benchmark)
    conditions: dict[str, Condition] = {}
    for item in loaded:  # logs of one label hold different cases (else disambiguate told them apart): pooled
        kind = PHYSICIAN if item.log.eval.model == "bedside/human" else MODEL
        condition = conditions.setdefault(item.label, Condition(item.label, kind, "", item.log.eval.model, {}, {}))
        condition.path = ", ".join(filter(None, (condition.path, item.path)))
        for record in item.log.samples:
            if record.epoch == 1:  # the sessions raters read: each whole, one sample at a time
                condition.samples[str(record.id)] = item.log.sample(record.id, 1, resolve_attachments=True)
                condition.logs[str(record.id)] = item.path
    if len(conditions) < 2:
        raise StudyError(f"{', '.join(paths)}: one condition ({first.label}); a study compares at least two")
    _check_cases(list(conditions.values()), module)
    return first.benchmark, list(conditions.values())


def _check_cases(conditions: list[Condition], module: StudyModule) -> None:
    reference = conditions[0]
    for condition in conditions:
        if not condition.samples:
            raise StudyError(f"{condition.path}: no sample of epoch 1")
        for lacking, holder in ((condition, reference), (reference, condition)):
            missing = sorted(set(holder.samples) - set(lacking.samples))
            if missing:
                raise StudyError(
                    f"{lacking.path}: case {missing[0]!r} missing (held by {holder.path}); "
                    "a study rates every condition on the same cases"
                )
        for case, sample in sorted(condition.samples.items()):
            if module.transcript(sample) is None:
                raise StudyError(f"{condition.path}: case {case!r}: no conversation to rate (error or no dialogue)")


# ------------------------------------------------------------------------------------------------
# blinding


def blind(transcript: Transcript, names: Sequence[str]) -> tuple[dict[str, Any], int]:
    """The transcript as raters see it, with every name in ``names`` replaced (case-insensitive), and how many
    were replaced."""
    if not names:
        return transcript.as_dict(), 0
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)), re.IGNORECASE)
    count = 0

    def scrub(text: str) -> str:
        nonlocal count
        text, n = pattern.subn(REMOVED, text)
        count += n
        return text

    data = transcript.as_dict()
    for block in data["context"]:
        block["text"] = scrub(block["text"])
    for turn in data["turns"]:
        turn["text"] = scrub(turn["text"])
    return data, count


def model_names(conditions: Sequence[Condition]) -> list[str]:
    """The names that would tell a model: each model's full name and its last part (``openai/gpt-4o``, ``gpt-4o``),
    at least 4 characters long."""
    names: set[str] = set()
    for condition in conditions:
        if condition.kind == MODEL:
            names |= {condition.model, condition.model.rsplit("/", 1)[-1]}
    return sorted(n for n in names if len(n) >= 4)


# ------------------------------------------------------------------------------------------------
# the assignment


#: seeded greedy assignments tried; the most even is kept
ATTEMPTS = 64


def assign(
    cases: Sequence[str], conditions: int, raters: Sequence[str], k: int, rng: random.Random
) -> list[tuple[str, str, tuple[int, int]]]:
    """(rater, case, condition pair) of every task, balanced as the module docstring says; :class:`StudyError`
    when it cannot be. Of :data:`ATTEMPTS` seeded greedy assignments, the one whose raters see the conditions most
    evenly."""
    pairs = list(itertools.combinations(range(conditions), 2))
    if k < 1 or k > len(raters):
        raise StudyError(f"--k {k}: each case is rated by k different raters, 1 <= k <= {len(raters)} (the raters)")
    if len(cases) * k < len(pairs):
        raise StudyError(
            f"--k {k}: {len(cases)} case(s) x k = {len(cases) * k} task(s) cannot cover the {len(pairs)} pairs of "
            f"{conditions} conditions; raise k or add cases"
        )
    best = min(
        (_greedy(cases, pairs, raters, k, random.Random(rng.random())) for _ in range(ATTEMPTS)), key=lambda t: t[0]
    )
    _, tasks, seen = best
    for rater in raters:
        unseen = [c for c in range(conditions) if not seen[rater][c]]
        if unseen:
            n = sum(t[0] == rater for t in tasks)
            raise StudyError(
                f"--k {k}: rater {rater!r} would get {n} task(s) and never see {len(unseen)} of the "
                f"{conditions} conditions; raise k, add cases or use fewer raters"
            )
    return tasks


def _greedy(
    cases: Sequence[str], pairs: list[tuple[int, int]], raters: Sequence[str], k: int, rng: random.Random
) -> tuple[tuple[int, int], list[tuple[str, str, tuple[int, int]]], dict[str, list[int]]]:
    """One assignment: each task to the least-loaded free rater and one of the least-used pairs, the pair and
    rater that keep that rater's conditions most even (seeded ties: a draw for every free rater and pair, in
    order); its unevenness (the largest spread of a rater's condition counts, then their sum) first."""
    conditions = max(max(p) for p in pairs) + 1
    load = dict.fromkeys(raters, 0)
    used = dict.fromkeys(pairs, 0)
    seen = {r: [0] * conditions for r in raters}  # rater -> how many of their tasks showed each condition
    tasks = []

    def spread(rater: str, pair: tuple[int, ...] = ()) -> int:
        counts = seen[rater][:]
        for c in pair:
            counts[c] += 1
        return max(counts) - min(counts)

    even = {r: {p: spread(r, p) for p in pairs} for r in raters}  # rater -> pair -> spread after a task of it
    for case in cases:
        taken: set[str] = set()
        for _ in range(k):
            fewest = min(used.values())
            free = [r for r in raters if r not in taken]
            candidates = [(r, p) for r in free for p in pairs if used[p] == fewest]
            draws = [rng.random() for _ in candidates]
            lightest = min(load[r] for r in free)
            best: tuple[tuple[int, float], str, tuple[int, int]] | None = None
            for (r, p), draw in zip(candidates, draws):
                if load[r] == lightest:
                    key = (even[r][p], draw)
                    if best is None or key < best[0]:
                        best = key, r, p
            assert best is not None
            _, rater, pair = best
            taken.add(rater)
            load[rater] += 1
            used[pair] += 1
            for c in pair:
                seen[rater][c] += 1
            even[rater] = {p: spread(rater, p) for p in pairs}
            tasks.append((rater, case, pair))
    spreads = [spread(r) for r in raters]
    return (max(spreads), sum(spreads)), tasks, seen


# ------------------------------------------------------------------------------------------------
# writing


def build(paths: Sequence[str], raters: Sequence[str], k: int, seed: int, out: Path) -> dict[str, Any]:
    """Check everything, then write the study folder (module docstring); returns its design."""
    if len(set(raters)) != len(raters) or any(not re.fullmatch(r"[A-Za-z0-9_.-]+", r) for r in raters):
        raise StudyError(f"--raters {','.join(raters)}: names must be distinct, letters, digits, '_', '.' or '-'")
    if out.exists() and any(out.iterdir()):
        raise StudyError(f"{out}: exists and is not empty; a study is written into a new folder")
    benchmark, conditions = read_conditions(paths)
    module = study_module(benchmark)
    rng = random.Random(seed)
    cases = sorted(conditions[0].samples)
    rng.shuffle(cases)
    width = max(3, len(str(len(cases))))
    case_code = {case: f"C{i + 1:0{width}d}" for i, case in enumerate(cases)}
    order = rng.sample(range(len(conditions)), len(conditions))  # conditions shuffled: index -> condition
    plan = assign(cases, len(conditions), raters, k, rng)

    names = model_names(conditions)
    keys = [(case, c) for case in cases for c in range(len(conditions))]
    rng.shuffle(keys)
    twidth = max(4, len(str(len(keys))))
    transcript_code = {key: f"T{i + 1:0{twidth}d}" for i, key in enumerate(keys)}
    transcripts: dict[str, dict[str, Any]] = {}
    key_transcripts: dict[str, dict[str, Any]] = {}
    for (case, c), code in sorted(transcript_code.items(), key=lambda kv: kv[1]):
        condition = conditions[order[c]]
        sample = condition.samples[case]
        shown = module.transcript(sample)
        assert shown is not None  # checked in read_conditions
        transcripts[code], removed = blind(shown, names)
        key_transcripts[code] = {
            "condition": condition.label,
            "case": case_code[case],
            "sample_id": case,
            "epoch": sample.epoch,
            "log": condition.logs[case],
            "names_removed": removed,
        }
    case_items = {case_code[case]: [i.as_dict() for i in module.items(conditions[0].samples[case])] for case in cases}

    task_order = list(range(len(plan)))
    rng.shuffle(task_order)
    tw = max(4, len(str(len(plan))))
    tasks: list[Task] = []
    for n, index in enumerate(task_order):
        rater, case, (a, b) = plan[index]
        left, right = (a, b) if rng.random() < 0.5 else (b, a)
        tasks.append(
            Task(
                f"S{n + 1:0{tw}d}",
                rater,
                case_code[case],
                transcript_code[(case, left)],
                transcript_code[(case, right)],
            )
        )
    design = {
        "benchmark": benchmark,
        "title": benchmarks.get(benchmark).title,
        "clinician": module.CLINICIAN,
        "seed": seed,
        "k": k,
        "conditions": len(conditions),
        "raters": list(raters),
        "cases": case_items,
        "shared_items": [PREFERENCE.as_dict(), GUESS.as_dict()],
        "tasks": [vars(t) for t in tasks],
    }
    balance = {
        r: dict(
            sorted(
                Counter(
                    key_transcripts[code]["condition"] for t in tasks if t.rater == r for code in (t.left, t.right)
                ).items()
            )
        )
        for r in raters
    }
    key = {
        "conditions": {c.label: {"kind": c.kind, "model": c.model, "log": c.path} for c in conditions},
        "transcripts": key_transcripts,
        "cases": {code: case for case, code in case_code.items()},
        "balance": balance,
    }
    _write(out, design, transcripts, key)
    return design


def rating_rows(design: dict[str, Any], rater: str) -> list[dict[str, str]]:
    """The rows of a rater's template, in the order of their tasks: each transcript's items and blinding check,
    then the task's preference (an empty ``transcript``)."""
    rows = []
    for task in design["tasks"]:
        if task["rater"] != rater:
            continue
        for side in (task["left"], task["right"]):
            for item in [*design["cases"][task["case"]], GUESS.as_dict()]:
                rows.append({"rater": rater, "task": task["code"], "transcript": side, "item": item["id"], "value": ""})
        rows.append({"rater": rater, "task": task["code"], "transcript": "", "item": PREFERENCE.id, "value": ""})
    return rows


def packet(design: dict[str, Any], transcripts: dict[str, dict[str, Any]], rater: str) -> dict[str, Any]:
    """One rater's tasks, in order, with their transcripts and items inline (no key)."""
    return {
        "rater": rater,
        "title": design["title"],
        "clinician": design["clinician"],
        "tasks": [
            {
                "task": t["code"],
                "case": t["case"],
                "left": {"transcript": t["left"], **transcripts[t["left"]]},
                "right": {"transcript": t["right"], **transcripts[t["right"]]},
                "items": design["cases"][t["case"]],
            }
            for t in design["tasks"]
            if t["rater"] == rater
        ],
        "shared_items": design["shared_items"],
    }


def _write(out: Path, design: dict[str, Any], transcripts: dict[str, dict[str, Any]], key: dict[str, Any]) -> None:
    """Everything into a temporary folder beside ``out``, then renamed: a study is written whole or not at all."""
    import csv

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        _dump(staging / "study.json", design)
        for code, transcript in transcripts.items():
            _dump(staging / "transcripts" / f"{code}.json", transcript)
        for rater in design["raters"]:
            _dump(staging / "raters" / rater / "packet.json", packet(design, transcripts, rater))
            with (staging / "raters" / rater / "ratings.csv").open("w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=RATING_COLUMNS)
                writer.writeheader()
                writer.writerows(rating_rows(design, rater))
        _dump(staging / "key" / "key.json", key)
        if out.exists():
            out.rmdir()  # empty (checked)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
