"""Every registered benchmark's clinician study on real runs: its tiny run (``tests/<b>/tiny.py``) with scripted
roles, once as a model and once relabelled as a physician's run (``bedside/human``; the page itself is tested in
tests/human/), built into a study, rated through the templates and reported. Each benchmark's transcript holds
its conversation and its items their scales; nothing of the condition reaches the raters."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from inspect_ai import eval
from inspect_ai.log import read_eval_log, write_eval_log

from bedside import benchmarks
from bedside.cli import tools_of
from tests.benchmarks import tiny_runs
from tests.conftest import bedside_command, scripted

pytestmark = pytest.mark.eval

STUDIED = [b.name for b in benchmarks.all_benchmarks() if tools_of(b).study is not None]


@pytest.mark.parametrize("name", STUDIED)
def test_a_study_of_each_benchmark(name: str, tmp_path: Path) -> None:
    benchmark = benchmarks.get(name)
    task = benchmark.tasks[0]
    tiny = tiny_runs()[task](tmp_path)
    [the_log] = eval(
        f"bedside/{task}",
        task_args=dict(tiny.args),
        model=scripted(),
        model_roles={r: scripted() for r in benchmark.roles},
        log_dir=str(tmp_path / "model"),
        display="none",
        log_realtime=False,
        limit=2,
    )
    assert the_log.status == "success", the_log.error
    physician = read_eval_log(the_log.location)
    physician.eval.model = "bedside/human"
    (tmp_path / "physician").mkdir()
    write_eval_log(physician, str(tmp_path / "physician" / "run.eval"))
    study = tmp_path / "study"
    done = bedside_command(
        "study",
        "build",
        str(tmp_path / "model"),
        str(tmp_path / "physician"),
        "--raters",
        "ann,bob",
        "--k",
        "2",
        "--out",
        str(study),
    )
    assert done.returncode == 0, done.stdout
    for path in (study / "transcripts").iterdir():
        shown = json.loads(path.read_text())
        assert shown["turns"] and all(t["text"] for t in shown["turns"]) and shown["context"][0]["text"]
        assert "scripted" not in path.read_text() and "human" not in path.read_text().lower()
    design = json.loads((study / "study.json").read_text())
    assert all(items and all(len(i["choices"]) >= 2 for i in items) for items in design["cases"].values())
    files = []
    for rater in ("ann", "bob"):
        rows = list(csv.DictReader((study / "raters" / rater / "ratings.csv").open()))
        items = {i["id"]: i for items in design["cases"].values() for i in items}
        for n, row in enumerate(rows):
            choices = {"guess": ["model", "physician"], "preference": ["left", "right"]}.get(row["item"]) or items[
                row["item"]
            ]["choices"]
            row["value"] = choices[n % len(choices)]
        path = study / f"{rater}.csv"
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        files.append(str(path))
    done = bedside_command("study", "report", str(study), *files)
    assert done.returncode == 0, done.stdout
    assert "2 raters, 2 cases" in done.stdout and "Blinding check" in done.stdout
