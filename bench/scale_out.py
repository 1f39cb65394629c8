"""One process against N workers: DischargeBench calls/s and sessions/h against the loopback server at a
fixed latency, at the same total concurrency, and what bounds each.

    .venv/bin/python bench/scale_out.py all       # 96 cases, 16 and 32 lanes, 0.3 s a call, 2 workers
    .venv/bin/python bench/scale_out.py all --n 128 --lanes 32,64 --latency 0.3 --workers 2 --repeat 2

For each total concurrency of ``--lanes`` (samples at once over the whole run), two runs of the same cases
(each step in a process of its own, so that its CPU and memory are its own; the loopback server in another):

- ``one``: one Inspect process, ``eval()`` of DischargeBench with ``max_samples`` = lanes (as ``inspect
  eval``): wall-clock, calls/s, sessions/h, CPU per call, peak RSS;
- ``ray``: ``bedside scale``'s planner and Ray engine with ``--workers`` local workers, shards = workers and
  the same run-wide ``--max-samples`` (each of N units runs lanes/N samples at once).

In both, every 0.5 s (psutil): the CPU and RSS of the step's process and all its descendants (each Ray
worker; Ray's GCS, raylet, dashboard head, agents and monitors, each in its group), of the loopback server,
and the machine's busy CPU; so each run reports the cores each process used over the span, the rest of the
machine (other jobs) and what was idle, and, per process, its event loop's share of its CPU (per thread).
``--repeat N`` runs the two back to back N times, their order alternating, and reports a ratio per
repetition and their median.

``all`` starts the loopback server (``--latency``; ``--jitter``, none unless asked), runs ``one`` and ``ray``
for each lanes value, and writes ``RESULTS-scale-out.md`` beside the JSON in
``logs/bench/scale-out-<time>/``. Choose ``--n`` a multiple of every lanes value (every process then runs
whole waves of samples: the comparison measures the engine, not a half-empty last wave).

What bounds a run, from its logs and the CPU samples: the cores its processes used over the span (1.0: a
process is CPU-bound on its core), the lane occupancy (sample-seconds / (lanes × span): how full the lanes
were; the rest is the tail of the last wave and a unit's start), the seconds of a sample against its calls'
critical path at the server's latency (the lane bound), and a call's seconds against the latency (the rest:
waiting in the process's event loop).

The server answers from a table: a reply computed once for a request body is served again from memory
(the scripted replies are a function of the request, :mod:`bedside.providers.scripted`; the body is hashed,
not parsed); the first run fills the table, the later runs are served from it (the report gives how many of
each run's calls the server computed), so the server's own CPU (reported per call, and as a share of the
machine) stays small where the workers compete for the cores. Calls/s is measured over the span the
logs cover (first start to last end), and the wall-clock of the whole step (Ray's start-up included) is
given beside it.

Each row gives the 1-minute load average before and after: compare ratios measured in one run, on a quiet
machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench import common  # noqa: E402

ROLES = ("patient", "monitor", "grader")
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------------------------
# the loopback server, answering from a table


def _serve(conn: Any, latency: float, jitter: float) -> None:  # child process
    import asyncio
    import hashlib

    from aiohttp import web

    from tests.loopback.server import LoopbackServer

    table: dict[bytes, bytes] = {}
    served = {"table": 0, "computed": 0}

    class TableServer(LoopbackServer):
        """Serves a request whose body it has answered before from memory (the scripted replies are a
        function of the request); computes and remembers any other."""

        async def _chat_completions(self, http):  # type: ignore[no-untyped-def]
            key = hashlib.sha1(await http.read()).digest()  # aiohttp keeps the body for the handler
            if key in table:
                served["table"] += 1
                await asyncio.sleep(self._delay())
                return web.Response(body=table[key], content_type="application/json")
            response = await super()._chat_completions(http)
            served["computed"] += 1
            if response.status == 200 and isinstance(response, web.Response) and response.body is not None:
                table[key] = bytes(response.body)
            return response

    with TableServer(port=0, latency=latency, jitter=jitter) as server:
        conn.send(server.base_url)
        while True:
            message = conn.recv()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            conn.send({"cpu_s": usage.ru_utime + usage.ru_stime, "pid": os.getpid(), **served})
            if message == "stop":
                return


@contextmanager
def table_server(latency: float, jitter: float = 0.0) -> Iterator[tuple[str, Any]]:
    """(base URL, a function giving the server's CPU seconds and served counts so far)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, latency, jitter), daemon=True)
    proc.start()
    lock = threading.Lock()
    if not parent.poll(120):  # the child died before serving (e.g. an import error: its traceback is above)
        proc.kill()
        raise RuntimeError("the table server did not start within 120 s")
    base_url = parent.recv()

    def stats() -> dict[str, Any]:
        with lock:
            parent.send("stats")
            return parent.recv()

    try:
        yield base_url, stats
    finally:
        with lock:
            parent.send("stop")
            parent.recv()
        proc.join(timeout=30)


# ---------------------------------------------------------------------------------------------
# the two runs


def log_stats(log_dir: str, latency: float) -> dict[str, Any]:
    """Model calls, samples and the span (first start to last end) of the logs under ``log_dir``, and per log
    (a unit of the sharded run): its samples, span, sample-seconds, mean seconds a call and mean critical
    path of a sample at ``latency`` a call."""
    from datetime import datetime
    from statistics import mean

    from inspect_ai.log import read_eval_log, read_eval_log_samples

    from bedside.reporting.load import expand

    units = []
    for path in expand([log_dir]):
        header = read_eval_log(path, header_only=True)
        calls, busy, call_s, http_s, tails, paths = 0, 0.0, [], [], [], []
        samples, starts, ends_of_samples = 0, [], []
        for sample in read_eval_log_samples(path, all_samples_required=False):
            events = [e for e in common.model_events(sample) if e.cache != "read"]
            samples += 1
            calls += len(events)
            busy += float(sample.total_time or 0.0)
            call_s += [e.completed.timestamp() - e.timestamp.timestamp() for e in events if e.completed]
            http_s += [e.call.time for e in events if e.call is not None and e.call.time is not None]
            ends = [e.completed.timestamp() for e in events if e.completed]
            first = min(e.timestamp.timestamp() for e in sample.events)
            starts.append(first)
            ends_of_samples.append(first + float(sample.total_time or 0.0))
            if ends:
                tails.append(ends_of_samples[-1] - max(ends))
            paths.append(common.critical_path(events, lambda e: latency)[0])
        units.append(
            {
                "samples": samples,
                "calls": calls,
                # the samples' own times (the header's are whole seconds)
                "start": min(starts, default=datetime.fromisoformat(header.stats.started_at).timestamp()),
                "end": max(ends_of_samples, default=datetime.fromisoformat(header.stats.completed_at).timestamp()),
                "sample_s": busy,
                "call_s_mean": mean(call_s) if call_s else 0.0,
                "http_s_mean": mean(http_s) if http_s else 0.0,
                "tail_s_mean": mean(tails) if tails else 0.0,
                "critical_path_s_mean": mean(paths) if paths else 0.0,
            }
        )
    start, end = min(u["start"] for u in units), max(u["end"] for u in units)
    for unit in units:
        unit["span_s"] = unit["end"] - unit["start"]
    return {
        "calls": sum(u["calls"] for u in units),
        "samples": sum(u["samples"] for u in units),
        "span_s": end - start,
        "start": start,
        "end": end,
        "sample_s": sum(u["sample_s"] for u in units),
        "call_s_mean": sum(u["call_s_mean"] * u["calls"] for u in units) / max(1, sum(u["calls"] for u in units)),
        "http_s_mean": sum(u["http_s_mean"] * u["calls"] for u in units) / max(1, sum(u["calls"] for u in units)),
        "tail_s_mean": sum(u["tail_s_mean"] * u["samples"] for u in units) / max(1, sum(u["samples"] for u in units)),
        "critical_path_s_mean": sum(u["critical_path_s_mean"] * u["samples"] for u in units)
        / max(1, sum(u["samples"] for u in units)),
        "units": units,
    }


#: Ray's own processes by what their command line holds (the first match names the group)
RAY_GROUPS = (
    ("gcs_server", "Ray GCS"),
    ("raylet", "raylet"),
    ("dashboard.py", "Ray dashboard head"),
    ("ray::DashboardAgent", "Ray agents"),
    ("ray::RuntimeEnvAgent", "Ray agents"),
    ("log_monitor.py", "Ray log monitor"),
    ("monitor.py", "Ray autoscaler monitor"),
)


def process_group(title: str) -> str:
    """The group a descendant process's CPU is counted in: a unit's worker, one of Ray's own processes, or
    another (an idle Ray worker, an embedding thread pool's helper process, ...)."""
    if title.startswith("ray::bedside-unit"):
        return "worker"
    for needle, group in RAY_GROUPS:
        if needle in title:
            return group
    return "Ray other" if "ray" in title else "other child"


class Sampler:
    """The CPU seconds and RSS of this process, its descendants and ``watch`` (the loopback server's pid)
    every ``every`` s, as time series per process (time, CPU seconds), each process in a group (``self``,
    ``server``, ``worker``, or one of Ray's own: :func:`process_group`); and the machine's busy CPU seconds
    (all processes, other users' jobs included) as the series of pid 0."""

    def __init__(self, every: float = 0.5, watch: int | None = None) -> None:
        self.every = every
        self.watch = watch
        self.series: dict[int, list[tuple[float, float]]] = {}
        self.kind: dict[int, str] = {}
        self.peak: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self) -> None:
        import psutil

        now = time.time()
        machine = psutil.cpu_times()
        self.kind[0] = "machine"
        idle = machine.idle + getattr(machine, "iowait", 0.0) + getattr(machine, "steal", 0.0)
        self.series.setdefault(0, []).append((now, sum(machine) - idle))
        me = psutil.Process()
        procs = [me, *me.children(recursive=True)]
        if self.watch:
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(self.watch))
        for proc in procs:
            try:
                with proc.oneshot():
                    title = " ".join(proc.cmdline())
                    cpu = sum(proc.cpu_times()[:2])
                    rss = proc.memory_info().rss / 2**20
            except psutil.Error:
                continue
            if proc.pid == me.pid:
                self.kind[proc.pid] = "self"
            elif proc.pid == self.watch:
                self.kind[proc.pid] = "server"
            elif self.kind.get(proc.pid) != "worker":  # a unit's worker is titled ray::IDLE again when it ends
                self.kind[proc.pid] = process_group(title)
            self.series.setdefault(proc.pid, []).append((now, cpu))
            self.peak[proc.pid] = max(self.peak.get(proc.pid, 0.0), rss)

    def threads(self, pid: int) -> dict[str, float]:
        """CPU seconds of ``pid``'s live threads so far, summed by thread name (``/proc``'s ``comm``: Python's
        main thread is named after the process, Ray's core-worker threads after their role)."""
        import psutil

        out: dict[str, float] = {}
        with contextlib.suppress(psutil.Error, OSError):
            for thread in psutil.Process(pid).threads():
                name = Path(f"/proc/{pid}/task/{thread.id}/comm").read_text().strip()
                name = "main" if thread.id == pid else name.rstrip("0123456789_-") or name
                out[name] = out.get(name, 0.0) + thread.user_time + thread.system_time
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def total(self, pid: int) -> float:
        return self.series[pid][-1][1] - (self.series[pid][0][1] if pid == 0 else 0.0)

    def between(self, pid: int, start: float, end: float) -> float:
        """CPU seconds of ``pid`` from ``start`` to ``end`` (wall-clock), interpolated between samples."""
        return _at(self.series[pid], end) - _at(self.series[pid], start)

    def pids(self, kind: str) -> list[int]:
        return [pid for pid, k in self.kind.items() if k == kind]

    def cores(self, start: float, end: float, workers: Sequence[int] = ()) -> dict[str, float]:
        """The cores each group used from ``start`` to ``end``: ``workers`` each apart (``worker 1``, ...),
        every other group summed, and ``rest of the machine`` (other users' jobs, the kernel): the machine's
        busy cores less all of these."""
        span = max(end - start, 1e-9)
        out: dict[str, float] = {}
        for i, pid in enumerate(workers, 1):
            out[f"worker {i}"] = self.between(pid, start, end) / span
        for pid, kind in self.kind.items():
            if pid in workers or kind == "machine":
                continue
            out[kind] = out.get(kind, 0.0) + self.between(pid, start, end) / span
        out["rest of the machine"] = self.between(0, start, end) / span - sum(out.values())
        return out


