"""A sharded run into an S3 log store: moto's S3-compatible server (started and stopped here) behind a
proxy that can make it unreachable; ``bedside scale ... --log-dir s3://bedside/run`` as a user runs it.

- the store unreachable for a few seconds while a unit runs: nothing lost, nothing twice, the run completes;
- every reader reads the run from the store as one run; ``inspect view`` lists the store's logs and opens one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import read_eval_log

from bedside.reporting.load import expand, read_run
from tests.conftest import bedside_command
from tests.reliability.helpers import replicate_discharge
from tests.scale.helpers import (
    CountingServerProcess,
    MotoServer,
    Outage,
    environment,
    lean_task,
    loopback_arguments,
    start_scale,
)

pytestmark = pytest.mark.eval

CASES = 6
RUN = "s3://bedside/run"
OUTAGE = 6.0  # seconds the store is unreachable


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """moto's server holding a run written through the proxy, which was down for :data:`OUTAGE` s while the
    run ran: ``{"output", "returncode", "running" (at the outage), "flushed_before" (samples in the store then)}``."""
    tmp = tmp_path_factory.mktemp("s3")
    data = replicate_discharge(CASES, tmp / "cases.jsonl", prefix="s3")
    with (
        MotoServer() as moto,
        Outage(moto.port) as proxy,
        CountingServerProcess(tmp / "requests.jsonl", latency=0.05) as server,
        pytest.MonkeyPatch.context() as env,
    ):
        for name, value in MotoServer.env(moto.url).items():
            env.setenv(name, value)  # this process reads the store directly, the run through the proxy
        args = [lean_task(tmp), "-T", f"data={data}", "-T", "min_turns=2", "-T", "max_turns=4", *loopback_arguments()]
        args += ["--shards", "2", "--workers", "1"]
        proc = start_scale(
            *args, "--log-buffer", "1", "--log-dir", RUN, cwd=tmp, env=environment(**server.env, **moto.env(proxy.url))
        )
        try:
            # the first unit has written its log: the store goes away for a while, then comes back
            deadline = time.monotonic() + 300
            while not [k for k in moto.keys("run/") if k.endswith(".eval")]:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
                time.sleep(0.1)
            flushed_before = _samples_in_store(moto)
            running = proc.poll() is None
            proxy.down()
            time.sleep(OUTAGE)
            proxy.up()
            output, _ = proc.communicate(timeout=600)
            yield {
                "output": output,
                "returncode": proc.returncode,
                "running": running,
                "flushed_before": flushed_before,
            }
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _samples_in_store(moto: MotoServer) -> int:
    """Samples in the logs the store holds now (each ``.eval`` is a zip of ``samples/<id>_epoch_<n>.json``)."""
    import io
    import zipfile

    count = 0
    for key in (k for k in moto.keys("run/") if k.endswith(".eval")):
        body = moto.client().get_object(Bucket=moto.bucket, Key=key)["Body"].read()
        with zipfile.ZipFile(io.BytesIO(body)) as log:
            count += sum(1 for name in log.namelist() if name.startswith("samples/"))
    return count


def test_a_store_unreachable_for_seconds_loses_nothing(store: dict[str, Any]) -> None:
    assert store["running"] and store["flushed_before"] < CASES  # the store went away in the middle of the run
    assert store["returncode"] == 0, store["output"][-3000:]
    assert "every unit finished" in store["output"]
    units = [read_eval_log(p) for p in expand([RUN])]
    assert len(units) == 2 and all(u.status == "success" for u in units), [u.status for u in units]
    samples = [str(s.id) for u in units for s in u.samples or []]
    assert sorted(samples) == [f"s3-{i:03d}" for i in range(1, CASES + 1)]  # every sample, once
    assert all(s.scores for u in units for s in u.samples or [])


def test_every_reader_reads_the_run_from_the_store_as_one_run(
    store: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = read_run(RUN)
    assert run.location.endswith(".shards") and len(run.samples or []) == CASES
    for args in (["strata", RUN], ["audit", RUN], ["report", RUN, "--out", str(tmp_path / "report")]):
        done = bedside_command(*args)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "report" / "index.html").exists()
    # re-judged from the store, its samples read one at a time, into one local log (Inspect builds the run's models
    # from the log, none of them called: the loopback provider's key and address)
    monkeypatch.setenv("LOOPBACK_API_KEY", "x")
    monkeypatch.setenv("LOOPBACK_BASE_URL", "http://127.0.0.1:9/v1")
    done = bedside_command("rescore", RUN, "--grader", "bedside/scripted", "--out", str(tmp_path / "judged"))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    [judged] = (tmp_path / "judged").iterdir()
    assert judged.suffix == ".eval" and len(read_eval_log(str(judged)).samples or []) == CASES


def test_inspect_view_lists_the_stores_logs_and_opens_one(store: dict[str, Any], tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inspect = str(Path(sys.executable).parent / "inspect")
    view = subprocess.Popen(
        [inspect, "view", "--log-dir", RUN, "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        listed = _get(f"http://127.0.0.1:{port}/api/log-files", view)
        names = sorted(entry["name"] for entry in listed["files"])
        assert names == sorted(expand([RUN])) and all(n.startswith(f"{RUN}/") for n in names)
        log = _get(f"http://127.0.0.1:{port}/api/logs/{urllib.parse.quote(names[0], safe='')}", view)
        assert log["status"] == "success" and log["samples"]
    finally:
        view.terminate()
        view.wait(timeout=30)


def _get(url: str, server: subprocess.Popen[bytes], timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return json.loads(response.read())
        except OSError:
            assert server.poll() is None, "inspect view exited"
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
