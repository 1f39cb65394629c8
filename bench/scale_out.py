"""One process against N workers: DischargeBench calls/s and sessions/h against the loopback server at a
fixed latency, at the same total concurrency, and what that predicts for K machines.

    .venv/bin/python bench/scale_out.py all                     # n=48 cases, 16 lanes, 0.3 s a call, 2 workers
    .venv/bin/python bench/scale_out.py all --n 96 --workers 2 --lanes 16 --latency 0.3

Steps (each in a process of its own, so that its CPU and memory are its own; the loopback server in another):

- ``one``: one Inspect process, ``eval()`` of DischargeBench with ``max_samples`` = ``--lanes`` (as
  ``inspect eval``): wall-clock, calls/s, sessions/h, CPU per call, peak RSS;
- ``ray``: ``bedside scale``'s planner and Ray engine with ``--workers`` local workers and the same run-wide
  ``--max-samples`` (``--lanes``: each of N units runs lanes/N samples at once) and shards = workers; the Ray
  workers' CPU seconds and peak RSS sampled every 0.5 s (psutil), and Ray's own processes (raylet, GCS) apart;
- ``all``: the loopback server (latency, no jitter), ``one`` then ``ray``, then ``RESULTS-scale-out.md`` beside
  the JSON in ``logs/bench/scale-out-<time>/``.

The server answers from a table: a reply computed once for a request body is served again from memory
(the scripted replies are a function of the request, :mod:`bedside.providers.scripted`; the body is hashed,
not parsed); the ``one`` run fills the table, the ``ray`` run is served from it, so the
server's own CPU (reported per call, and as a share of the machine) stays small where the workers compete
for the cores. Calls/s is measured over the span the units' logs cover (first start to last end), and the
wall-clock of the whole command (Ray's start-up included) is given beside it.

The machine is shared while the coordinator's helpers work: every row gives the 1-minute load average
before and after; compare ratios measured in one run, on a quiet machine.
"""

from __future__ import annotations

import argparse
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench import common  # noqa: E402

ROLES = ("patient", "monitor", "grader")
HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------------------------
# the loopback server, answering from a table


def _serve(conn: Any, latency: float) -> None:  # child process
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
                await asyncio.sleep(self.latency)
                return web.Response(body=table[key], content_type="application/json")
            response = await super()._chat_completions(http)
            served["computed"] += 1
            if response.status == 200 and isinstance(response, web.Response) and response.body is not None:
                table[key] = bytes(response.body)
            return response

    with TableServer(port=0, latency=latency) as server:
        conn.send(server.base_url)
        while True:
            message = conn.recv()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            conn.send({"cpu_s": usage.ru_utime + usage.ru_stime, **served})
            if message == "stop":
                return


@contextmanager
def table_server(latency: float) -> Iterator[tuple[str, Any]]:
    """(base URL, a function giving the server's CPU seconds and served counts so far)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, latency), daemon=True)
    proc.start()
    lock = threading.Lock()

    def stats() -> dict[str, Any]:
        with lock:
            parent.send("stats")
            return parent.recv()

    try:
        yield parent.recv(), stats
    finally:
        with lock:
            parent.send("stop")
            parent.recv()
        proc.join(timeout=30)


# ---------------------------------------------------------------------------------------------
# the two runs


def calls_and_span(log_dir: str) -> dict[str, Any]:
    """Model calls, samples and the time span (first start to last end) of the logs under ``log_dir``."""
    from inspect_ai.log import read_eval_log, read_eval_log_samples

    from bedside.reporting.load import expand

    calls = samples = 0
    starts, ends = [], []
    for path in expand([log_dir]):
        header = read_eval_log(path, header_only=True)
        starts.append(header.stats.started_at)
        ends.append(header.stats.completed_at)
        for sample in read_eval_log_samples(path, all_samples_required=False):
            samples += 1
            calls += sum(1 for e in sample.events if e.event == "model" and e.cache != "read")
    from datetime import datetime

    span = (datetime.fromisoformat(max(ends)) - datetime.fromisoformat(min(starts))).total_seconds()
    return {"calls": calls, "samples": samples, "span_s": span}


def step_one(args: argparse.Namespace) -> dict[str, Any]:
    from inspect_ai import eval

    from bedside.tasks.discharge import discharge

    os.environ["INSPECT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bedside-scale-out-cache-")
    models = {r: common.loopback_model(r, args.base_url) for r in ROLES}
    task = discharge(data=args.data, min_turns=args.min_turns)
    load_before, cpu0, t0 = common.loadavg(), common.cpu_seconds(), time.perf_counter()
    [log] = eval(
        task,
        model=common.loopback_model("educator", args.base_url),
        model_roles=models,
        max_samples=args.lanes,
        max_connections=6 * args.lanes,
        log_dir=args.log_dir,
        display="none",
    )
    wall, cpu = time.perf_counter() - t0, common.cpu_seconds() - cpu0
    return {
        "step": "one",
        "status": log.status,
        "wall_s": wall,
        "eval_cpu_s": cpu,
        "cpu_s": common.cpu_seconds(),  # the whole process, imports and loads included (as a worker's)
        "peak_rss_mb": common.peak_rss_mb(),
        "loadavg": [load_before, common.loadavg()],
        **calls_and_span(args.log_dir),
    }


class Sampler:
    """The CPU seconds and peak RSS of this process's descendants, every ``every`` s: Ray's workers
    (``ray::`` in their command line) each apart, Ray's own processes (raylet, GCS, ...) together."""

    def __init__(self, every: float = 0.5) -> None:
        self.every, self.workers, self.ray, self.peak = every, {}, {}, {}  # type: ignore[var-annotated]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(self.every):
            for proc in psutil.Process().children(recursive=True):
                try:
                    with proc.oneshot():
                        title = " ".join(proc.cmdline())
                        cpu = sum(proc.cpu_times()[:2])
                        rss = proc.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                target = self.workers if title.startswith("ray::") else self.ray
                target[proc.pid] = cpu
                self.peak[proc.pid] = max(self.peak.get(proc.pid, 0.0), rss)