def _at(series: list[tuple[float, float]], t: float) -> float:
    if t <= series[0][0]:
        return series[0][1]
    for (t0, c0), (t1, c1) in zip(series, series[1:]):
        if t <= t1:
            return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)
    return series[-1][1]


def step_one(args: argparse.Namespace) -> dict[str, Any]:
    from inspect_ai import eval

    from bedside.tasks.discharge import discharge

    os.environ["INSPECT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bedside-scale-out-cache-")
    models = {r: common.loopback_model(r, args.base_url) for r in ROLES}
    task = discharge(data=args.data, min_turns=args.min_turns)
    load_before, t0 = common.loadavg(), time.perf_counter()
    with Sampler(watch=args.server_pid) as sampler:
        [log] = eval(
            task,
            model=common.loopback_model("educator", args.base_url),
            model_roles=models,
            max_samples=args.lanes,
            max_connections=6 * args.lanes,
            log_dir=args.log_dir,
            display="none",
            **({"log_realtime": False} if args.no_log_realtime else {}),
        )
        threads = [sampler.threads(os.getpid())]
    wall = time.perf_counter() - t0
    stats = log_stats(args.log_dir, args.latency)
    me = os.getpid()
    return {
        "step": "one",
        "lanes": args.lanes,
        "status": log.status,
        "wall_s": wall,
        "cpu_s": [common.cpu_seconds()],  # the whole process, imports and loads included (as a worker's)
        "cpu_in_span_s": [sampler.between(me, stats["start"], stats["end"])],
        "cores": sampler.cores(stats["start"], stats["end"]),
        "threads_cpu_s": threads,
        "peak_rss_mb": [common.peak_rss_mb()],
        "loadavg": [load_before, common.loadavg()],
        **stats,
    }


