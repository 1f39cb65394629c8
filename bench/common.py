"""Shared pieces of the scale benchmark (``bench/scale.py``): the loopback server in its own process,
synthetic full-size data sets, machine facts and the analysis of an eval log (critical path, calls
and tokens per role per case).

The loopback server (:mod:`tests.loopback.server`) runs in a *child process*, so the benchmark process's
CPU time and peak RSS are the harness's alone (Inspect + bedside + the ``openai`` client), as against
a remote API or vLLM server. The child sleeps, for each request, ``latency ± jitter`` drawn as a
function of the request (model name, seed, message texts), so the benchmark recomputes the delay of
every logged ``ModelEvent`` from its input, and checks the match against the delays the server
recorded. The critical path is computed from the latencies the server actually imposed, not from
the event durations (which include the harness's own overhead).
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import multiprocessing as mp
import os
import platform
import resource
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEMO_DISCHARGE = REPO / "datasets" / "discharge" / "demo.jsonl"
DEMO_MEDSP = REPO / "datasets" / "medsp" / "demo"
CPB_DATA = REPO.parent / "shared" / "data" / "cpb-bench"
LOOPBACK = "openai-api/loopback"


# ---------------------------------------------------------------------------------------------
# the loopback server in a child process

_delay_of_request: contextvars.ContextVar[float] = contextvars.ContextVar("bench_delay", default=0.0)
_key_of_request: contextvars.ContextVar[str] = contextvars.ContextVar("bench_key", default="")


def request_key(model: str, seed: int, texts: list[str]) -> str:
    """What identifies a request for its delay: the model name, the seed and the message texts."""
    h = hashlib.sha256(f"{model}|{seed}|".encode())
    for text in texts:
        h.update(text.encode())
        h.update(b"\x00")
    return h.hexdigest()


def request_delay(key: str, latency: float, jitter: float) -> float:
    """``latency`` ± ``jitter``, uniform, but a function of the request (so the benchmark can tell the
    delay of every logged call from the ModelEvent alone: Inspect keeps the raw API response of only
    the first few calls per model)."""
    u = int(key[:12], 16) / float(16**12)
    return max(0.0, latency + jitter * (2 * u - 1))


def event_key(event: Any) -> str:
    """:func:`request_key` of a ModelEvent (the model name after ``openai-api/loopback/``)."""
    return request_key(event.model.rsplit("/", 1)[-1], int(event.config.seed or 0), [m.text for m in event.input])


def _serve(conn: Any, latency: float, jitter: float, options: dict[str, Any], port: int) -> None:  # child process
    from tests.loopback.server import LoopbackServer

    delays: dict[str, float] = {}
    handling: dict[str, float] = {}

    class TimedServer(LoopbackServer):
        """Sleeps a delay that is a function of the request and remembers it (by request key), and
        how long the handler took besides the sleep (reading, answering, writing the reply)."""

        async def _chat_completions(self, http):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            response = await super()._chat_completions(http)
            key = _key_of_request.get()
            if key:
                handling[key] = time.perf_counter() - start - delays.get(key, 0.0)
            return response

        async def _intercept(self, request):  # type: ignore[no-untyped-def]
            key = request_key(request.model, request.seed, [m.text for m in request.messages])
            value = request_delay(key, self.latency, self.jitter)
            delays[key] = value
            _key_of_request.set(key)
            _delay_of_request.set(value)  # each aiohttp request runs in its own task (own context)
            return None

        def _delay(self) -> float:
            return _delay_of_request.get()

    server = TimedServer(port=port, latency=latency, jitter=jitter, options=options)
    with server:
        conn.send(server.base_url)
        conn.recv()  # "stop"
        usage = resource.getrusage(resource.RUSAGE_SELF)
        conn.send(
            {
                "delays": delays,
                "handling": handling,
                "calls": dict(server.calls),
                "routes": {f"{m}|{p}": n for (m, p), n in server.routes.items()},
                "total_calls": server.total_calls,
                "cpu_s": usage.ru_utime + usage.ru_stime,
            }
        )


@dataclass
class ServerStats:
    delays: dict[str, float] = field(default_factory=dict)
    handling: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    routes: dict[str, int] = field(default_factory=dict)
    total_calls: int = 0
    cpu_s: float = 0.0


@contextmanager
def loopback_process(
    latency: float = 0.0, jitter: float = 0.0, options: dict[str, Any] | None = None, port: int = 0
) -> Iterator[tuple[str, ServerStats]]:
    """(base_url, stats) of a loopback server in a child process; ``stats`` is filled on exit. A fixed
    ``port`` keeps the base URL (part of Inspect's cache key) the same across runs."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, latency, jitter, options or {}, port), daemon=True)
    proc.start()
    stats = ServerStats()
    try:
        if not parent.poll(120):
            raise RuntimeError("the loopback server process did not start")
        base_url = parent.recv()
        yield base_url, stats
    finally:
        if proc.is_alive():
            parent.send("stop")
            if parent.poll(120):
                got = parent.recv()
                stats.delays, stats.handling = got["delays"], got["handling"]
                stats.calls, stats.routes = got["calls"], got["routes"]
                stats.total_calls, stats.cpu_s = got["total_calls"], got["cpu_s"]
        proc.join(timeout=30)
        if proc.is_alive():
            proc.terminate()


def loopback_model(role: str, base_url: str):  # type: ignore[no-untyped-def]
    """``openai-api/loopback/<role>`` against ``base_url`` (not memoized: Inspect memoizes by string);
    ``base_url`` becomes the loopback test channel (``BEDSIDE_LOOPBACK_URL``), so the call tags travel."""
    import os

    from inspect_ai.model import get_model

    os.environ["BEDSIDE_LOOPBACK_URL"] = base_url
    return get_model(f"{LOOPBACK}/{role}", memoize=False, base_url=base_url, api_key="bench")


# ---------------------------------------------------------------------------------------------
# synthetic full-size data (replicas of the shipped demo sets with new ids; no MIMIC data)


def replicate_discharge(n: int, path: Path) -> Path:
    """``n`` DischargeBench cases cycled from the 24 demo cases, each with a new id and a replica line
    in its note (so that the note-only judge calls of two replicas are different prompts, as for
    distinct real cases, and the reference cache cannot serve one replica from another)."""
    demo = [json.loads(line) for line in DEMO_DISCHARGE.read_text().splitlines() if line.strip()]
    with path.open("w") as out:
        for i in range(n):
            case = dict(demo[i % len(demo)])
            source = case["case_id"]
            case["case_id"] = f"bench-{i + 1:04d}"
            first, _, rest = case["discharge_note"].partition("\n")
            case["discharge_note"] = f"{first}\nBench replica {i + 1} of {source}.\n{rest}"
            out.write(json.dumps(case) + "\n")
    return path


def replicate_medsp(n: int, root: Path) -> Path:
    """``n`` MedSP scenarios cycled from the 7 demo scenarios: each replica is a new case folder
    (``bench_<k>_<demo case>``) with its scenario packets and its rubric (``case_id`` rewritten)."""
    scenarios = sorted(
        (case_dir, scen.name)
        for case_dir in DEMO_MEDSP.iterdir()
        if case_dir.is_dir()
        for scen in case_dir.iterdir()
        if scen.is_dir() and scen.name.startswith("scenario")
    )
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        case_dir, scenario = scenarios[i % len(scenarios)]
        new_id = f"bench{i + 1:03d}_{case_dir.name}"
        target = root / new_id
        target.mkdir(exist_ok=True)
        shutil.copytree(case_dir / scenario, target / scenario)
        if (case_dir / "metadata.json").exists():
            shutil.copy(case_dir / "metadata.json", target / "metadata.json")
        rubric = json.loads((case_dir / f"{case_dir.name}_{scenario}.json").read_text())
        rubric["case_id"] = new_id
        (target / f"{new_id}_{scenario}.json").write_text(json.dumps(rubric, indent=1))
    return root


# ---------------------------------------------------------------------------------------------
# machine facts


def machine() -> dict[str, Any]:
    import inspect_ai

    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        rev = ""
    return {
        "cores": os.cpu_count(),
        "ram_gb": round(mem_kb / 1024 / 1024, 1),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "inspect_ai": inspect_ai.__version__,
        "platform": platform.platform(),
        "git": rev,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def peak_rss_mb() -> float:
    """Peak resident set size of this process (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------------------------
# log analysis


def model_events(sample: Any) -> list[Any]:
    return [e for e in sample.events if e.event == "model"]


def critical_path(events: list[Any], weight: Any) -> tuple[float, int]:
    """(seconds, calls) of the heaviest chain of sequential calls of one sample: call B follows call
    A when A completed before B started (calls that overlap in time ran concurrently). A call weighs
    ``weight(event)`` (0 for a cache read, which never reached the server)."""
    spans = []
    for e in events:
        if e.completed is None:
            continue
        spans.append((e.timestamp.timestamp(), e.completed.timestamp(), 0.0 if e.cache == "read" else weight(e)))
    spans.sort()
    best: list[tuple[float, int]] = []
    for i, (start, _, w) in enumerate(spans):
        base = max((best[j] for j in range(i) if spans[j][1] <= start), default=(0.0, 0))
        best.append((base[0] + w, base[1] + 1))
    return max(best, default=(0.0, 0))


def role_name(event: Any) -> str:
    return event.role or "model under test"


def protocol_name(event: Any) -> str:
    from bedside.protocols import tag_of

    tag = tag_of(event.input)
    return tag.name if tag is not None else "<untagged>"


@dataclass
class LogAnalysis:
    """What one eval log says about the run, accumulated one sample at a time."""

    nominal: float
    delays: dict[str, float]
    handling: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    errors: int = 0
    calls: int = 0
    cache_reads: int = 0
    delays_matched: int = 0
    served_delay_sum: float = 0.0
    paths: list[tuple[float, int]] = field(default_factory=list)
    server_paths: list[tuple[float, int]] = field(default_factory=list)
    handling_sum: float = 0.0
    # wall-clock spent in a call beyond the server's sleep (client side + server handling), summed
    in_call_sum: float = 0.0
    sample_times: list[float] = field(default_factory=list)  # Inspect's sample.total_time
    # per sample: role (or protocol) -> [calls, input tokens, output tokens, cache reads, cache writes]
    roles: list[dict[str, list[int]]] = field(default_factory=list)
    protocols: list[dict[str, list[int]]] = field(default_factory=list)
    end_reasons: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    turns: list[int] = field(default_factory=list)

    def add(self, sample: Any) -> None:
        events = model_events(sample)
        self.samples += 1
        self.errors += int(sample.error is not None)
        self.calls += len(events)
        keys = {id(e): event_key(e) for e in events}
        self.paths.append(critical_path(events, lambda e: self.delays.get(keys[id(e)], self.nominal)))
        self.server_paths.append(
            critical_path(
                events, lambda e: self.delays.get(keys[id(e)], self.nominal) + self.handling.get(keys[id(e)], 0.0)
            )
        )
        by_role: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
        by_protocol: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
        for e in events:
            read = e.cache == "read"
            self.cache_reads += int(read)
            if not read:
                delay = self.delays.get(keys[id(e)])
                if delay is not None:
                    self.delays_matched += 1
                    self.served_delay_sum += delay
                    self.handling_sum += self.handling.get(keys[id(e)], 0.0)
                    if e.completed is not None:
                        self.in_call_sum += (e.completed - e.timestamp).total_seconds() - delay
            usage = e.output.usage if e.output is not None else None
            for row in (by_role[role_name(e)], by_protocol[protocol_name(e)]):
                row[0] += 1
                row[1] += usage.input_tokens if usage else 0
                row[2] += usage.output_tokens if usage else 0
                row[3] += int(read)
                row[4] += int(e.cache == "write")
        self.roles.append(dict(by_role))
        self.protocols.append(dict(by_protocol))
        if sample.total_time is not None:
            self.sample_times.append(float(sample.total_time))
        store = sample.store or {}
        reason = store.get("EncounterStore:end_reason") or (sample.metadata or {}).get("end_reason")
        if reason:
            self.end_reasons[str(reason)] += 1
        history = store.get("EncounterStore:history")
        if isinstance(history, list):
            self.turns.append(len(history))

    def summary(self, lanes: int) -> dict[str, Any]:
        def table(per_sample: list[dict[str, list[int]]]) -> dict[str, dict[str, Any]]:
            out = {}
            for key in sorted({k for row in per_sample for k in row}):
                rows = [row.get(key, [0, 0, 0, 0, 0]) for row in per_sample]
                calls, tin, tout = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
                out[key] = {
                    "calls_mean": mean(calls),
                    "calls_max": max(calls),
                    "calls_total": sum(calls),
                    "input_tokens_mean": mean(tin),
                    "input_tokens_max": max(tin),
                    "output_tokens_mean": mean(tout),
                    "output_tokens_max": max(tout),
                    "tokens_total": sum(tin) + sum(tout),
                    "cache_reads": sum(r[3] for r in rows),
                    "cache_writes": sum(r[4] for r in rows),
                }
            return out

        longest = max(self.paths, default=(0.0, 0))
        served = self.calls - self.cache_reads
        return {
            "samples": self.samples,
            "errors": self.errors,
            "calls": self.calls,
            "served_calls": served,
            "cache_reads": self.cache_reads,
            "cache_writes": sum(r[4] for row in self.roles for r in row.values()),
            "delays_matched": self.delays_matched,
            "mean_delay": self.served_delay_sum / self.delays_matched if self.delays_matched else self.nominal,
            "critical_path_max_s": longest[0],
            "critical_path_max_calls": longest[1],
            "critical_path_mean_s": mean(p[0] for p in self.paths) if self.paths else 0.0,
            "critical_path_calls": sorted({p[1] for p in self.paths}),
            # wall-clock lower bounds with `lanes` samples at a time (max_samples):
            # no sample is faster than its chain, so lanes x wall >= the sum of the chains
            "lane_bound_s": sum(p[0] for p in self.paths) / max(lanes, 1),
            # the same with each call weighing what the server took in all (sleep + handling)
            "server_handling_mean_s": self.handling_sum / self.delays_matched if self.delays_matched else 0.0,
            "critical_path_server_max_s": max((p[0] for p in self.server_paths), default=0.0),
            # where a sample's time goes beyond its chain of latencies
            "in_call_overhead_mean_s": self.in_call_sum / self.delays_matched if self.delays_matched else 0.0,
            "sample_time_mean_s": mean(self.sample_times) if self.sample_times else None,
            "sample_time_sum_s": sum(self.sample_times),
            "lane_bound_server_s": sum(p[0] for p in self.server_paths) / max(lanes, 1),
            # the formula: total calls x latency / concurrency (not a bound when a sample
            # makes calls in parallel, which the comprehension and judge calls do)
            "calls_latency_over_concurrency_s": (
                self.served_delay_sum if self.delays_matched == served else served * self.nominal
            )
            / max(lanes, 1),
            "roles": table(self.roles),
            "protocols": table(self.protocols),
            "end_reasons": dict(self.end_reasons),
            "turns_mean": mean(self.turns) if self.turns else None,
            "turns_max": max(self.turns) if self.turns else None,
        }


def analyse_log(
    location: str,
    delays: dict[str, float],
    nominal: float,
    lanes: int,
    each: Any = None,
    handling: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Stream the samples of a log (one in memory at a time) into a :class:`LogAnalysis` summary;
    ``each(sample)`` is called for every sample too. Adds the log's ``role_usage`` and ``model_usage``."""
    from inspect_ai.log import read_eval_log, read_eval_log_samples

    analysis = LogAnalysis(nominal=nominal, delays=delays, handling=handling or {})
    for sample in read_eval_log_samples(location, all_samples_required=False, resolve_attachments=True):
        analysis.add(sample)
        if each is not None:
            each(sample)
    header = read_eval_log(location, header_only=True)
    out = analysis.summary(lanes)
    stats = header.stats
    out["role_usage"] = {k: v.model_dump(exclude_none=True) for k, v in (stats.role_usage or {}).items()}
    out["model_usage"] = {k: v.model_dump(exclude_none=True) for k, v in (stats.model_usage or {}).items()}
    out["status"] = header.status
    out["task"] = header.eval.task
    return out


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str))