def step_ray(args: argparse.Namespace) -> dict[str, Any]:
    from bedside.scale.engine import RayEngine
    from bedside.scale.plan import RunSpec, plan

    os.environ["INSPECT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bedside-scale-out-cache-")
    os.environ.update(
        {"LOOPBACK_API_KEY": "bench", "LOOPBACK_BASE_URL": args.base_url, "BEDSIDE_LOOPBACK_URL": args.base_url}
    )
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    load_before, t0 = common.loadavg(), time.perf_counter()
    with Sampler() as sampler:
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
        )
        run_plan = plan(spec, engine.slots)
        outcomes = engine.run(run_plan.units, run_plan.at_once, say=lambda line: None)
        engine.close()
    wall = time.perf_counter() - t0
    workers = sorted(sampler.workers.items(), key=lambda kv: -kv[1])
    busy = [(pid, cpu) for pid, cpu in workers if cpu > 1.0][: args.workers]
    return {
        "step": "ray",
        "workers": args.workers,
        "status": [o.result.status if o.result else "no result" for o in outcomes],
        "wall_s": wall,
        "ray_start_s": started - t0,
        "worker_cpu_s": [cpu for _, cpu in busy],
        "worker_peak_rss_mb": [sampler.peak[pid] for pid, _ in busy],
        "ray_own_cpu_s": sum(sampler.ray.values()),
        "driver_cpu_s": common.cpu_seconds(),
        "loadavg": [load_before, common.loadavg()],
        "max_samples_per_unit": run_plan.units[0].max_samples,
        **calls_and_span(args.log_dir),
    }


# ---------------------------------------------------------------------------------------------
# everything, and the report