def step_ray(args: argparse.Namespace) -> dict[str, Any]:
    from bedside.scale.engine import RayEngine
    from bedside.scale.plan import RunSpec, plan

    os.environ["INSPECT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bedside-scale-out-cache-")
    os.environ.update(
        {"LOOPBACK_API_KEY": "bench", "LOOPBACK_BASE_URL": args.base_url, "BEDSIDE_LOOPBACK_URL": args.base_url}
    )
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    load_before, t0 = common.loadavg(), time.perf_counter()
    with Sampler(watch=args.server_pid) as sampler:
        engine = RayEngine(workers=args.workers)
        started = time.perf_counter()
        spec = RunSpec(
            tasks=("bedside/discharge",),
            models=(f"{common.LOOPBACK}/educator",),
            log_dir=args.log_dir,
            task_args={"data": args.data, "min_turns": args.min_turns},
            model_roles=tuple(f"{r}={common.LOOPBACK}/{r}" for r in ROLES),
            shards=args.workers,
            max_connections=6 * args.lanes,
            max_samples=args.lanes,
            eval_args={"log_realtime": False} if args.no_log_realtime else {},
        )
        run_plan = plan(spec, engine.slots)
        outcomes = engine.run(run_plan.units, run_plan.at_once, say=lambda line: None)
        threads = {pid: sampler.threads(pid) for pid in sampler.pids("worker")}
        engine.close()
    wall = time.perf_counter() - t0
    stats = log_stats(args.log_dir, args.latency)
    workers = sorted(sampler.pids("worker"), key=lambda pid: -sampler.total(pid))
    busy = [pid for pid in workers if sampler.total(pid) > 1.0][: args.workers]
    return {
        "step": "ray",
        "lanes": args.lanes,
        "workers": args.workers,
        "status": [o.result.status if o.result else "no result" for o in outcomes],
        "wall_s": wall,
        "ray_start_s": started - t0,
        "cpu_s": [sampler.total(pid) for pid in busy],
        "cpu_in_span_s": [sampler.between(pid, stats["start"], stats["end"]) for pid in busy],
        "cores": sampler.cores(stats["start"], stats["end"], busy),
        "threads_cpu_s": [threads.get(pid, {}) for pid in busy],
        "peak_rss_mb": [sampler.peak[pid] for pid in busy],
        "ray_own_cpu_s": sum(sampler.total(pid) for pid, kind in sampler.kind.items() if kind.startswith("Ray")),
        "driver_cpu_s": common.cpu_seconds(),
        "loadavg": [load_before, common.loadavg()],
        "max_samples_per_unit": run_plan.units[0].max_samples,
        **stats,
    }


