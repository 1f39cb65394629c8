"""Versioned data: every benchmark's log records content hashes of its case data, prompt set and bedside's
version; ``bedside compare`` refuses to pair logs whose hashes differ (naming which) unless told to."""

from __future__ import annotations

import pytest
from inspect_ai import eval
from inspect_ai.scorer import Score

from bedside.cli import main
from bedside.versions import KEY, data_versions, differences
from tests.benchmarks import tiny_runs
from tests.conftest import scripted
from tests.reporting.synth import log, sample, versioned_log, write


@pytest.mark.eval
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


@pytest.mark.eval
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


@pytest.mark.eval
def test_the_sweep_leaderboard_refuses_runs_on_different_data_unless_told(tmp_path):
    from bedside.reporting.build import build

    base = {"cases": "sha256:0", "prompts": "sha256:0", "bedside": "0.1"}
    a = versioned_log(tmp_path, "a", "prov/a", base, 0)
    b = versioned_log(tmp_path, "b", "prov/b", {**base, "cases": "sha256:1"}, 1)
    build([a, b], tmp_path / "refused")
    page = (tmp_path / "refused" / "index.html").read_text()
    assert "No leaderboard" in page and "cases differs" in page and "--allow-different-data" in page
    assert not (tmp_path / "refused" / "leaderboard.csv").exists()
    build([a, b], tmp_path / "allowed", allow_different_data=True)
    assert (tmp_path / "allowed" / "leaderboard.csv").exists()
    c = versioned_log(tmp_path, "c", "prov/b", base, 1)  # same data: ranked as before
    build([a, c], tmp_path / "same")
    assert (tmp_path / "same" / "leaderboard.csv").exists()


@pytest.mark.eval
def test_rescore_refuses_a_log_whose_prompts_differ_from_todays(tmp_path, capsys):
    from bedside.reporting.rescore import rescore

    today = data_versions(None, "discharge")
    stale = versioned_log(tmp_path, "stale", "prov/a", {**today, "prompts": "sha256:old"}, 0)
    with pytest.raises(ValueError, match="prompts differs.*--allow-different-data"):
        rescore([stale], scripted(), tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.eval"))
    assert main(["rescore", stale, "--grader", "bedside/scripted", "--out", str(tmp_path / "cli")]) == 2
    assert "prompts differs" in capsys.readouterr().out


# --- every registered task records its versions ------------------------------------------------
# A tiny run of each task is declared by its benchmark (tests/<b>/tiny.py, tests.benchmarks.Tiny): its task
# arguments and the files whose hashes its record must hold, by key.


def registered_tasks() -> list[str]:
    """Every task Inspect's entry point registers (the registered benchmarks' tasks)."""
    from bedside.params import task_functions

    return sorted(task_functions())


def benchmark_of(task_name: str):
    """The benchmark whose task modules define the task (the case extraction is not one of its
    ``tasks``, whose logs are scored runs, but its module is the benchmark's)."""
    from bedside import benchmarks
    from bedside.params import task_functions

    module = task_functions()[task_name].__module__
    [benchmark] = [b for b in benchmarks.all_benchmarks() if module in b.task_modules]
    return benchmark


def test_every_registered_task_has_a_tiny_run():
    """A task added to a benchmark fails here until its benchmark declares a tiny run of it (``TINY`` of
    ``tests/<b>/tiny.py``), and so a checked ``data_versions`` record."""
    missing = sorted(set(registered_tasks()) - set(tiny_runs()))
    assert missing == [], f"registered tasks without a tiny run (TINY of tests/<benchmark>/tiny.py): {missing}"


@pytest.mark.eval
@pytest.mark.parametrize("task_name", registered_tasks())
def test_every_registered_task_records_its_data_versions(task_name, tmp_path):
    from bedside.versions import content_hashes

    assert task_name in tiny_runs(), f"task {task_name} has no tiny run (TINY of tests/<benchmark>/tiny.py)"
    tiny = tiny_runs()[task_name](tmp_path)
    task_args, inputs = tiny.args, tiny.inputs
    benchmark = benchmark_of(task_name)
    [the_log] = eval(
        f"bedside/{task_name}",
        task_args=task_args,
        model=scripted(),
        model_roles={r: scripted() for r in benchmark.roles},
        log_dir=str(tmp_path / "logs"),
        display="none",
        log_realtime=False,  # no live sample buffer: the test reads the finished log
        limit=1,
    )
    assert the_log.status == "success", the_log.error
    record = the_log.eval.metadata.get(KEY)
    assert record is not None, f"task {task_name} writes no {KEY} record into its log's metadata"
    assert {"cases", "prompts", "bedside"} <= set(record)
    assert record["prompts"] == data_versions(None, benchmark.name)["prompts"] is not None
    assert record["bedside"] and record["bedside"] != "unknown"
    for key, path in inputs.items():
        assert record[key] == content_hashes(path), f"{task_name}: {key} is not the hash of {path}"
