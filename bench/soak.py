"""Soak run (``make soak``; not part of CI): DischargeBench at full size and high
concurrency through Inspect's ``openai-api`` provider against the loopback server, with faults on.

    .venv/bin/python bench/soak.py                       # 477 cases, 5 % faults, 96 samples at once
    .venv/bin/python bench/soak.py --n 96 --fault-rate 0.1 --out logs/soak.json
    make soak SOAK_ARGS="--n 120"

The loopback server (``python -m tests.loopback``) runs in its own process with every transport
and content fault kind at ``--fault-rate`` (``--fault-seed``), ``--latency`` ± ``--jitter`` per reply
and a request log; the eval runs in this process. Cases are the 24 demo cases replicated with new
ids (no patient data). Retries: the ``openai`` client's own are off (``--client-retries``), so each
retry is one of Inspect's, bounded by ``--max-retries``, with a fixed ``--retry-wait`` between
attempts (Inspect's default backoff starts at 3 s), and every role gets ``--attempt-timeout``
(Inspect passes an eval's ``attempt_timeout`` to the model under test only).

Reported at the end (and written to ``--out`` as JSON): samples in the log, scored and with an end
reason (by end reason), sample errors, model calls and failed attempts (= retries) by cause, the
server's request and fault counts, the wall-clock time, peak RSS of the eval process and of the
server, and open connections at the end (the server's count and the eval process's TCP sockets),
with their peaks sampled every 0.5 s during the run. The run fails (exit status 1) if a sample is
missing, errored or unscored, or if a call was retried more than ``--max-retries`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench import common  # noqa: E402

ROLES = ("patient", "monitor", "grader")
LOOPBACK = "openai-api/loopback"


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size now (``VmRSS``), in MB; 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak resident set size (``VmHWM``), in MB; 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def open_sockets(pid: int | str = "self") -> int:
    """File descriptors of ``pid`` that are sockets (the eval process's open connections)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return -1
    count = 0
    for fd in fds:
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


class Server:
    """``python -m tests.loopback`` in a child process."""

    def __init__(self, args: argparse.Namespace, request_log: Path) -> None:
        kinds = "http_500,http_503,rate_limit,timeout,reset,truncated,not_json,missing_fields"
        command = [
            sys.executable,
            "-m",
            "tests.loopback",
            "--port",
            "0",
            "--latency",
            str(args.latency),
            "--jitter",
            str(args.jitter),
            "--hang",
            str(args.hang),
            "--retry-after",
            str(args.retry_after),
            "--fault-seed",
            str(args.fault_seed),
            "--request-log",
            str(request_log),
        ]
        if args.fault_rate > 0:
            command += ["--fault", f"{kinds}:{args.fault_rate}"]
        self.proc = subprocess.Popen(
            command, cwd=common.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        first = self.proc.stdout.readline() if self.proc.stdout else ""
        if "http://" not in first:
            self.proc.kill()
            raise RuntimeError(f"the loopback server did not start: {first}")
        self.base_url = first.split()[-1]

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/stats", timeout=30) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Sampler(threading.Thread):
    """Peaks of RSS and open connections, sampled every ``period`` seconds."""

    def __init__(self, server: Server, period: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.server, self.period = server, period
        self.peaks = {"eval_rss_mb": 0.0, "server_rss_mb": 0.0, "eval_sockets": 0, "server_connections": 0}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.period):
            self.sample()

    def sample(self) -> None:
        p = self.peaks
        p["eval_rss_mb"] = max(p["eval_rss_mb"], rss_mb())
        p["server_rss_mb"] = max(p["server_rss_mb"], rss_mb(self.server.proc.pid))
        p["eval_sockets"] = max(p["eval_sockets"], open_sockets())
        try:
            p["server_connections"] = max(p["server_connections"], self.server.stats()["open_connections"])
        except OSError:
            pass


def model(role: str, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from inspect_ai.model import GenerateConfig, get_model
    from tenacity import wait_fixed

    config = GenerateConfig(attempt_timeout=args.attempt_timeout) if role != "educator" else GenerateConfig()
    m = get_model(f"{LOOPBACK}/{role}", memoize=False, config=config, max_retries=args.client_retries)
    m.api.retry_wait = lambda: wait_fixed(args.retry_wait)  # type: ignore[method-assign]
    return m


def task(data: Path, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from inspect_ai import task_with

    from bedside.scorers.discharge.conversation_quality import conversation_quality
    from bedside.scorers.discharge.encounter_outcome import encounter_outcome
    from bedside.scorers.discharge.topic_checklist import topic_checklist
    from bedside.tasks.discharge import discharge

    base = discharge(data=str(data), min_turns=args.min_turns, max_turns=args.max_turns, cache_references=False)
    if args.all_scorers:
        return base
    return task_with(base, scorer=[encounter_outcome(), conversation_quality(), topic_checklist()])


def summarise(log_location: str, max_retries: int) -> dict[str, Any]:
    """What the log holds, read one sample at a time."""
    from inspect_ai.log import read_eval_log, read_eval_log_samples

    header = read_eval_log(log_location, header_only=True)
    reasons: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    calls = errors = unscored = 0
    longest = 0
    samples = 0
    for sample in read_eval_log_samples(log_location, all_samples_required=False):
        samples += 1
        errors += sample.error is not None
        outcome = (sample.scores or {}).get("encounter_outcome")
        unscored += outcome is None or not outcome.answer
        reasons[sample.store.get("EncounterStore:end_reason", "") or "<none>"] += 1
        run: dict[str, int] = {}
        for e in sample.events:
            if e.event != "model":
                continue
            calls += 1
            key = f"{e.role}|{e.config.seed}|" + "\x00".join(m.text for m in e.input)
            if e.error:
                text = e.error
                cause = (
                    "http_500"
                    if "Error code: 500" in text
                    else "http_503"
                    if "Error code: 503" in text
                    else "rate_limit"
                    if "Error code: 429" in text
                    else "connection"
                    if "Connection error" in text
                    else "attempt_timeout"
                    if "AttemptTimeout" in text
                    else "other"
                )
                failed[cause] += 1
                run[key] = run.get(key, 0) + 1
                longest = max(longest, run[key])
            else:
                run.pop(key, None)
    return {
        "status": header.status,
        "samples": samples,
        "completed_samples": header.results.completed_samples if header.results else 0,
        "sample_errors": errors,
        "unscored_samples": unscored,
        "end_reasons": dict(reasons),
        "model_calls": calls,
        "retries": sum(failed.values()),
        "retries_by_cause": dict(failed),
        "longest_retry_run": longest,
        "retry_bound_held": longest <= max_retries + 1,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/soak.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=477, help="cases (demo cases replicated; default 477)")
    parser.add_argument("--max-samples", type=int, default=96, help="samples at once (default 96)")
    parser.add_argument("--max-connections", type=int, default=96, help="connections per model (default 96)")
    parser.add_argument("--min-turns", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=12)
    parser.add_argument(
        "--all-scorers", action="store_true", help="every DischargeBench scorer (loads the embedding model)"
    )
    parser.add_argument("--fault-rate", type=float, default=0.05, help="share of requests faulted (default 0.05)")
    parser.add_argument("--fault-seed", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per reply (default 0.05)")
    parser.add_argument("--jitter", type=float, default=0.02)
    parser.add_argument("--hang", type=float, default=10.0, help="seconds a 'timeout' fault stalls (default 10)")
    parser.add_argument("--retry-after", type=float, default=0.2, help="Retry-After of a 429 (default 0.2)")
    parser.add_argument("--attempt-timeout", type=int, default=5, help="per-attempt timeout, every role (default 5)")
    parser.add_argument("--max-retries", type=int, default=6, help="Inspect's retries per call (default 6)")
    parser.add_argument("--retry-wait", type=float, default=0.5, help="seconds between Inspect's retries (default 0.5)")
    parser.add_argument("--client-retries", type=int, default=0, help="the openai client's own retries (default 0)")
    parser.add_argument("--log-dir", default=None, help="eval log folder (default: a temporary folder)")
    parser.add_argument("--out", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)

    from inspect_ai import eval

    work = Path(tempfile.mkdtemp(prefix="bedside-soak-"))
    data = common.replicate_discharge(args.n, work / "cases.jsonl")
    log_dir = Path(args.log_dir) if args.log_dir else work / "logs"
    server = Server(args, work / "requests.jsonl")
    os.environ.update(
        {"LOOPBACK_API_KEY": "soak", "LOOPBACK_BASE_URL": server.base_url, "BEDSIDE_LOOPBACK_URL": server.base_url}
    )
    sampler = Sampler(server)
    try:
        print(
            f"soak: {args.n} cases, {args.max_samples} at once, faults {args.fault_rate:.0%} "
            f"(seed {args.fault_seed}), server {server.base_url}",
            flush=True,
        )
        sampler.start()
        start = time.perf_counter()
        [log] = eval(
            task(data, args),
            model=model("educator", args),
            model_roles={r: model(r, args) for r in ROLES},
            log_dir=str(log_dir),
            display="none",
            max_samples=args.max_samples,
            max_connections=args.max_connections,
            max_retries=args.max_retries,
            attempt_timeout=args.attempt_timeout,
            fail_on_error=False,
        )
        wall = time.perf_counter() - start
        sampler.done.set()
        sampler.join()
        time.sleep(1.0)  # let closed connections settle before counting what is left open
        sampler.sample()
        stats = server.stats()
        end = {"server_open_connections": stats["open_connections"], "eval_open_sockets": open_sockets()}
    finally:
        sampler.done.set()
        server_peak = peak_rss_mb(server.proc.pid)
        server.stop()
    summary = summarise(log.location, args.max_retries)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("out",)},
        "machine": common.machine(),
        "loadavg_end": common.loadavg(),
        "log": log.location,
        "wall_s": round(wall, 1),
        **summary,
        "server": {
            "requests": stats["requests"],
            "answered": stats["answered"],
            "faults": stats["faults"],
            "peak_connections": stats["peak_connections"],
        },
        "peak_rss_mb": {
            "eval": round(max(common.peak_rss_mb(), sampler.peaks["eval_rss_mb"]), 1),
            "server": round(max(server_peak, sampler.peaks["server_rss_mb"]), 1),
        },
        "cpu_s": {"eval": round(usage.ru_utime + usage.ru_stime, 1)},
        "open_connections_end": end,
        "open_connections_peak": {
            "server": sampler.peaks["server_connections"],
            "eval_sockets": sampler.peaks["eval_sockets"],
        },
    }
    ok = (
        summary["samples"] == args.n
        and summary["sample_errors"] == 0
        and summary["unscored_samples"] == 0
        and summary["retry_bound_held"]
    )
    result["ok"] = ok
    print(json.dumps(result, indent=1), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
