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
from tests.benchmarks import tiny_runs
from tests.conftest import scripted
from tests.discharge.tiny import build_cases
from tests.reporting.synth import log, sample, write

DEMO = DATASETS_DIR / "discharge" / "demo.jsonl"


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
            log_realtime=False,  # no live sample buffer: the test reads the finished log
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


@pytest.mark.eval
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


@pytest.mark.eval
def test_a_safety_probe_log_beside_the_sweep_does_not_block_its_leaderboard(tmp_path):
    """The probe is another task of DischargeBench with its own inputs (its transcripts): its data are
    compared with other probe runs only, not with the discharge runs of the sweep."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from bedside.reporting.build import build

    base = {"cases": "sha256:0", "prompts": "sha256:0", "bedside": "0.1"}
    a = sweep_log(tmp_path, "a", "prov/a", base, 0)
    b = sweep_log(tmp_path, "b", "prov/b", base, 1)
    probes = []
    for name, record in (("probe", {**base, "probes": "sha256:p"}), ("probe_other", {**base, "probes": "sha256:q"})):
        probe = read_eval_log(sweep_log(tmp_path, name, "prov/p", record, 0))
        probe.eval.task = "bedside/discharge_safety_probe"
        write_eval_log(probe, str(tmp_path / f"{name}.eval"))
        probes.append(str(tmp_path / f"{name}.eval"))
    build([a, b, probes[0]], tmp_path / "with_probe")
    assert (tmp_path / "with_probe" / "leaderboard.csv").exists()
    build([a, b, *probes], tmp_path / "two_probes")  # two probe runs on other transcripts: still refused
    page = (tmp_path / "two_probes" / "index.html").read_text()
    assert "No leaderboard" in page and "probe_other.eval vs" in page and "probes differs" in page


@pytest.mark.eval
def test_rescore_refuses_a_log_whose_prompts_differ_from_todays(tmp_path, capsys):
    from bedside.reporting.rescore import rescore

    today = data_versions(None, "discharge")
    stale = sweep_log(tmp_path, "stale", "prov/a", {**today, "prompts": "sha256:old"}, 0)
    with pytest.raises(ValueError, match="prompts differs.*--allow-different-data"):
        rescore([stale], scripted(), tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.eval"))
    assert main(["rescore", stale, "--grader", "bedside/scripted", "--out", str(tmp_path / "cli")]) == 2
    assert "prompts differs" in capsys.readouterr().out


@pytest.mark.eval
def test_rescore_checks_a_case_extraction_logs_prompts_and_refuses_a_mismatch_naming_the_hash(tmp_path, capsys):
    """The extraction (``build_discharge_cases``) is no reported task of DischargeBench, but its log records
    DischargeBench's prompt set (the extraction prompt is in it): rescore checks it like any other log's."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from bedside.reporting.rescore import check_prompts, rescore

    task_args = build_cases(tmp_path).args
    [extraction] = eval(
        "bedside/build_discharge_cases", task_args=task_args, model=scripted(), log_dir=str(tmp_path), display="none"
    )
    assert extraction.status == "success", extraction.error
    today = data_versions(None, "discharge")["prompts"]
    assert check_prompts(extraction, "extraction.eval", allow=False) == today  # today's prompts: checked, passes

    stale = read_eval_log(extraction.location)
    stale.eval.metadata[KEY]["prompts"] = "sha256:" + "0" * 64
    write_eval_log(stale, str(tmp_path / "stale.eval"))
    with pytest.raises(ValueError) as refused:
        rescore([str(tmp_path / "stale.eval")], scripted(), tmp_path / "out")
    message = str(refused.value)
    assert "prompts differs: the log recorded sha256:" + "0" * 64 in message
    assert f"prompts/discharge/ is {today} today" in message and "--allow-different-data" in message
    assert not list((tmp_path / "out").glob("*.eval"))
    cli = ["rescore", str(tmp_path / "stale.eval"), "--grader", "bedside/scripted", "--out", str(tmp_path / "cli")]
    assert main(cli) == 2
    assert "sha256:" + "0" * 64 in capsys.readouterr().out
    assert check_prompts(stale, "stale.eval", allow=True) == today  # told to: re-judged anyway


@pytest.mark.eval
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


@pytest.mark.eval
def test_safety_probe_logs_are_refused_on_other_transcripts_or_cases(tmp_path, capsys):
    """The probe's record holds its transcripts (``probes``) and the case file of its notes (``cases``):
    compare and rescore refuse a pair that differs in either, naming it."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from bedside.discharge.safety_probe import PROBES
    from bedside.reporting.rescore import rescore

    probes = tmp_path / "probes.jsonl"
    first, *rest = PROBES.read_text().splitlines()
    probes.write_text("\n".join([json.dumps({**json.loads(first), "note": "reworded"}), *rest]) + "\n")
    cases = tmp_path / "cases.jsonl"
    demo = [json.loads(line) for line in DEMO.read_text().splitlines()]
    cases.write_text("".join(json.dumps({**c, "allergies": "Penicillin"}) + "\n" for c in demo))

    def run(name, **task_args):
        [the_log] = eval(
            "bedside/discharge_safety_probe",
            task_args=task_args,
            model=scripted(),
            model_roles={"grader": scripted()},
            log_dir=str(tmp_path / name),
            display="none",
            log_realtime=False,  # no live sample buffer: the test reads the finished log
            limit=1,
        )
        assert the_log.status == "success"
        return the_log.location

    shipped, reworded, other_cases = run("a"), run("b", data=str(probes)), run("c", cases=str(cases))
    assert main(["compare", shipped, run("d")]) == 0  # the same transcripts and cases: paired
    capsys.readouterr()
    assert main(["compare", shipped, reworded]) == 2
    assert "(probes differs)" in capsys.readouterr().out
    assert main(["compare", shipped, other_cases]) == 2
    assert "(cases differs)" in capsys.readouterr().out
    assert main(["compare", shipped, other_cases, "--allow-different-data"]) == 0

    stale = read_eval_log(shipped)
    stale.eval.metadata[KEY]["prompts"] = "sha256:old"
    write_eval_log(stale, str(tmp_path / "stale.eval"))
    with pytest.raises(ValueError, match="prompts differs.*--allow-different-data"):
        rescore([tmp_path / "stale.eval"], scripted(), tmp_path / "out")
    [fresh] = rescore([shipped], scripted(), tmp_path / "fresh")  # today's prompts: re-judged, every scorer
    [rejudged] = read_eval_log(fresh).samples
    assert {"advice_safety", "safety_probe_check"} <= set(rejudged.scores)
