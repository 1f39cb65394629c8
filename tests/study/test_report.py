"""``bedside report LOGS --study STUDY [--ratings R.csv...]``: the clinician study's analysis in the report, from a
study built from DischargeBench logs (two models and a physician, :mod:`tests.study.logs`) and raters with a planted
difference: the report's tables and CSVs are ``bedside study report``'s numbers, each with its n and interval, the
planted difference inside it; the physician's run shows its person-time per case; bad input is one line, exit 2,
before anything is written."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai.event import ModelEvent
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage

from bedside.study.analysis import HEADINGS
from tests.conftest import bedside_command
from tests.reporting.synth import write
from tests.study.logs import CASES, MODELS, run

AXES = ("naturalness", "responsiveness", "clarity", "clinical_relevance")
#: the physician's transcripts are rated this much lower on every quality axis, by every rater
PLANTED = 2
#: each rater's own level on the quality axes (rater bias)
BIAS = {"ann": 0, "bob": 1, "cy": 0}
#: the physician's working intervals (epoch seconds) per case: two replies, the second's reading overlapping
#: the first's end (their union is what the person worked)
WORKED = [[[1000.0, 1030.0]], [[1025.0, 1060.0], [1100.0, 1110.0]]]
WORKED_SECONDS = 60.0 + 10.0


def human_call(intervals: list[list[float]]) -> ModelEvent:
    output = ModelOutput.from_content(model="bedside/human", content="Take aspirin.")
    output.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
    output.metadata = {"human": True, "human_seconds": 0.0, "human_intervals": intervals, "replayed": False}
    return ModelEvent(
        model="bedside/human", role=None, input=[], tools=[], tool_choice="none", config=GenerateConfig(), output=output
    )


@pytest.fixture
def study(tmp_path: Path) -> tuple[list[str], Path]:
    """The runs (the physician's with its person-time) and the study built from them, raters' templates filled in."""
    paths = []
    for name, model in MODELS.items():
        the_log = run(model)
        if name == "physician":
            for sample in the_log.samples or []:
                sample.events = [human_call(i) for i in WORKED]
        paths.append(write(the_log, tmp_path / f"{name}.eval"))
    folder = tmp_path / "study"
    done = bedside_command(
        "study", "build", *paths, "--raters", "ann,bob,cy", "--k", "2", "--seed", "3", "--out", str(folder)
    )
    assert done.returncode == 0, done.stdout
    key = json.loads((folder / "key" / "key.json").read_text())
    rng = random.Random(0)
    for rater in ("ann", "bob", "cy"):
        rate(folder / "raters" / rater / "ratings.csv", key, rater, rng)
    return paths, folder


def rate(template: Path, key: dict, rater: str, rng: random.Random) -> None:
    """A rater who rates the physician's transcripts :data:`PLANTED` lower on every axis, ticks checklist items at
    random, guesses right, and prefers the model's side by how much better they rated it."""
    rows = list(csv.DictReader(template.open()))
    physician = {code for code, t in key["transcripts"].items() if t["condition"] == "human"}
    sides: dict[str, list[str]] = {}
    for row in rows:
        if row["transcript"]:
            sides.setdefault(row["task"], []).append(row["transcript"])
    for row in rows:
        mine = row["transcript"] in physician
        if row["item"] in AXES:
            row["value"] = str(2 + BIAS[rater] + (0 if mine else PLANTED))
        elif row["item"] == "guess":
            row["value"] = "physician" if mine else "model"
        elif row["item"] == "preference":
            left, right = dict.fromkeys(sides[row["task"]])
            row["value"] = "left" if right in physician else "right" if left in physician else "no preference"
        else:
            row["value"] = rng.choice(["yes", "no"])
    with template.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_report_shows_the_study_as_bedside_study_report_does(study, tmp_path: Path) -> None:
    paths, folder = study
    out = tmp_path / "report"
    done = bedside_command("report", *paths, "--study", str(folder), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    alone = bedside_command("study", "report", str(folder), "--csv", str(tmp_path / "alone.csv"))
    assert alone.returncode == 0, alone.stdout
    expected = pd.read_csv(tmp_path / "alone.csv")
    page = (out / "index.html").read_text()
    assert "<h2>Clinician study</h2>" in page and "3 raters, 6 cases" in page
    for part, heading in HEADINGS:
        shown = pd.read_csv(out / f"clinician_study_{part}.csv")
        mine = expected[expected["section"] == part].drop(columns="section").reset_index(drop=True)
        pd.testing.assert_frame_equal(shown, mine, check_dtype=False)  # the same analysis, number for number
        assert heading in page and f'href="clinician_study_{part}.csv"' in page
        assert (shown["n"] > 0).all() and (shown["n_cases"] > 0).all() and (shown["n_raters"] > 0).all()
        inside = shown.dropna(subset=["low"])
        assert ((inside["low"] <= inside["estimate"] + 1e-9) & (inside["estimate"] <= inside["high"] + 1e-9)).all()
    # the planted difference, recovered on every axis against each model (the pair in name order: the physician
    # is b against claude, a against gpt)
    diff = pd.read_csv(out / "clinician_study_difference.csv").set_index(["measure", "a", "b"])
    for axis in AXES:
        against_claude = diff.loc[(axis, "anthropic/claude-sonnet-4-5", "human")]
        against_gpt = diff.loc[(axis, "human", "openai/gpt-4o-mini")]
        assert against_claude["estimate"] == pytest.approx(PLANTED)
        assert against_claude["low"] <= PLANTED <= against_claude["high"]
        assert against_gpt["estimate"] == pytest.approx(-PLANTED) and against_gpt["n_cases"] >= 2
        assert f"{-PLANTED:.3f} [" in page
    blinding = pd.read_csv(out / "clinician_study_blinding.csv")
    assert blinding.loc[blinding["measure"] == "right_guesses", "estimate"].tolist() == [1.0]  # they all guessed right
    # the physician's person-time per case, from its calls' working intervals
    person = pd.read_csv(out / "person_time_by_case.csv")
    assert set(person["model"]) == {"human"} and set(person["role"]) == {"educator"}
    assert sorted(person["id"]) == sorted(CASES)
    assert (person["replies"] == 2).all() and (person["person_seconds"] == WORKED_SECONDS).all()
    [summary] = pd.read_csv(out / "person_time.csv").to_dict("records")
    assert summary["cases"] == summary["n"] == len(CASES)
    assert summary["minutes_per_case"] == pytest.approx(WORKED_SECONDS / 60)
    assert summary["total_minutes"] == pytest.approx(len(CASES) * WORKED_SECONDS / 60)
    assert "<h3>Person-time</h3>" in page and "1.167 [1.167, 1.167] (n=6)" in page


def test_the_ratings_named_are_the_ones_read(study, tmp_path: Path) -> None:
    paths, folder = study
    named = [str(folder / "raters" / r / "ratings.csv") for r in ("ann", "bob")]
    out = tmp_path / "report"
    done = bedside_command("report", *paths, "--study", str(folder), "--ratings", *named, "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 raters" in (out / "index.html").read_text()
    assert set(pd.read_csv(out / "clinician_study_reliability.csv")["n_raters"]) <= {1, 2}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unknown rater", "ratings.csv: line 2: field 'rater': unknown rater 'zed'"),
        ("off the scale", "ratings.csv: line 2: field 'value': '9' is not on the scale of"),
        ("no study", "--ratings "),
        ("not a study", "not a study folder"),
        ("no rating yet", "no rating given yet"),
        ("missing file", "nowhere.csv: no such ratings file"),
    ],
)
def test_bad_study_input_is_one_line_before_anything_is_written(study, tmp_path: Path, case: str, message: str) -> None:
    paths, folder = study
    template = folder / "raters" / "ann" / "ratings.csv"
    rows = list(csv.DictReader(template.open()))
    first = rows[0]
    if case == "unknown rater":
        first["rater"] = "zed"
    if case == "off the scale":
        first["item"], first["value"] = "naturalness", "9"
    if case == "no rating yet":
        for row in rows:
            row["value"] = ""
    bad = tmp_path / "bad" / "ratings.csv"
    bad.parent.mkdir()
    with bad.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(first))
        writer.writeheader()
        writer.writerows(rows)
    args = {
        "no study": ["--ratings", str(bad)],
        "not a study": ["--study", str(tmp_path / "bad")],
        "missing file": ["--study", str(folder), "--ratings", str(tmp_path / "nowhere.csv")],
    }.get(case, ["--study", str(folder), "--ratings", str(bad)])
    out = tmp_path / "report"
    done = bedside_command("report", *paths, *args, "--out", str(out))
    assert done.returncode == 2, done.stdout
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bedside report: ") and message in lines[0], done.stdout
    assert not out.exists()
