"""A clinician study with known truth, built without logs: a design from :func:`bedside.study.build.assign`,
a key, and simulated raters whose ratings have a planted condition difference, case effects, rater bias and
noise (everything integer, on a 0-20 scale that is never clipped, so that the planted difference is the exact
difference of the expected ratings)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bedside.study.build import MODEL, PHYSICIAN, assign
from bedside.study.items import GUESS, PREFERENCE, Item
from bedside.study.ratings import Study, frame

SCORE = Item(
    id="score",
    question="How good?",
    choices=tuple(str(v) for v in range(21)),
    values=tuple(float(v) for v in range(21)),
    level="interval",
)
SCORE_DICT = SCORE.as_dict()
CONDITIONS = {"human": PHYSICIAN, "model": MODEL}


@dataclass(frozen=True)
class Truth:
    """What the simulated raters do: the model's transcripts score ``difference`` more than the physician's on
    average; each rater adds ``rater_bias`` (sd, a rater's own level) and ``rater_favour`` (sd, how much more a
    rater likes the model's); ``guess_right``: the chance that a rater's blinding guess is right."""

    difference: int = 2
    case_sd: int = 2
    rater_bias: int = 2
    rater_favour: int = 1
    noise: int = 2
    guess_right: float = 0.7


def study(n_cases: int, raters: list[str], k: int, seed: int) -> Study:
    """The design and key of a two-condition study (physician ``human``, ``model``), as ``study build`` writes them."""
    rng = random.Random(seed)
    labels = sorted(CONDITIONS)
    cases = [f"C{i:03d}" for i in range(n_cases)]
    tasks, transcripts = [], {}
    for n, (rater, case, (a, b)) in enumerate(assign(cases, len(labels), raters, k, rng)):
        left, right = (a, b) if rng.random() < 0.5 else (b, a)
        codes = [f"T-{case}-{labels[c]}" for c in (left, right)]
        for code, c in zip(codes, (left, right)):
            transcripts[code] = {"condition": labels[c], "case": case}
        tasks.append({"code": f"S{n:04d}", "rater": rater, "case": case, "left": codes[0], "right": codes[1]})
    design = {
        "raters": raters,
        "cases": {case: [SCORE_DICT] for case in cases},
        "tasks": tasks,
        "title": "simulated",
    }
    key = {"conditions": {c: {"kind": kind} for c, kind in CONDITIONS.items()}, "transcripts": transcripts}
    return Study(Path("."), design, key)


def ratings(s: Study, truth: Truth, seed: int) -> pd.DataFrame:
    """Every rater's ratings of their tasks (checked as a ratings file is)."""
    rng = np.random.default_rng(seed)
    raters = s.design["raters"]
    case_effect = {
        c: int(v)
        for c, v in zip(s.design["cases"], rng.integers(-truth.case_sd, truth.case_sd + 1, len(s.design["cases"])))
    }
    bias = dict(zip(raters, rng.integers(-truth.rater_bias, truth.rater_bias + 1, len(raters)).tolist()))
    favour = dict(zip(raters, rng.integers(-truth.rater_favour, truth.rater_favour + 1, len(raters)).tolist()))
    records = []
    for task in s.design["tasks"]:
        rater, scores = task["rater"], []
        for side in ("left", "right"):
            condition = s.condition(task[side])
            model = condition == "model"
            value = 10 + case_effect[task["case"]] + bias[rater] + model * (truth.difference + favour[rater])
            value += int(rng.integers(-truth.noise, truth.noise + 1))
            assert 0 <= value <= 20, "the scale must never clip the simulated ratings"
            scores.append(value)
            right = rng.random() < truth.guess_right
            guess = ("model" if model else "physician") if right else ("physician" if model else "model")
            records.append(
                {"rater": rater, "task": task["code"], "transcript": task[side], "item": "score", "value": str(value)}
            )
            records.append(
                {"rater": rater, "task": task["code"], "transcript": task[side], "item": GUESS.id, "value": guess}
            )
        lean = int(np.clip(np.sign(scores[1] - scores[0]) * min(3, abs(scores[1] - scores[0])), -3, 3))
        records.append(
            {
                "rater": rater,
                "task": task["code"],
                "transcript": "",
                "item": PREFERENCE.id,
                "value": PREFERENCE.choices[lean + 3],
            }
        )
    return frame(s, ((f"simulated: record {n}", r) for n, r in enumerate(records)))
