"""``bedside study build`` and ``bedside study report`` on DischargeBench logs built directly (three conditions:
two models and a physician on the same six cases): the folder is blinded (no model, provider, id or log path
where raters look; a model's name in its words removed), seeded, balanced as documented; bad input is refused
in one line before anything is written; ratings come back through the report, and a bad rating is named by
file, line and field."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import bedside_command
from tests.reporting.synth import write
from tests.study.logs import CASES, ITEMS_PER_TRANSCRIPT, MODELS, VERSIONS, run


def build(runs: list[str], out: Path, *extra: str) -> tuple[int, str]:
    done = bedside_command(
        "study", "build", *runs, "--raters", "ann,bob,cy", "--k", "2", "--seed", "3", "--out", str(out), *extra
    )
    return done.returncode, done.stdout + done.stderr


def test_the_study_is_blinded_seeded_and_balanced(runs: list[str], tmp_path: Path) -> None:
    code, said = build(runs, tmp_path / "study")
    assert code == 0, said
    study = tmp_path / "study"
    design = json.loads((study / "study.json").read_text())
    key = json.loads((study / "key" / "key.json").read_text())
    tasks = design["tasks"]
    assert len(tasks) == len(CASES) * 2
    condition = {code: t["condition"] for code, t in key["transcripts"].items()}
    assert set(condition.values()) == {"openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "human"}
    assert key["conditions"]["human"]["kind"] == "physician"
    # each case: k tasks, k different raters, two different conditions of that case
    for case in design["cases"]:
        mine = [t for t in tasks if t["case"] == case]
        assert len(mine) == 2 and len({t["rater"] for t in mine}) == 2
        for t in mine:
            assert condition[t["left"]] != condition[t["right"]]
            assert key["transcripts"][t["left"]]["case"] == key["transcripts"][t["right"]]["case"] == case
    # every pair equally often; every rater sees every condition, about equally
    pairs = Counter(frozenset((condition[t["left"]], condition[t["right"]])) for t in tasks)
    assert len(pairs) == 3 and max(pairs.values()) - min(pairs.values()) <= 1
    for rater in design["raters"]:
        seen = Counter(condition[t[side]] for t in tasks if t["rater"] == rater for side in ("left", "right"))
        assert len(seen) == 3 and max(seen.values()) - min(seen.values()) <= 1, (rater, seen)
        assert key["balance"][rater] == dict(sorted(seen.items()))
    # blinded: nothing raters see names a condition, a model, a provider, a sample id or a log
    tells = ["gpt", "claude", "openai", "anthropic", "human", "bedside", *CASES, str(tmp_path)]
    for path in [study / "study.json", *(study / "transcripts").iterdir(), *(study / "raters").rglob("*")]:
        if path.is_file():
            text = path.read_text().lower()
            assert not [t for t in tells if t.lower() in text], path
    removed = {code: t["names_removed"] for code, t in key["transcripts"].items()}
    assert all(removed[c] == 1 for c in removed if condition[c] == "openai/gpt-4o-mini")
    assert sum(removed.values()) == len(CASES)
    shown = json.loads(next(iter((study / "transcripts").iterdir())).read_text())
    assert shown["context"][0]["title"] == "Discharge note" and [t["speaker"] for t in shown["turns"]] == [
        "Educator",
        "Patient",
    ]
    # the templates: per task, two transcripts' items and guesses, then the preference
    for rater in design["raters"]:
        rows = list(csv.DictReader((study / "raters" / rater / "ratings.csv").open()))
        n = sum(t["rater"] == rater for t in tasks)
        assert len(rows) == n * (2 * ITEMS_PER_TRANSCRIPT + 1)
        packet = json.loads((study / "raters" / rater / "packet.json").read_text())
        assert [t["task"] for t in packet["tasks"]] == [t["code"] for t in tasks if t["rater"] == rater]
    # seeded: the same seed writes the same study, another seed another one
    assert build(runs, tmp_path / "again")[0] == 0
    for path in study.rglob("*"):
        if path.is_file():
            assert path.read_bytes() == (tmp_path / "again" / path.relative_to(study)).read_bytes(), path
    assert build(runs, tmp_path / "other", "--seed", "4")[0] == 0
    assert (tmp_path / "other" / "study.json").read_bytes() != (study / "study.json").read_bytes()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing case", "physician.eval: case 'case-foxtrot' missing (held by"),
        ("other data", "claude.eval vs "),
        ("k too large", "--k 4: each case is rated by k different raters, 1 <= k <= 3"),
        ("too few tasks", "--k 1: 1 case(s) x k = 1 task(s) cannot cover the 3 pairs"),
        ("rater misses a condition", "--k 1: rater 'ann' would get 1 task(s) and never see 1 of the 3 conditions"),
        ("one run", "a study compares at least two conditions"),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(tmp_path: Path, case: str, message: str) -> None:
    models = dict(MODELS)
    cases, raters, k = CASES, "ann,bob,cy", "2"
    logs = {}
    if case == "missing case":
        logs["physician"] = run(MODELS["physician"], CASES[:-1])
    if case == "other data":
        logs["claude"] = run(MODELS["claude"], versions={**VERSIONS, "cases": "changed"})
    if case == "k too large":
        k = "4"
    if case == "too few tasks":
        cases, k = CASES[:1], "1"
    if case == "rater misses a condition":
        cases, k = CASES[:3], "1"
    if case == "one run":
        models = {"gpt": MODELS["gpt"]}
    paths = [write(logs.get(name) or run(model, cases), tmp_path / f"{name}.eval") for name, model in models.items()]
    out = tmp_path / "study"
    done = bedside_command("study", "build", *paths, "--raters", raters, "--k", k, "--out", str(out))
    assert done.returncode == 2
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stdout
    if case == "other data":
        assert lines[0].endswith("gpt.eval: cases differs: a study rates runs of the same data and prompts")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".study")]


def fill(study: Path, rater: str) -> Path:
    """A rater who rates every item: the quality axes 4, every checklist item yes, guesses model, prefers left."""
    rows = list(csv.DictReader((study / "raters" / rater / "ratings.csv").open()))
    for row in rows:
        row["value"] = {"preference": "left, slightly", "guess": "model"}.get(row["item"]) or (
            "yes" if row["item"].startswith("Q") else "4"
        )
    path = study / f"{rater}.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_report_reads_the_ratings_and_names_a_bad_one(runs: list[str], tmp_path: Path) -> None:
    study = tmp_path / "study"
    assert build(runs, study)[0] == 0
    files = [str(fill(study, r)) for r in ("ann", "bob", "cy")]
    done = bedside_command("study", "report", str(study), *files, "--csv", str(tmp_path / "out.csv"))
    assert done.returncode == 0, done.stdout
    assert "3 raters, 6 cases" in done.stdout and "Bradley-Terry" in done.stdout
    import pandas as pd

    table = pd.read_csv(tmp_path / "out.csv")
    diff = table[(table["section"] == "difference") & (table["measure"] == "naturalness")]
    assert len(diff) == 3 and (diff["estimate"] == 0).all() and (diff["n"] > 0).all()
    blinding = table[(table["section"] == "blinding") & (table["measure"] == "right_guesses")].iloc[0]
    assert blinding["estimate"] == pytest.approx(2 / 3, abs=0.01)  # 'model' is right for 2 of the 3 conditions

    rows = list(csv.DictReader(open(files[0])))
    for field, value, message in [
        ("rater", "zed", "line 2: field 'rater': unknown rater 'zed' (the study's: ann, bob, cy)"),
        ("item", "Q99", "line 2: field 'item': unknown item 'Q99' for case C00"),
        ("value", "7", "line 2: field 'value': '7' is not on the scale of naturalness (1 / 2 / 3 / 4 / 5)"),
    ]:
        bad = [dict(rows[0], **{field: value}), *rows[1:]]
        path = tmp_path / f"bad-{field}.csv"
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(bad)
        done = bedside_command("study", "report", str(study), str(path))
        assert done.returncode == 2 and done.stdout.strip().startswith(f"bedside study report: {path}: {message}")
        assert len(done.stdout.strip().splitlines()) == 1
    done = bedside_command("study", "report", str(study), files[0], files[0])
    assert done.returncode == 2 and "rating given twice" in done.stdout and len(done.stdout.strip().splitlines()) == 1


def test_physicians_who_each_played_some_cases_are_one_condition(tmp_path: Path) -> None:
    paths = [
        write(run(MODELS["gpt"]), tmp_path / "gpt.eval"),
        write(run(MODELS["physician"], CASES[:4]), tmp_path / "phys_a.eval"),
        write(run(MODELS["physician"], CASES[4:]), tmp_path / "phys_b.eval"),
    ]
    code, said = build(paths, tmp_path / "study")
    assert code == 0, said
    key = json.loads((tmp_path / "study" / "key" / "key.json").read_text())
    assert sorted(key["conditions"]) == ["human", "openai/gpt-4o-mini"]
    logs = {t["sample_id"]: Path(t["log"]).name for t in key["transcripts"].values() if t["condition"] == "human"}
    assert logs == {case: "phys_a.eval" if case in CASES[:4] else "phys_b.eval" for case in CASES}
