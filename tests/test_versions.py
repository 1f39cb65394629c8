"""Versioned data: every benchmark's log records content hashes of its case data, prompt set and bedside's
version; ``bedside compare`` refuses to pair logs whose hashes differ (naming which) unless told to."""

from __future__ import annotations

import json

import pytest
from inspect_ai import eval
from inspect_ai.scorer import Score

from bedside.cli import main
from bedside.paths import DATASETS_DIR
from bedside.versions import KEY, data_versions, differences
from tests.conftest import scripted
from tests.reporting.synth import log, sample, write

DEMO = DATASETS_DIR / "discharge" / "demo.jsonl"


def test_a_file_a_folder_and_the_prompts_are_hashed(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.json").write_text("1")
    (tmp_path / "d" / "rubrics").mkdir()
    (tmp_path / "d" / "rubrics" / "r1.json").write_text("2")
    (tmp_path / "d" / ".hidden").write_text("x")
    v = data_versions(tmp_path / "d", "discharge", subset=tmp_path / "d" / "a.json")
    assert set(v["cases"]) == {"a.json", "rubrics/r1.json"} and v["cases"]["a.json"] == v["subset"]
    assert v["prompts"].startswith("sha256:") and v["bedside"]
    w = data_versions(tmp_path / "d", "discharge", subset=tmp_path / "d" / "a.json")
    assert differences(v, w) == []
    (tmp_path / "d" / "rubrics" / "r1.json").write_text("3")
    assert differences(v, data_versions(tmp_path / "d", "discharge", subset=tmp_path / "d" / "a.json")) == [
        "cases/rubrics/r1.json"
    ]
    assert differences(v, {**v, "prompts": "sha256:0", "bedside": "9.9"}) == ["prompts"]  # the version: recorded only
    assert differences(None, None) == [] and differences(v, None) == [f"{KEY} (recorded in one log only)"]


def make(tmp_path, name, versions):
    samples = [sample(f"c{i}", {"quality": Score(value={"x": 0.5 + 0.01 * i})}) for i in range(6)]
    the_log = log("bedside/discharge", "prov/a", samples)
    the_log.eval.metadata = {KEY: versions}
    return write(the_log, tmp_path / f"{name}.eval")


@pytest.mark.parametrize(
    "change, named",
    [({"prompts": "sha256:1"}, "prompts"), ({"cases": "sha256:1"}, "cases"), ({"bedside": "0.2"}, None)],
)
def test_compare_refuses_logs_on_different_data_unless_told(tmp_path, capsys, change, named):
    base = {"cases": "sha256:0", "prompts": "sha256:0", "bedside": "0.1"}
    a, b = make(tmp_path, "a", base), make(tmp_path, "b", {**base, **change})
    code = main(["compare", a, b, "--metric", "x"])
    out = capsys.readouterr().out
    if named is None:
        assert code == 0 and "paired differences" in out
        return
    assert code == 2 and f"({named} differs)" in out and "--allow-different-data" in out and "| `x` |" not in out
    assert main(["compare", a, b, "--metric", "x", "--allow-different-data"]) == 0
    assert "| `x` |" in capsys.readouterr().out


def test_a_run_records_the_hash_of_its_case_file(tmp_path):
    """Two scripted runs on case files that differ in one case: the logs say so, compare refuses."""
    other = tmp_path / "cases.jsonl"
    lines = DEMO.read_text().splitlines()[:2]
    changed = json.loads(lines[1])
    changed["allergies"] = "Penicillin"
    other.write_text(lines[0] + "\n" + json.dumps(changed) + "\n")
    same = tmp_path / "same.jsonl"
    same.write_text(lines[0] + "\n" + lines[1] + "\n")

    def run(data, name):
        [the_log] = eval(
            "bedside/discharge",
            task_args={"data": str(data), "min_turns": 2, "max_turns": 2},
            model=scripted(),
            model_roles={r: scripted() for r in ("patient", "monitor", "grader")},
            log_dir=str(tmp_path / name),
            display="none",
            limit=1,
        )
        return the_log

    a, b = run(same, "a"), run(other, "b")
    va, vb = a.eval.metadata[KEY], b.eval.metadata[KEY]
    assert va["cases"] == data_versions(same, "discharge")["cases"] and va["prompts"] == vb["prompts"]
    assert differences(va, vb) == ["cases"]
    assert main(["compare", a.location, b.location]) == 2


def sweep_log(tmp_path, name, model, versions, shift):
    from tests.reporting.synth import discharge_case

    samples = [
        discharge_case(f"c{i}", end="clean_complete", values={"naturalness": 3 + shift + 0.1 * i, "tcs": 0.5})
        for i in range(6)
    ]
    the_log = log("bedside/discharge", model, samples)
    the_log.eval.metadata = {KEY: versions}
    return write(the_log, tmp_path / f"{name}.eval")


def test_the_sweep_leaderboard_refuses_runs_on_different_data_unless_told(tmp_path):
    from bedside.reporting.build import build

    base = {"cases": "sha256:0", "prompts": "sha256:0", "bedside": "0.1"}
    a = sweep_log(tmp_path, "a", "prov/a", base, 0)
    b = sweep_log(tmp_path, "b", "prov/b", {**base, "cases": "sha256:1"}, 1)
    build([a, b], tmp_path / "refused")
    page = (tmp_path / "refused" / "index.html").read_text()
    assert "No leaderboard" in page and "cases differs" in page and "--allow-different-data" in page
    assert not (tmp_path / "refused" / "leaderboard.csv").exists()
    build([a, b], tmp_path / "allowed", allow_different_data=True)
    assert (tmp_path / "allowed" / "leaderboard.csv").exists()
    c = sweep_log(tmp_path, "c", "prov/b", base, 1)  # same data: ranked as before
    build([a, c], tmp_path / "same")
    assert (tmp_path / "same" / "leaderboard.csv").exists()


def test_rescore_refuses_a_log_whose_prompts_differ_from_todays(tmp_path, capsys):
    from bedside.reporting.rescore import rescore

    today = data_versions(None, "discharge")
    stale = sweep_log(tmp_path, "stale", "prov/a", {**today, "prompts": "sha256:old"}, 0)
    with pytest.raises(ValueError, match="prompts differs.*--allow-different-data"):
        rescore([stale], scripted(), tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.eval"))
    assert main(["rescore", stale, "--grader", "bedside/scripted", "--out", str(tmp_path / "cli")]) == 2
    assert "prompts differs" in capsys.readouterr().out


def test_medsp_and_cpb_record_their_data_files(tmp_path):
    from bedside.tasks.cpb import cpb
    from bedside.tasks.medsp import medsp
    from tests.cpb import synthetic

    medsp_versions = medsp().metadata[KEY]
    assert isinstance(medsp_versions["cases"], dict) and len(medsp_versions["cases"]) > 1
    assert medsp_versions["prompts"] == data_versions(None, "medsp")["prompts"] != data_versions(None, "cpb")["prompts"]
    data = synthetic.write_data(tmp_path / "cpb-bench_data")
    cpb_versions = cpb(data=str(data)).metadata[KEY]
    assert set(cpb_versions["cases"]) == {p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file()}
