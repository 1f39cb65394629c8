"""Helpers of the sharded-run tests: the ``bedside scale`` command as a user runs it, the counting loopback
server (:mod:`tests.scale.serve`) in its own process, a lean DischargeBench task file, and what a run's logs
hold."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log

from bedside.reporting.load import expand, read_runs
from bedside.scale.shards import shard_info
from tests import forked
from tests.conftest import REPO

BEDSIDE = str(Path(sys.executable).parent / "bedside")
LOOPBACK = "openai-api/loopback"
ROLES = ("patient", "monitor", "grader")

#: DischargeBench with its judge scorers that need no embedding model (a worker starts quicker), short sessions
LEAN_TASK = """
from inspect_ai import task, task_with

from bedside.scorers.discharge.conversation_quality import conversation_quality
from bedside.scorers.discharge.encounter_outcome import encounter_outcome
from bedside.scorers.discharge.topic_checklist import topic_checklist
from bedside.tasks.discharge import discharge


@task
def discharge_lean(data: str | None = None, min_turns: int = 4, max_turns: int = 8):
    base = discharge(data=data, min_turns=min_turns, max_turns=max_turns, cache_references=False)
    return task_with(base, scorer=[encounter_outcome(), conversation_quality(), topic_checklist()])
"""


def lean_task(folder: Path) -> str:
    """The lean task file in ``folder``; returns its name (a path relative to ``folder``)."""
    (folder / "lean_task.py").write_text(LEAN_TASK)
    return "lean_task.py"


def loopback_arguments(prefix: str = "") -> list[str]:
    """``--model`` and ``--model-role`` of DischargeBench against the loopback server; the model names (free:
    they only label the calls) start with ``prefix``, so that the server counts one run's calls apart."""
    roles = [arg for role in ROLES for arg in ("--model-role", f"{role}={LOOPBACK}/{prefix}{role}")]
    return ["--model", f"{LOOPBACK}/{prefix}educator", *roles]


def ray_environment() -> dict[str, str]:
    """Ray for a test: token authentication with a token of its own (nothing written to $HOME), no usage
    statistics sent."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16), "RAY_USAGE_STATS_ENABLED": "0"}


def scale(*args: str, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``bedside scale ARGS`` as a user runs it (its own process, forked from the warm server: :mod:`tests.forked`)."""
    return forked.run([BEDSIDE, "scale", *args], cwd=cwd, env=env, timeout=timeout)


def start_scale(*args: str, cwd: Path, env: dict[str, str]) -> forked.Forked | subprocess.Popen[str]:
    """``bedside scale ARGS`` started, in a process group of its own (killed with the group), its output and
    errors merged (forked from the warm server: :mod:`tests.forked`)."""
    return forked.start([BEDSIDE, "scale", *args], cwd=cwd, env=env, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[Any]) -> None:
    """Terminate a server process, killing it if it has not exited within 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


class CountingServerProcess:
    """:mod:`tests.scale.serve` in a child process, with a request log; a context manager."""

    def __init__(self, request_log: Path, latency: float = 0.0) -> None:
        self.request_log = request_log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.scale.serve", str(request_log), str(latency)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        first = self.proc.stdout.readline() if self.proc.stdout else ""
        if "http://" not in first:
            self.proc.kill()
            raise RuntimeError(f"the counting loopback server did not start: {first}")
        self.base_url = first.strip()

    @property
    def env(self) -> dict[str, str]:
        return {
            "LOOPBACK_API_KEY": "scale-test",
            "LOOPBACK_BASE_URL": self.base_url,
            "BEDSIDE_LOOPBACK_URL": self.base_url,
        }

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.base_url.removesuffix('/v1')}/stats", timeout=30) as response:
            return json.loads(response.read())

    def requests(self) -> list[dict[str, Any]]:
        if not self.request_log.exists():
            return []
        return [json.loads(line) for line in self.request_log.read_text().splitlines() if line.strip()]

    def __enter__(self) -> CountingServerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        stop(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()


def unit_logs(log_dir: str | Path) -> list[EvalLog]:
    """Every log under ``log_dir`` (headers), units of sharded runs and others."""
    return [read_eval_log(path, header_only=True) for path in expand([str(log_dir)])]


def run_samples(log_dir: str | Path) -> Counter[tuple[str, int]]:
    """(sample id, epoch) -> how many logs under ``log_dir`` hold it, over every unit's current log."""
    counts: Counter[tuple[str, int]] = Counter()
    for run in read_runs([str(log_dir)], say=False):
        for sample in run.samples:
            counts[str(sample.id), sample.epoch] += 1
    return counts


def shards_of(log_dir: str | Path) -> list[tuple[int, str]]:
    """(shard, status) of every unit log under ``log_dir``."""
    out = []
    for log in unit_logs(log_dir):
        info = shard_info(log)
        assert info is not None, log.location
        out.append((info.shard, log.status))
    return sorted(out)


def environment(**more: str) -> dict[str, str]:
    return {**os.environ, **more}


class Outage:
    """A TCP proxy in front of a server that can be taken down for a while: ``down()`` closes its port
    (connections refused) and cuts the connections open through it; ``up()`` opens the same port again.
    What a store that is unreachable for a few seconds looks like to its clients. A context manager."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._open: list[Any] = []
        self._lock = threading.Lock()
        self._listener: Any = None
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            open_now, self._open = self._open, []
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, listener: Any) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by down()
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: Any, target: Any) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.close()
                except OSError:
                    pass

    def __enter__(self) -> Outage:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.down()


class MotoServer:
    """moto's S3-compatible server (``moto_server``) on a free port of 127.0.0.1, in a child process, with one
    bucket; a context manager. ``env(url)``: the variables that point boto3, s3fs and Inspect at ``url``."""

    def __init__(self, bucket: str = "bedside") -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        moto = str(Path(sys.executable).parent / "moto_server")
        self.proc = subprocess.Popen(
            [moto, "-H", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url, timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        self.bucket = bucket
        self.client().create_bucket(Bucket=bucket)

    @staticmethod
    def env(url: str) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": url,
            "AWS_ACCESS_KEY_ID": "bedside-test",
            "AWS_SECRET_ACCESS_KEY": "bedside-test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> Any:
        import boto3

        env = self.env(self.url)
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
        )

    def keys(self, prefix: str = "") -> list[str]:
        found = self.client().list_objects_v2(Bucket=self.bucket, Prefix=prefix).get("Contents", [])
        return sorted(obj["Key"] for obj in found)

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        stop(self.proc)