# ---------------------------------------------------------------------------------------------
# everything, and the report


def step_all(args: argparse.Namespace) -> None:
    out = Path(args.dir or REPO_LOGS / f"scale-out-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    lanes = [int(x) for x in str(args.lanes).split(",")]
    if uneven := [x for x in lanes if args.n % x or x % args.workers]:
        print(
            f"scale-out: --n {args.n} is not a multiple of {uneven[0]} lanes, or {uneven[0]} lanes not of "
            f"{args.workers} workers: the runs' last waves differ; measured anyway",
            flush=True,
        )
    data = str(common.replicate_discharge(args.n, out / "cases.jsonl"))
    results: dict[str, Any] = {"machine": common.machine(), "argv": sys.argv[1:], "n": args.n, "runs": []}
    with table_server(args.latency, args.jitter) as (base_url, server):
        for repeat, width, step in schedule(lanes, args.repeat):
            extra = ["--workers", str(args.workers)] if step == "ray" else []
            before = server()
            name = f"{step}-{width}" + (f"-{repeat}" if args.repeat > 1 else "")
            command = [sys.executable, __file__, step, "--data", data, "--base-url", base_url]
            command += ["--server-pid", str(before["pid"])]
            command += ["--lanes", str(width), "--min-turns", str(args.min_turns), "--latency", str(args.latency)]
            command += ["--log-dir", str(out / f"logs-{name}"), "--out", str(out / f"{name}.json"), *extra]
            command += ["--no-log-realtime"] if args.no_log_realtime else []
            print(f"scale-out: {step}, {width} lanes, repetition {repeat} ({common.loadavg()}) ...", flush=True)
            subprocess.run(command, check=True)
            after = server()
            result = json.loads((out / f"{name}.json").read_text())
            result["repeat"] = repeat
            result["server"] = {
                "cpu_s": after["cpu_s"] - before["cpu_s"],
                "from_table": after["table"] - before["table"],
                "computed": after["computed"] - before["computed"],
            }
            results["runs"].append(result)
    common.write_json(out / "results.json", results)
    text = report(results, args)
    (out / "RESULTS-scale-out.md").write_text(text)
    print(text)


def schedule(lanes: Sequence[int], repeat: int) -> list[tuple[int, int, str]]:
    """(repetition, lanes, step) in the order they run: for each repetition and lanes value the one process
    and the workers back to back, in the order one, ray in odd repetitions and ray, one in even ones (a
    machine's load drifting during the run then favours neither)."""
    order = []
    for r in range(1, repeat + 1):
        for width in lanes:
            for step in ("one", "ray") if r % 2 else ("ray", "one"):
                order.append((r, width, step))
    return order


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    m = results["machine"]
    cores = m["cores"] or 1
    runs = results["runs"]
    lines = [
        "# bedside scale-out benchmark",
        "",
        f"`{' '.join(['bench/scale_out.py', *results['argv']])}`; machine: {m['cores']} cores ({m['cpu']}), "
        f"{m['ram_gb']} GB, Python {m['python']}, inspect_ai {m['inspect_ai']}, bedside `{m['git']}`. "
        f"DischargeBench, {results['n']} synthetic cases, `min_turns={args.min_turns}`, loopback latency "
        f"{args.latency} s a call ({f'± U(0, {args.jitter}) s' if args.jitter else 'no jitter'})"
        f"{'; both runs --no-log-realtime' if args.no_log_realtime else ''}. Lanes: samples at once over the run "
        "(one process: max_samples; N workers: lanes/N each).",
        "",
        "| lanes | rep. | run | calls | span s | wall s | calls/s | sessions/h | cores used in the span (per process) "
        "| lane occupancy | s a sample (critical path; after its last call) | s a call (HTTP) | CPU ms/call "
        "| peak RSS MB | server: computed, "
        "CPU ms/call, share | load 1-min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rate = r["calls"] / r["span_s"]
        name = "1 process" if r["step"] == "one" else f"{r['workers']} Ray workers"
        used = " + ".join(f"{c / r['span_s']:.2f}" for c in r["cpu_in_span_s"])
        occupancy = r["sample_s"] / (r["lanes"] * r["span_s"])
        server = r["server"]
        lines.append(
            f"| {r['lanes']} | {r.get('repeat', 1)} | {name} | {r['calls']:,} | {r['span_s']:.1f} | {r['wall_s']:.1f} "
            f"| **{rate:.1f}** "
            f"| {r['samples'] / r['span_s'] * 3600:.0f} | {used} | {100 * occupancy:.0f} % "
            f"| {r['sample_s'] / r['samples']:.1f} ({r['critical_path_s_mean']:.1f}; {r.get('tail_s_mean', 0):.1f}) "
            f"| {r['call_s_mean']:.2f} ({r.get('http_s_mean', 0):.2f}) "
            f"| {1000 * sum(r['cpu_s']) / r['calls']:.1f} | {' / '.join(f'{x:.0f}' for x in r['peak_rss_mb'])} "
            f"| {server['computed']:,}, {1000 * server['cpu_s'] / r['calls']:.2f}, "
            f"{100 * server['cpu_s'] / (r['span_s'] * cores):.1f} % "
            f"| {r['loadavg'][0][0]} → {r['loadavg'][1][0]} |"
        )
    lines += ["", *cores_table(runs, cores), ""]
    best_worker_rate, calls_per_session, cpu_call = 0.0, 57.0, 0.03
    for width in dict.fromkeys(r["lanes"] for r in runs):
        pairs = [
            (one, ray)
            for one in runs
            for ray in runs
            if one["step"] == "one"
            and ray["step"] == "ray"
            and one["lanes"] == ray["lanes"] == width
            and one.get("repeat", 1) == ray.get("repeat", 1)
        ]
        ratios = [(ray["calls"] / ray["span_s"]) / (one["calls"] / one["span_s"]) for one, ray in pairs]
        ratio = median(ratios)
        target = "met" if ratio >= 1.6 else "missed"
        ray = pairs[0][1]
        units = "; ".join(
            f"{u['samples']} samples in {u['span_s']:.0f} s" for u in sorted(ray["units"], key=lambda u: -u["samples"])
        )
        each = (
            f" (the median of {len(ratios)} repetitions: {', '.join(f'{x:.2f}' for x in ratios)})"
            if len(ratios) > 1
            else ""
        )
        lines.append(
            f"- **{width} lanes: {ray['workers']} workers / 1 process = {ratio:.2f}× the calls/s**{each} (target "
            f"≥ 1.6× with 2 workers on 2 cores: {target}). Units: {units}; {ray['max_samples_per_unit']} lanes "
            f"each; Ray's own processes {ray['ray_own_cpu_s']:.0f} s CPU, its start-up {ray['ray_start_s']:.1f} s "
            "(in the wall-clock, not the span)."
        )
        for one, ray in pairs:
            worker_rate = ray["calls"] / ray["span_s"] / ray["workers"]
            if worker_rate > best_worker_rate:
                best_worker_rate = worker_rate
                calls_per_session = one["calls"] / max(one["samples"], 1)
                cpu_call = sum(ray["cpu_in_span_s"]) / ray["calls"]
    lines += [
        "",
        "Cores used: each process's CPU seconds within the span over the span (1.00: CPU-bound on its core). "
        "Lane occupancy: the samples' seconds over lanes × span (the rest: the last wave's tail, a unit's "
        "start). A sample's seconds against its calls' critical path at the latency (the lane bound) and its "
        "seconds after its last model call (its scorers' own work: ROUGE and the embeddings, up to 8 waiting "
        "samples a call per process); a call's seconds against the latency "
        f"({args.latency} s), and of them the HTTP request's (Inspect's `call.time`): the rest is waiting in the "
        "process. CPU ms/call: each process's whole life (imports, the embedding model's load) over the calls.",
        "",
        "## K machines",
        "",
        "calls/s(K) = min(K × C × r, S, R), where r = the calls/s of one worker on one core (measured: "
        f"{best_worker_rate:.1f}, the best of the lanes above; CPU-bound it is 1 / CPU per call in the span = "
        f"{1 / cpu_call:.0f}), C = cores per machine, S = what the model servers answer per second, R = the API's "
        f"rate limit in calls/s; sessions/h = calls/s × 3600 / {calls_per_session:.0f} calls a DischargeBench "
        "session here. A worker needs enough lanes to keep its core busy: lanes per worker ≥ r × (latency + "
        "its waiting) per call.",
        "",
        "| machines × cores | workers' calls/s (K × C × r) | sessions/h if S and R do not bind |",
        "|---|---|---|",
    ]
    for k, c in ((1, 2), (1, 8), (4, 8), (8, 32)):
        rate = k * c * best_worker_rate
        lines.append(f"| {k} × {c} | {rate:,.0f} | {rate * 3600 / calls_per_session:,.0f} |")
    need = 477 * calls_per_session * 8 / 10800
    lines += [
        "",
        "K for a throughput T: K = ceil(T / (C × r)), capped where S or R binds (more machines then add nothing). "
        f"E.g. 477 cases × {calls_per_session:.0f} calls × 8 models in 3 h is {need:.0f} calls/s: "
        f"K = {math.ceil(need / (2 * best_worker_rate))} machine(s) of 2 cores at this latency.",
        "",
    ]
    return "\n".join(lines)


def cores_table(runs: list[dict[str, Any]], cores: int) -> list[str]:
    """Where the machine's cores went in each run's span: each process group's cores (the sampled CPU seconds
    within the span over the span), the rest of the machine (other jobs) and what was left idle."""
    groups = list(dict.fromkeys(g for r in runs for g in r.get("cores", {})))
    if not groups:
        return []
    lines = [
        "Where the cores went in the span (cores; the loopback server is `server`, the measured process or Ray's "
        "driver `self`; `rest of the machine`: other jobs and the kernel; idle: what no process used):",
        "",
        "| lanes | rep. | run | "
        + " | ".join(groups)
        + " | idle | the event loop's thread: share of each process's CPU |",
        "|---|---|---|" + "---|" * (len(groups) + 2),
    ]
    for r in runs:
        used = r.get("cores", {})
        name = "1 process" if r["step"] == "one" else f"{r['workers']} Ray workers"
        cells = " | ".join(f"{used[g]:.2f}" if g in used else "" for g in groups)
        main = " / ".join(
            f"{100 * t.get('main', 0.0) / cpu:.0f} %" for t, cpu in zip(r.get("threads_cpu_s") or [], r["cpu_s"]) if cpu
        )
        idle = cores - sum(used.values())
        lines.append(f"| {r['lanes']} | {r.get('repeat', 1)} | {name} | {cells} | {idle:.2f} | {main} |")
    lines += [
        "",
        "The event loop's thread: its CPU over the process's whole life (the rest: the scorers' threads, "
        "embeddings and ROUGE, and Inspect's and Ray's own threads).",
    ]
    return lines


REPO_LOGS = HERE.parent / "logs" / "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    for name in ("one", "ray"):
        step = sub.add_parser(name)
        step.add_argument("--data", required=True)
        step.add_argument("--base-url", required=True)
        step.add_argument("--lanes", type=int, default=16)
        step.add_argument("--latency", type=float, default=0.3, help="the server's (for the critical path)")
        step.add_argument("--min-turns", type=int, default=10)
        step.add_argument("--workers", type=int, default=2)
        step.add_argument("--log-dir", required=True)
        step.add_argument("--out", required=True)
        step.add_argument("--server-pid", type=int, help="the loopback server's process (its CPU is sampled too)")
        step.add_argument("--no-log-realtime", action="store_true", help="as inspect eval (both runs)")
    everything = sub.add_parser("all")
    everything.add_argument("--n", type=int, default=96)
    everything.add_argument("--lanes", default="16,32", help="samples at once over the run; several: comma-separated")
    everything.add_argument("--latency", type=float, default=0.3)
    everything.add_argument("--min-turns", type=int, default=10)
    everything.add_argument("--workers", type=int, default=2)
    everything.add_argument("--jitter", type=float, default=0.0, help="the server's latency ± U(0, jitter) s")
    everything.add_argument("--no-log-realtime", action="store_true", help="as inspect eval, in both runs")
    everything.add_argument("--repeat", type=int, default=1, help="runs of each configuration, interleaved")
    everything.add_argument("--dir")
    args = parser.parse_args()
    if args.step == "all":
        step_all(args)
        return
    result = step_one(args) if args.step == "one" else step_ray(args)
    common.write_json(Path(args.out), result)


if __name__ == "__main__":
    main()
