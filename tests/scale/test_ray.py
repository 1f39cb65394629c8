"""``bedside scale`` on a Ray cluster of two nodes on this machine (a head and a worker node, one CPU each,
started by Ray's ``cluster_utils``), as a user runs it: ``bedside scale ... --address <head>`` in its own
process, against the counting loopback server (:mod:`tests.scale.serve`), whose address reaches the workers
through ``--env``. The cluster and the server are shared by this module's tests (Ray re-uses its worker
processes from one run to the next: their imports are paid once).

- the units run on both nodes, within the run's connection budget per model (counted by the server);
- a worker killed with SIGKILL mid-run: Ray runs its unit again, which resumes its log (the samples it had
  finished are not run again) and the run completes, every sample once;
- the command killed mid-run and run again: only unfinished samples run, every sample once; a third run
  changes nothing;
- a node removed mid-run: its units run again on the node left, the run completes, every sample once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from inspect_ai.log import read_eval_log

from bedside.reporting.load import expand, read_run
from tests import forked
from tests.forked import Forked
from tests.reliability.helpers import event_request_key, model_events, replicate_discharge
from tests.scale.helpers import (
    CountingServerProcess,
    environment,
    lean_task,
    loopback_arguments,
    ray_environment,
    scale,
    start_scale,
)

pytestmark = pytest.mark.eval

CASES = 8
SHARDS = 4
ENV_FLAGS = [
    arg for name in ("LOOPBACK_API_KEY", "LOOPBACK_BASE_URL", "BEDSIDE_LOOPBACK_URL") for arg in ("--env", name)
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CountingServerProcess]:
    """The counting loopback server at 50 ms a call."""
    with CountingServerProcess(tmp_path_factory.mktemp("ray-server") / "requests.jsonl", latency=0.05) as found:
        yield found


@pytest.fixture(scope="module")
def cluster(server: CountingServerProcess) -> Iterator[Any]:
    """A Ray cluster of two nodes on this machine (``ray.cluster_utils.Cluster``): ``.address``, and the
    worker node ``.worker``."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in {**ray_environment(), **server.env}.items():
            env.setenv(name, value)  # before Ray is imported: it reads its authentication mode once
        from ray.cluster_utils import Cluster

        head = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        try:
            head.worker = head.add_node(num_cpus=1)  # type: ignore[attr-defined]
            head.wait_for_nodes()
            yield head
        finally:
            head.shutdown()


@pytest.fixture
def workspace(
    tmp_path: Path, server: CountingServerProcess, cluster: Any
) -> tuple[Path, CountingServerProcess, dict[str, str], list[str]]:
    """(folder, the server, the command's environment, the command's arguments but the models)."""
    data = replicate_discharge(CASES, tmp_path / "cases.jsonl", prefix="ray")
    args = [lean_task(tmp_path), "-T", f"data={data}", "-T", "min_turns=2", "-T", "max_turns=4"]
    args += ["--shards", str(SHARDS), "--address", cluster.address]
    args += [*ENV_FLAGS, "--log-buffer", "1", "--log-dir", str(tmp_path / "logs")]
    return tmp_path, server, environment(**server.env), args


def unit_samples(log_dir: Path) -> Counter[str]:
    """Sample id -> how many units' finished logs hold it. A unit's folder holds one finished log (``success``)
    and may keep an interrupted attempt's log beside it (Inspect never deletes a log another process
    started): that one is never finished, and readers read the finished one (:mod:`bedside.scale.merge`)."""
    counts: Counter[str] = Counter()
    finished: Counter[str] = Counter()
    for path in expand([str(log_dir)]):
        log = read_eval_log(path)
        if log.status == "success":
            finished[str(Path(path).parent)] += 1
            counts.update(str(s.id) for s in log.samples or [])
        else:
            assert log.status == "started", (path, log.status)
    assert set(finished.values()) == {1} and len(finished) == SHARDS, finished
    return counts


def flushed(log_dir: Path) -> dict[int, set[str]]:
    """Shard -> the samples its unit's log held on disk just now (Inspect rewrites the file at each flush)."""
    out: dict[int, set[str]] = {}
    for path in log_dir.rglob("*.eval"):
        try:
            with zipfile.ZipFile(path) as log:
                names = [n for n in log.namelist() if n.startswith("samples/")]
        except (OSError, zipfile.BadZipFile):
            continue
        shard = int(path.parent.name)
        out[shard] = {n.removeprefix("samples/").rsplit("_epoch_", 1)[0] for n in names}
    return out


def unit_process(shard: int) -> psutil.Process | None:
    """The Ray worker running ``shard``'s unit, among this test's descendants (process title
    ``ray::bedside-unit <task> <shard>/<shards>``)."""
    for proc in psutil.Process().children(recursive=True):
        try:
            if f"bedside-unit discharge_lean {shard}/{SHARDS}" in " ".join(proc.cmdline()):
                return proc
        except psutil.Error:
            continue
    return None