def step_all(args: argparse.Namespace) -> None:
    out = Path(args.dir or REPO_LOGS / f"scale-out-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    data = str(common.replicate_discharge(args.n, out / "cases.jsonl"))
    results: dict[str, Any] = {"machine": common.machine(), "argv": sys.argv[1:], "n": args.n}
    with table_server(args.latency) as (base_url, server):
        for step, extra in (("one", []), ("ray", ["--workers", str(args.workers)])):
            before = server()
            command = [sys.executable, __file__, step, "--data", data, "--base-url", base_url]
            command += ["--lanes", str(args.lanes), "--min-turns", str(args.min_turns)]
            command += ["--log-dir", str(out / f"logs-{step}"), "--out", str(out / f"{step}.json"), *extra]
            print(f"scale-out: {step} ...", flush=True)
            subprocess.run(command, check=True)
            after = server()
            result = json.loads((out / f"{step}.json").read_text())
            result["server"] = {
                "cpu_s": after["cpu_s"] - before["cpu_s"],
                "from_table": after["table"] - before["table"],
                "computed": after["computed"] - before["computed"],
            }
            results[step] = result
    common.write_json(out / "results.json", results)
    text = report(results, args)
    (out / "RESULTS-scale-out.md").write_text(text)
    print(text)


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    one, ray = results["one"], results["ray"]
    rate = {k: r["calls"] / r["span_s"] for k, r in (("one", one), ("ray", ray))}
    sessions = {k: r["samples"] / r["span_s"] * 3600 for k, r in (("one", one), ("ray", ray))}
    calls_per_session = one["calls"] / max(one["samples"], 1)
    cpu_call = {"one": one["cpu_s"] / one["calls"], "ray": sum(ray["worker_cpu_s"]) / ray["calls"]}
    span_total = {k: r["span_s"] for k, r in (("one", one), ("ray", ray))}
    cores = results["machine"]["cores"] or 1
    server_share = {k: results[k]["server"]["cpu_s"] / (span_total[k] * cores) for k in ("one", "ray")}
    ratio = rate["ray"] / rate["one"]
    m = results["machine"]
    lines = [
        "# bedside scale-out benchmark",
        "",
        f"`{' '.join(['bench/scale_out.py', *results['argv']])}`; machine: {m['cores']} cores ({m['cpu']}), "
        f"{m['ram_gb']} GB, Python {m['python']}, inspect_ai {m['inspect_ai']}, bedside `{m['git']}`.",
        f"DischargeBench, {results['n']} synthetic cases, `min_turns={args.min_turns}`, loopback latency "
        f"{args.latency} s a call (no jitter), {args.lanes} samples at once in all (one process: max_samples "
        f"{args.lanes}; {ray['workers']} workers: {ray['max_samples_per_unit']} each).",
        "",
        "Each row gives the 1-minute load average before → after it: on a machine shared with other jobs the "
        "workers compete with them for the cores, and the ratio below measures that, not the engine.",
        "",
        "| run | calls | sessions | span s | wall s | calls/s | sessions/h | process CPU ms/call | peak RSS MB | "
        "server CPU ms/call | server share of the cores | load 1-min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    names = {"one": "1 process", "ray": f"{ray['workers']} Ray workers"}
    for key, r in (("one", one), ("ray", ray)):
        rss = f"{r['peak_rss_mb']:.0f}" if key == "one" else " / ".join(f"{x:.0f}" for x in r["worker_peak_rss_mb"])
        lines.append(
            f"| {names[key]} | {r['calls']:,} | {r['samples']} "
            f"| {r['span_s']:.1f} | {r['wall_s']:.1f} | **{rate[key]:.1f}** | {sessions[key]:.0f} "
            f"| {1000 * cpu_call[key]:.1f} | {rss} | {1000 * r['server']['cpu_s'] / r['calls']:.2f} "
            f"| {100 * server_share[key]:.1f} % | {r['loadavg'][0][0]} → {r['loadavg'][1][0]} |"
        )
    target = "met" if ratio >= 1.6 else "missed"
    lines += [
        "",
        f"**{ray['workers']} workers / 1 process: {ratio:.2f}× the calls/s** (target ≥ 1.6× with 2 workers on 2 cores: "
        f"**{target}**). Process CPU is each process's whole life, its imports and the embedding model's load "
        f"included. Per worker: CPU {', '.join(f'{c:.0f}' for c in ray['worker_cpu_s'])} s, "
        f"peak RSS {', '.join(f'{x:.0f}' for x in ray['worker_peak_rss_mb'])} MB; Ray's own processes "
        f"{ray['ray_own_cpu_s']:.0f} s CPU; Ray's start-up {ray['ray_start_s']:.1f} s "
        "(in the wall-clock, not the span). "
        f"The server answered {ray['server']['from_table']:,} of the workers' calls from its table "
        f"({ray['server']['computed']:,} computed).",
        "",
        "## K machines",
        "",
        "calls/s(K) = min(K × C × r, S, R), where r = the calls/s of one worker on one core (measured: "
        f"{rate['ray'] / ray['workers']:.1f}, at {ray['max_samples_per_unit']} samples at once and {args.latency} s a "
        f"call; CPU-bound it is 1 / CPU per call = {1 / cpu_call['ray']:.0f}), C = cores per machine, "
        "S = what the model servers answer per second, R = the API's rate limit in calls/s; "
        "sessions/h = calls/s × 3600 / "
        f"{calls_per_session:.0f} calls a DischargeBench session here.",
        "",
        "| machines × cores | workers' calls/s (K × C × r) | sessions/h if S and R do not bind |",
        "|---|---|---|",
    ]
    per_worker = rate["ray"] / ray["workers"]
    for k, c in ((1, 2), (1, 8), (4, 8), (8, 32)):
        lines.append(
            f"| {k} × {c} | {k * c * per_worker:,.0f} | {k * c * per_worker * 3600 / calls_per_session:,.0f} |"
        )
    lines += [
        "",
        "K for a throughput T: K = ceil(T / (C × r)), capped where S or R binds (more machines then add nothing). "
        f"E.g. 477 cases × {calls_per_session:.0f} calls × 8 models in 3 h is "
        f"{477 * calls_per_session * 8 / 10800:.0f} calls/s: "
        f"K = {math.ceil(477 * calls_per_session * 8 / 10800 / (2 * per_worker))} machine(s) of 2 cores "
        "at this latency.",
        "",
    ]
    return "\n".join(lines)


REPO_LOGS = HERE.parent / "logs" / "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    for name in ("one", "ray"):
        step = sub.add_parser(name)
        step.add_argument("--data", required=True)
        step.add_argument("--base-url", required=True)
        step.add_argument("--lanes", type=int, default=16)
        step.add_argument("--min-turns", type=int, default=10)
        step.add_argument("--workers", type=int, default=2)
        step.add_argument("--log-dir", required=True)
        step.add_argument("--out", required=True)
    everything = sub.add_parser("all")
    everything.add_argument("--n", type=int, default=48)
    everything.add_argument("--lanes", type=int, default=16, help="samples at once, in all")
    everything.add_argument("--latency", type=float, default=0.3)
    everything.add_argument("--min-turns", type=int, default=10)
    everything.add_argument("--workers", type=int, default=2)
    everything.add_argument("--dir")
    args = parser.parse_args()
    if args.step == "all":
        step_all(args)
        return
    result = step_one(args) if args.step == "one" else step_ray(args)
    common.write_json(Path(args.out), result)


if __name__ == "__main__":
    main()
