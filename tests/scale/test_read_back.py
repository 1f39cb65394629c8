"""A sharded run reads back as one run, with the unsharded run's numbers; its incomplete or mixed logs are
refused in one line naming the shard.

Each benchmark's golden run (``tests/golden``: the shipped demo data, ``bedside/scripted`` for every role)
runs twice: unsharded (one ``eval()``) and cut into 4 shards by ``bedside scale``'s planner, the units run
one after another in this process. The sharded run's per-sample scores equal the golden values (every value
exactly, the declared kernel floats within their tolerance: ``tests/golden/make_golden.py``), and every
reader gives the same tables for both runs: the same means, intervals (same bootstrap seed) and n. Within one
process the embedding kernels are the same, so here even the kernel floats agree exactly."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from inspect_ai import eval
from inspect_ai.log import EvalLog, read_eval_log, write_eval_log

from bedside import benchmarks
from bedside.reporting.load import expand, load, read_run, read_runs
from bedside.scale.engine import InProcess
from bedside.scale.merge import ShardError
from bedside.scale.plan import RunSpec, plan
from bedside.scale.shards import KEY, MERGED_KEY, shard_info
from tests.benchmarks import tiny_runs
from tests.conftest import REPO, bedside_command
from tests.golden import make_golden

pytestmark = pytest.mark.eval

SCRIPTED = "bedside/scripted"
#: every role bound to the scripted model, as the golden runs bind them
ROLES = ("patient", "monitor", "grader", "environment")
SHARDS = 4


def runs(tmp: Path, task: str, task_args: dict[str, Any]) -> tuple[EvalLog, str, EvalLog]:
    """(the unsharded run's log, the sharded run's folder, its logs read as one) of ``task``; each run with
    an empty model cache (DischargeBench caches its note-side judge calls: the second run would read the
    first's, and make fewer calls)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("INSPECT_CACHE_DIR", str(tmp / "cache-unsharded"))
        unsharded = _unsharded(tmp, task, task_args)
        env.setenv("INSPECT_CACHE_DIR", str(tmp / "cache-sharded"))
        sharded = _sharded(tmp, task, task_args)
    return read_eval_log(unsharded.location), str(tmp / "sharded"), sharded


def _unsharded(tmp: Path, task: str, task_args: dict[str, Any]) -> EvalLog:
    [unsharded] = eval(
        task,
        task_args=task_args,
        model=SCRIPTED,
        model_roles={r: SCRIPTED for r in ROLES},
        log_dir=str(tmp / "unsharded"),
        display="none",
        log_realtime=False,
    )
    assert unsharded.status == "success", unsharded.error
    return unsharded


def _sharded(tmp: Path, task: str, task_args: dict[str, Any]) -> EvalLog:
    spec = RunSpec(
        tasks=(task,),
        models=(SCRIPTED,),
        log_dir=str(tmp / "sharded"),
        task_args=task_args,
        model_roles=tuple(f"{r}={SCRIPTED}" for r in ROLES),
        shards=SHARDS,
        eval_args={"log_realtime": False},
    )
    run_plan = plan(spec, slots=1)
    outcomes = InProcess().run(run_plan.units, run_plan.at_once, say=lambda line: None)
    assert all(o.done for o in outcomes), [o.failures for o in outcomes]
    return read_run(str(tmp / "sharded"))


def sharded(tmp: Path, name: str) -> tuple[EvalLog, str, EvalLog]:
    """``runs`` of a benchmark's main task (``bedside/<name>``) on its golden run's cases: the task's
    defaults, with the data its tiny run names (``tests/<b>/tiny.py``: CPB-Bench's is written there)."""
    data = tiny_runs()[name](tmp).args.get("data")
    return runs(tmp, f"bedside/{name}", {"data": data} if data else {})


@pytest.fixture(scope="module")
def discharge(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalLog, str, EvalLog]:
    return sharded(tmp_path_factory.mktemp("discharge"), "discharge")


@pytest.fixture(scope="module")
def medsp(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalLog, str, EvalLog]:
    return sharded(tmp_path_factory.mktemp("medsp"), "medsp")


@pytest.fixture(scope="module", params=[b.name for b in benchmarks.all_benchmarks()])
def benchmark_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(name, runs) of every registered benchmark; the runs of the fixtures above are shared."""
    if request.param in ("discharge", "medsp"):
        return request.param, request.getfixturevalue(request.param)
    return request.param, sharded(tmp_path_factory.mktemp(request.param), request.param)


def golden_values(log: EvalLog) -> dict[str, Any]:
    """A log's samples in the golden files' form (``tests/golden/make_golden.py``)."""
    return {
        f"{s.id}#{s.epoch}": {
            "answer": {k: v.answer for k, v in sorted((s.scores or {}).items()) if v.answer is not None},
            "scores": {k: make_golden._value(v.value) for k, v in sorted((s.scores or {}).items())},
        }
        for s in sorted(log.samples or [], key=lambda s: (str(s.id), s.epoch))
    }


def test_a_sharded_run_has_the_unsharded_runs_samples_and_scores(benchmark_run: Any) -> None:
    name, (unsharded, folder, sharded) = benchmark_run
    units = [read_eval_log(p, header_only=True) for p in expand([folder])]
    assert sorted(shard_info(u).shard for u in units) == list(range(1, SHARDS + 1))  # type: ignore[union-attr]
    assert sum(1 for u in units if u.eval.dataset.sample_ids) >= 2  # the samples are spread over the shards
    # the golden values (the unsharded run's, checked by tests/test_golden_scores.py): 0 differences
    assert make_golden.differences(name, golden_values(sharded)) == []
    # and, sample by sample in Inspect's order, exactly the unsharded run's scores and metadata
    assert [(s.id, s.epoch) for s in sharded.samples or []] == [(s.id, s.epoch) for s in unsharded.samples or []]
    for a, b in zip(unsharded.samples or [], sharded.transcripts()):  # each sample whole
        assert {k: v.value for k, v in (a.scores or {}).items()} == {k: v.value for k, v in (b.scores or {}).items()}
        assert a.metadata == b.metadata  # persona draws, assignments: decided on the whole case set
    assert KEY not in sharded.eval.metadata and sharded.eval.metadata[MERGED_KEY]["shards"] == SHARDS  # type: ignore[index,operator]


def test_strata_and_compare_give_the_unsharded_runs_numbers(benchmark_run: Any) -> None:
    from bedside.reporting.compare import compare
    from bedside.reporting.strata import strata_table

    _, (unsharded, folder, _) = benchmark_run
    pd.testing.assert_frame_equal(strata_table(unsharded), strata_table(read_run(folder)), check_exact=True)
    results = compare(unsharded, folder, None, None, resamples=999)
    assert results and all(r.difference == 0 and r.baseline == r.candidate for r in results)
    strata = bedside_command("strata", unsharded.location), bedside_command("strata", folder)
    assert strata[0].returncode == strata[1].returncode == 0
    table = [done.stdout.split("\nrun options")[0] for done in strata]  # (the run options name each log)
    assert table[0] == table[1]  # the same table and intervals, as printed


def test_every_reader_of_a_sharded_discharge_run_gives_the_unsharded_numbers(discharge, tmp_path: Path) -> None:
    from bedside.discharge.audit import audit_table
    from bedside.discharge.ratings import judge_values
    from bedside.reporting.estimate import estimate, read_pilot
    from bedside.reporting.sweep import case_values, leaderboard

    unsharded, folder, sharded = discharge
    one, other = load([unsharded.location]), load([folder])
    assert [x.label for x in one] == [x.label for x in other]
    pd.testing.assert_frame_equal(judge_values(one), judge_values(other), check_exact=True)  # agreement
    for a, b in zip(leaderboard(case_values(one)), leaderboard(case_values(other))):  # the sweep's leaderboard
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert audit_table(unsharded) | {"log": ""} == audit_table(sharded) | {"log": ""}
    bills = [estimate(read_pilot([p]), cases=477, seed=0) for p in (unsharded.location, folder)]
    for name in bills[0]:  # calls and tokens (the seconds are each run's own)
        a, b = (bill[name].drop(columns=[c for c in bill[name] if "seconds" in c]) for bill in bills)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    # bedside report: every table it writes is the same
    for path, out in ((unsharded.location, "a"), (folder, "b")):
        assert bedside_command("report", path, "--out", str(tmp_path / out)).returncode == 0
    tables = sorted(p.name for p in (tmp_path / "a").glob("*.csv"))
    assert tables and tables == sorted(p.name for p in (tmp_path / "b").glob("*.csv"))
    for table in tables:
        a, b = pd.read_csv(tmp_path / "a" / table), pd.read_csv(tmp_path / "b" / table)
        pd.testing.assert_frame_equal(
            a.drop(columns=["log"], errors="ignore"), b.drop(columns=["log"], errors="ignore")
        )


def test_a_sharded_run_is_rejudged_as_one_run(medsp, tmp_path: Path) -> None:
    unsharded, folder, _ = medsp
    for source, out in ((unsharded.location, "a"), (folder, "b")):
        done = bedside_command("rescore", source, "--grader", SCRIPTED, "--out", str(tmp_path / out))
        assert done.returncode == 0, done.stdout
    [a], [b] = (list((tmp_path / out).glob("*.eval")) for out in ("a", "b"))
    assert b.name.endswith(".eval") and "_run-" in b.name  # one log for the whole sharded run
    a_log, b_log = read_eval_log(str(a)), read_run(str(b))  # the re-judged run reads back as an ordinary log
    assert len(b_log.samples or []) == len(a_log.samples or []) == 7
    assert [{k: v.value for k, v in (s.scores or {}).items()} for s in a_log.samples or []] == [
        {k: v.value for k, v in (s.scores or {}).items()} for s in b_log.samples or []
    ]


# --- refused: a missing shard, a shard given twice, shards of different runs -------------------------------


def readers(target: list[str], tmp: Path) -> dict[str, list[str]]:
    """Every reader's command line on the logs ``target``."""
    annotations = str(REPO / "tests" / "discharge" / "annotations_synthetic.csv")
    return {
        "report": ["report", *target, "--out", str(tmp / "report")],
        "strata": ["strata", *target],
        "audit": ["audit", *target],
        "compare": ["compare", target[0], *target],
        "estimate": ["estimate", *target, "--cases", "10"],
        "rescore": ["rescore", *target, "--grader", SCRIPTED, "--out", str(tmp / "rescored")],
        "agreement": ["agreement", *target, "--annotations", annotations],
    }


def refused_by_every_reader(target: list[str], tmp: Path, *expected: str) -> None:
    for reader, args in readers(target, tmp).items():
        done = bedside_command(*args)
        lines = done.stdout.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (reader, done.stdout, done.stderr)
        assert all(text in lines[0] for text in expected), (reader, lines[0])


def unit_folder(folder: str, shard: int) -> Path:
    [found] = [
        Path(p).parent for p in expand([folder]) if shard_info(read_eval_log(p, header_only=True)).shard == shard
    ]  # type: ignore[union-attr]
    return found


def test_a_missing_shard_is_refused_by_every_reader(medsp, tmp_path: Path) -> None:
    _, folder, _ = medsp
    copy = tmp_path / "run"
    shutil.copytree(folder, copy)
    shutil.rmtree(unit_folder(str(copy), 3))
    refused_by_every_reader([str(copy)], tmp_path, "shard 3 of 4", "is missing")


def test_a_shard_given_twice_is_refused_by_every_reader(medsp, tmp_path: Path) -> None:
    _, folder, _ = medsp
    shutil.copytree(folder, tmp_path / "logs" / "run")
    shutil.copytree(unit_folder(folder, 2), tmp_path / "logs" / "copy-of-shard-2")  # a copy beside the run
    refused_by_every_reader([str(tmp_path / "logs")], tmp_path, "shard 2 of 4", "given twice", "copy-of-shard-2")


def test_shards_of_different_runs_are_refused(medsp, tmp_path: Path) -> None:
    _, folder, _ = medsp
    # shards 1-2 of this run with shards 3-4 of another run of the same task and model: each run is missing two
    mixed = tmp_path / "mixed"
    for path in expand([folder]):
        log = read_eval_log(path)
        info = shard_info(log)
        assert info is not None
        if info.shard > 2:
            log.eval.metadata[KEY]["run_id"] = "run-another000"  # type: ignore[index]
        write_eval_log(log, str(mixed / f"{info.shard}" / Path(path).name))
    refused_by_every_reader([str(mixed)], tmp_path, "shard 3 of 4", "is missing")
    # a unit claiming this run's id but run on other data: refused, naming it
    other = tmp_path / "other-data"
    for path in expand([folder]):
        log = read_eval_log(path)
        info = shard_info(log)
        if info is not None and info.shard == 4:
            log.eval.metadata["data_versions"]["cases"] = "sha256:0000"  # type: ignore[index]
        write_eval_log(log, str(other / f"{info.shard}" / Path(path).name))  # type: ignore[union-attr]
    refused_by_every_reader([str(other)], tmp_path, "shard 4 of 4", "is not of the run", "cases differs")
    # a unit holding a sample of another shard (moved from shard 2 to shard 1, with its place in the selection)
    logs = {}
    for path in expand([folder]):
        log = read_eval_log(path)
        logs[shard_info(log).shard] = (path, log)  # type: ignore[union-attr]
    (_, one), (_, two) = logs[1], logs[2]
    moved = two.samples.pop()  # type: ignore[union-attr]
    one.samples.append(moved)  # type: ignore[union-attr]
    one.eval.dataset.sample_ids = [*one.eval.dataset.sample_ids, moved.id]  # type: ignore[misc]
    two.eval.dataset.sample_ids = [i for i in two.eval.dataset.sample_ids if i != moved.id]  # type: ignore[union-attr]
    moved_dir = tmp_path / "moved"
    for shard, (path, log) in logs.items():
        write_eval_log(log, str(moved_dir / f"{shard}" / Path(path).name))
    with pytest.raises(
        ShardError, match=rf"shard 1 of 4 .* holds sample {re.escape(str(moved.id))}, which belongs to shard 2$"
    ):
        read_runs([str(moved_dir)])


def test_read_runs_keeps_unsharded_runs_apart(discharge, medsp) -> None:
    """Unsharded logs read as they are, beside sharded runs (one per (run, task, model))."""
    runs_read = read_runs([discharge[0].location, discharge[1], medsp[1]])
    assert [len(run.samples) for run in runs_read] == [24, 24, 7]
    assert runs_read[0].eval.metadata.get(KEY) is None and runs_read[1].path.endswith(".shards")