def wait_for(condition: Any, proc: Forked | subprocess.Popen[str], what: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        assert proc.poll() is None, f"the run ended before {what}: {proc.stdout.read() if proc.stdout else ''}"
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting until {what}")


def finish(proc: Forked | subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    return out


def calls_of(log_dir: Path) -> dict[str, list[str]]:
    """Sample id -> the request keys of its model calls (the server's request-log keys)."""
    run = read_run(str(log_dir))
    return {str(s.id): [event_request_key(e) for e in model_events(s)] for s in run.transcripts()}


def test_a_run_spreads_over_two_nodes_within_its_connection_budget(workspace) -> None:
    folder, server, env, args = workspace
    done = scale(*args, *loopback_arguments("budget-"), "--max-connections", "4", cwd=folder, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 at once on 2 slot(s); each unit max_connections 2 (budget 4 per model)" in done.stdout
    nodes = {line.split(" on node ")[1].split()[0] for line in done.stdout.splitlines() if " on node " in line}
    assert len(nodes) == 2, done.stdout  # both nodes ran units
    assert unit_samples(folder / "logs") == {f"ray-{i:03d}": 1 for i in range(1, CASES + 1)}
    # the budget is per model for the whole run: never more than 4 calls to one model at once, over both
    # nodes (2 units at once, 2 connections each; each unit alone would have been let open 4)
    peaks = {m: n for m, n in server.stats()["in_flight_peak"].items() if m.startswith("budget-")}  # this run's
    assert set(peaks) == {"budget-educator", "budget-patient", "budget-monitor", "budget-grader"}
    assert all(p <= 4 for p in peaks.values()) and max(peaks.values()) >= 2, peaks
    # and units did run at once (on the two nodes): two units' logs span overlapping times
    spans = sorted(
        (log.stats.started_at, log.stats.completed_at) for log in map(read_eval_log, expand([str(folder / "logs")]))
    )
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])), spans


def test_a_worker_killed_mid_run_is_resumed_by_ray_and_nothing_runs_twice(workspace) -> None:
    folder, server, env, args = workspace
    proc = start_scale(*args, *loopback_arguments(), "--max-connections", "8", cwd=folder, env=env)
    try:
        # a unit that has finished a sample and is still running it: kill its worker
        def running_with_a_finished_sample() -> tuple[int, set[str], psutil.Process] | None:
            for shard, samples in flushed(folder / "logs").items():
                worker = unit_process(shard) if samples else None
                if worker is not None and len(samples) < 8:
                    return shard, samples, worker
            return None

        shard, finished, worker = wait_for(running_with_a_finished_sample, proc, "a unit had finished a sample")
        before = len(server.requests())
        worker.send_signal(signal.SIGKILL)
        finish(proc)
    finally:
        forked.stop(proc)
    assert unit_samples(folder / "logs") == {f"ray-{i:03d}": 1 for i in range(1, CASES + 1)}
    # the samples the killed unit had finished were re-used: none of their calls was made again
    keys = calls_of(folder / "logs")
    again = Counter(r["key"] for r in server.requests()[before:])
    assert finished and all(not again[k] for sid in finished for k in keys[sid]), (shard, finished)


@pytest.mark.long
def test_a_crashed_command_run_again_runs_only_unfinished_samples(workspace) -> None:
    folder, server, env, args = workspace
    args = [*args, *loopback_arguments()]
    proc = start_scale(*args, cwd=folder, env=env)
    try:
        finished = wait_for(
            lambda: {s for samples in flushed(folder / "logs").values() for s in samples},
            proc,
            "a sample had finished",
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the command and its driver, as a crash or a lost login node
        proc.wait()
    assert len(finished) < CASES
    before = len(server.requests())
    again = scale(*args, cwd=folder, env=env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert unit_samples(folder / "logs") == {f"ray-{i:03d}": 1 for i in range(1, CASES + 1)}
    keys = calls_of(folder / "logs")
    rerun = Counter(r["key"] for r in server.requests()[before:])
    assert all(not rerun[k] for sid in finished for k in keys[sid]), finished
    # the run is complete: a third run makes no model call (in this process, --workers 1: the same run)
    requests = len(server.requests())
    at = args.index("--address")
    third = scale(*args[:at], *args[at + 2 :], "--workers", "1", cwd=folder, env=env)
    assert third.returncode == 0 and "every unit finished" in third.stdout, third.stdout[-3000:]
    assert len(server.requests()) == requests


def test_a_node_removed_mid_run_leaves_the_run_to_the_other_node(workspace, cluster) -> None:
    folder, server, env, args = workspace
    proc = start_scale(*args, *loopback_arguments(), cwd=folder, env=env)
    try:
        # both nodes busy (two units with a log), then the worker node leaves the cluster
        wait_for(lambda: len(list((folder / "logs").rglob("*.eval"))) >= 2, proc, "two units had started")
        cluster.remove_node(cluster.worker)
        out = finish(proc)
    finally:
        forked.stop(proc)
        cluster.worker = cluster.add_node(num_cpus=1)  # for the module's other tests
        cluster.wait_for_nodes()
    assert "every unit finished" in out
    assert unit_samples(folder / "logs") == {f"ray-{i:03d}": 1 for i in range(1, CASES + 1)}
    assert len(read_run(str(folder / "logs")).samples or []) == CASES
