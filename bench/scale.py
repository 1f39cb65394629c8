"""Full-size runs through Inspect's real ``openai-api`` provider against the loopback server.

    .venv/bin/python bench/scale.py all            # what `make bench` runs: every step, then RESULTS.md
    .venv/bin/python bench/scale.py all --n 96     # a quicker pass (n DischargeBench cases)

Each step runs in a process of its own (``python bench/scale.py <step> ...``, started by ``all``),
so that its CPU time and peak RSS (``ru_maxrss``) are its own; the loopback server runs in a child
process of the step (its CPU is reported apart). Steps write JSON into the run directory
(``logs/bench/<time>/``); ``report`` turns them into ``bench/RESULTS.md``.

- ``run --bench discharge|medsp|cpb``: one eval (``max_samples`` = ``--lanes``, ``max_connections``
  high enough never to bind) at ``--latency`` ± ``--jitter`` per call, for the model under test and
  every role. Reports wall-clock (the ``eval()`` call; the process's one-time loads of the embedding
  model, the CMU dictionary and ROUGE are done and timed before), the bounds computed from the log
  (:mod:`bench.common`), calls per second, process CPU per call, peak RSS, calls and tokens per role
  and per protocol per case. ``--warmup k`` first runs k other samples in the same process (for the
  marginal CPU per call), ``--profile`` samples the timed eval with ``py-spy --gil``.
- ``metrics``: the deterministic metrics (ROUGE-L, embedding cosine, readability) over the texts a
  DischargeBench run produced, through the scorers' own functions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench import common  # noqa: E402

ROLES = {
    "discharge": ("patient", "monitor", "grader"),
    "medsp": ("patient", "environment", "grader"),
    "cpb": ("grader",),
}
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


# ---------------------------------------------------------------------------------------------
# one eval


def tasks_for(bench: str, data: str, args: argparse.Namespace) -> list[Any]:
    if bench == "discharge":
        from bedside.tasks.discharge import discharge

        return [discharge(data=data, min_turns=args.min_turns, max_turns=args.max_turns)]
    if bench == "medsp":
        from bedside.tasks.medsp import medsp

        return [medsp(data=data)]
    if bench == "cpb":
        from bedside.tasks.cpb import cpb, cpb_control

        return [cpb(data=data), cpb_control(data=data)]
    raise ValueError(bench)


def prepare_data(bench: str, n: int, data: str | None) -> str:
    if data and Path(data).exists():
        return data
    target = Path(data) if data else Path(tempfile.mkdtemp(prefix=f"bedside-bench-{bench}-"))
    if bench == "discharge":
        target = target if target.suffix == ".jsonl" else target / "cases.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        return str(common.replicate_discharge(n, target))
    if bench == "medsp":
        return str(common.replicate_medsp(n, target))
    if bench == "cpb":
        if not common.CPB_DATA.exists():
            raise SystemExit(f"skip: {common.CPB_DATA} is absent")
        return str(common.CPB_DATA)
    raise ValueError(bench)


def embed_threads() -> int:
    from bedside.scorers.discharge import text_metrics

    return text_metrics.embed_threads()


def preload() -> dict[str, float]:
    """The one-time loads of the deterministic metrics (timed; done before the timed eval)."""
    from bedside.scorers.discharge import text_metrics

    out = {}
    t = time.perf_counter()
    text_metrics.embedder()
    text_metrics.cosine([("warm up", "warm-up")])
    out["embedder_s"] = time.perf_counter() - t
    t = time.perf_counter()
    text_metrics.readability("Warm up the dictionary.")
    text_metrics.rouge_l([("warm up", "warm up")])
    out["textstat_rouge_s"] = time.perf_counter() - t
    return out


class PySpy:
    """``py-spy record --gil -f raw`` on this process, from start() to stop()."""

    def __init__(self, out: Path, rate: int = 100) -> None:
        self.out, self.rate, self.proc = out, rate, None

    def start(self) -> bool:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            return False
        self.proc = subprocess.Popen(
            [exe, "record", "-p", str(os.getpid()), "--gil", "-r", str(self.rate), "-f", "raw", "-o", str(self.out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        return True

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=120)


def step_run(args: argparse.Namespace) -> dict[str, Any]:
    from inspect_ai import eval

    if args.cache_dir:
        os.environ["INSPECT_CACHE_DIR"] = args.cache_dir
    else:
        os.environ["INSPECT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bedside-bench-cache-")
    cpu_at_start = common.cpu_seconds()
    data = prepare_data(args.bench, args.n + args.warmup, args.data)
    loads = preload() if args.score else {}
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="bedside-bench-logs-")
    tasks = tasks_for(args.bench, data, args)
    lanes = args.lanes
    result: dict[str, Any] = {
        "step": "run",
        "bench": args.bench,
        "argv": sys.argv[1:],
        "n": args.n,
        "latency": args.latency,
        "jitter": args.jitter,
        "lanes": lanes,
        "max_connections": args.max_connections or 6 * lanes,
        "log_realtime": args.log_realtime,
        "score_display": args.score_display,
        "score": args.score,
        "warmup": args.warmup,
        "educator": args.educator,
        "one_time_loads_s": loads,
        "machine": common.machine(),
        "embed_threads": embed_threads(),
    }
    with common.loopback_process(args.latency, args.jitter, port=args.port) as (base_url, server):

        def models() -> dict[str, Any]:
            return {
                "model": common.loopback_model(args.educator, base_url),
                "model_roles": {r: common.loopback_model(r, base_url) for r in ROLES[args.bench]},
            }

        common_args: dict[str, Any] = {
            "log_dir": log_dir,
            "display": "none",
            "score": args.score,
            "log_realtime": args.log_realtime,
            "score_display": args.score_display,
        }
        if args.warmup:
            limit = (args.n, args.n + args.warmup) if args.bench != "cpb" else args.warmup
            eval(tasks_for(args.bench, data, args), limit=limit, max_samples=lanes, **models(), **common_args)
        spy = PySpy(Path(args.profile)) if args.profile else None
        profiling = spy.start() if spy else False
        result["loadavg_before"] = common.loadavg()
        cpu0, t0 = common.cpu_seconds(), time.perf_counter()
        logs = eval(
            tasks,
            limit=args.n if args.bench != "cpb" or args.n < 1044 else None,
            max_samples=lanes,
            max_tasks=1,
            max_connections=result["max_connections"],
            **models(),
            **common_args,
        )
        wall = time.perf_counter() - t0
        cpu = common.cpu_seconds() - cpu0
        result["peak_rss_mb"] = common.peak_rss_mb()
        result["loadavg_after"] = common.loadavg()
        if profiling:
            spy.stop()
    result |= {"wall_s": wall, "cpu_s": cpu, "process_cpu_s": common.cpu_seconds() - cpu_at_start}
    result["server"] = {"calls": server.calls, "total_calls": server.total_calls, "cpu_s": server.cpu_s}
    result["logs"] = [log.location for log in logs]
    result["status"] = [log.status for log in logs]
    analyses = []
    inputs: list[dict[str, Any]] = []

    def collect(sample: Any) -> None:
        if not args.inputs:
            return
        score = (sample.scores or {}).get("factual_consistency")
        meta = score.metadata if score is not None else {}
        from bedside.discharge.store import educator_text

        inputs.append(
            {
                "id": sample.id,
                "pairs": list(zip(meta.get("note_answers") or [], meta.get("dialogue_answers") or [])),
                "educator_text": educator_text(sample.store.get("EncounterStore:history") or []),
            }
        )

    for log in logs:
        analyses.append(common.analyse_log(log.location, server.delays, args.latency, lanes, collect, server.handling))
    result["analysis"] = analyses
    # the run's bound: tasks run one after another, so their bounds add up
    result["critical_path_max_s"] = max(a["critical_path_max_s"] for a in analyses)
    result["lane_bound_s"] = sum(max(a["lane_bound_s"], a["critical_path_max_s"]) for a in analyses)
    result["lane_bound_server_s"] = sum(
        max(a["lane_bound_server_s"], a["critical_path_server_max_s"]) for a in analyses
    )
    result["calls_latency_over_concurrency_s"] = sum(a["calls_latency_over_concurrency_s"] for a in analyses)
    result["calls"] = sum(a["calls"] for a in analyses)
    result["served_calls"] = sum(a["served_calls"] for a in analyses)
    result["samples"] = sum(a["samples"] for a in analyses)
    # calls that asked for the cache and missed it (reached the server): on a second educator's run
    # these are the note-side judge calls that were not served from the first run's cache
    result["note_side_served"] = sum(a["cache_writes"] for a in analyses)
    if args.inputs:
        common.write_json(Path(args.inputs), {"cases": inputs})
    if profiling:
        from bench.profile_split import report, split

        buckets, _, total = split(Path(args.profile))
        result["profile"] = {
            "file": args.profile,
            "samples": total,
            "buckets": dict(buckets),
            "text": report(Path(args.profile)),
        }
    return result


# ---------------------------------------------------------------------------------------------
# the deterministic metrics


def step_metrics(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from bedside.scorers.discharge import text_metrics

    cases = json.loads(Path(args.inputs).read_text())["cases"]
    cases = [c for c in cases if c["pairs"]]
    result: dict[str, Any] = {
        "step": "metrics",
        "cases": len(cases),
        "machine": common.machine(),
        "loadavg_before": common.loadavg(),
    }
    result["texts"] = sum(2 * len(c["pairs"]) for c in cases)
    result["chars_per_text"] = sum(len(a) + len(b) for c in cases for a, b in c["pairs"]) / max(result["texts"], 1)
    t = time.perf_counter()
    loads = preload()
    result["one_time_loads_s"] = loads | {"total_s": time.perf_counter() - t}
    result["torch_threads"] = torch.get_num_threads()

    def timed(fn: Any) -> dict[str, float]:
        c0, t0 = common.cpu_seconds(), time.perf_counter()
        fn()
        return {"wall_s": time.perf_counter() - t0, "cpu_s": common.cpu_seconds() - c0}

    result["rouge_l"] = timed(lambda: [text_metrics.rouge_l(c["pairs"]) for c in cases])
    result["readability"] = timed(
        lambda: [text_metrics.readability(c["educator_text"]) for c in cases if c["educator_text"].strip()]
    )
    result["cosine"] = timed(lambda: [text_metrics.cosine(c["pairs"]) for c in cases])

    async def concurrently() -> None:  # as the scorers call them: every sample's metrics at once, off the loop
        async def one(c: dict[str, Any]) -> None:
            await text_metrics.readability_async(c["educator_text"])
            await text_metrics.rouge_l_async(c["pairs"])
            await text_metrics.cosine_async(c["pairs"])

        await asyncio.gather(*(one(c) for c in cases))

    result["all_concurrent"] = timed(lambda: asyncio.run(concurrently()))
    result["all_sequential_wall_s"] = sum(result[k]["wall_s"] for k in ("rouge_l", "readability", "cosine"))
    if args.compare_threads:
        # before/after of the torch thread setting, alternated in this one process (same load)
        sample = cases[: args.compare_threads]
        rounds = []
        for threads in (torch.get_num_threads(), os.cpu_count() or 1) * 2:
            torch.set_num_threads(threads)
            rounds.append({"threads": threads, **timed(lambda: [text_metrics.cosine(c["pairs"]) for c in sample])})
        result["threads_comparison"] = {"cases": len(sample), "rounds": rounds}
    result["loadavg_after"] = common.loadavg()
    return result


# ---------------------------------------------------------------------------------------------
# the whole benchmark


def sh(step: list[str], out: Path) -> dict[str, Any] | None:
    command = [sys.executable, str(Path(__file__).resolve()), *step, "--out", str(out)]
    print(f"[bench {time.strftime('%H:%M:%S')}] {' '.join(step)}  (load {common.loadavg()})", flush=True)
    proc = subprocess.run(command, text=True, capture_output=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        print("\n".join(tail), flush=True)
        result = {"step": step[0], "argv": step, "failed": True, "error": "\n".join(tail)}
        common.write_json(out, result)
        return result
    return json.loads(out.read_text())


def step_all(args: argparse.Namespace) -> None:
    run_dir = Path(args.dir or common.REPO / "logs" / "bench" / time.strftime("%Y%m%d-%H%M%S"))
    run_dir.mkdir(parents=True, exist_ok=True)
    n, small, lanes = args.n, args.small_n, args.lanes
    cache = run_dir / "cache"
    data = run_dir / "discharge.jsonl"
    common.replicate_discharge(n, data)
    port = str(common.free_port())
    lat = ["--latency", str(args.latency), "--jitter", str(args.jitter), "--lanes", str(lanes)]
    zero = ["--latency", "0", "--jitter", "0", "--lanes", str(lanes)]
    steps: list[tuple[str, list[str]]] = [
        # (a) + the first educator of (d): the reference cache is written here
        (
            "a_full",
            [
                "run",
                "--bench",
                "discharge",
                "--n",
                str(n),
                *lat,
                "--data",
                str(data),
                "--cache-dir",
                str(cache),
                "--port",
                port,
                "--inputs",
                str(run_dir / "metric_inputs.json"),
            ],
        ),
    ]
    if small and small < n:
        steps.append(("a_small", ["run", "--bench", "discharge", "--n", str(small), *lat]))
    sweep = ["--latency", str(args.latency), "--jitter", str(args.jitter)]
    steps += [
        # the same method at n=small: without the realtime sample buffer, and at half / double the lanes
        ("a_small_no_realtime", ["run", "--bench", "discharge", "--n", str(small), *lat, "--no-log-realtime"]),
        (
            "a_small_lean",
            ["run", "--bench", "discharge", "--n", str(small), *lat, "--no-log-realtime", "--no-score-display"],
        ),
        (
            "a_sweep_half",
            ["run", "--bench", "discharge", "--n", str(small), *sweep, "--lanes", str(max(1, lanes // 2))],
        ),
        ("a_sweep_double", ["run", "--bench", "discharge", "--n", str(small), *sweep, "--lanes", str(lanes * 2)]),
        (
            "a_lean_half",
            [
                "run",
                "--bench",
                "discharge",
                "--n",
                str(small),
                *sweep,
                "--lanes",
                str(max(1, lanes // 2)),
                "--no-log-realtime",
                "--no-score-display",
            ],
        ),
    ]
    steps += [
        # (d) a second educator on the same cases, same grader endpoint and cache
        (
            "d_second",
            [
                "run",
                "--bench",
                "discharge",
                "--n",
                str(n),
                *zero,
                "--data",
                str(data),
                "--cache-dir",
                str(cache),
                "--port",
                port,
                "--educator",
                "educator-b",
            ],
        ),
        # (c) the deterministic metrics over the texts of (a)
        ("c_metrics", ["metrics", "--inputs", str(run_dir / "metric_inputs.json"), "--compare-threads", "24"]),
        # (b) harness CPU per call at zero latency (warm process), with and without the realtime log buffer
        ("b_default", ["run", "--bench", "discharge", "--n", str(args.cpu_n), *zero, "--warmup", "2"]),
        (
            "b_no_realtime",
            ["run", "--bench", "discharge", "--n", str(args.cpu_n), *zero, "--warmup", "2", "--no-log-realtime"],
        ),
        ("b_unscored", ["run", "--bench", "discharge", "--n", str(args.cpu_n), *zero, "--warmup", "2", "--no-score"]),
        (
            "b_lean",
            [
                "run",
                "--bench",
                "discharge",
                "--n",
                str(args.cpu_n),
                *zero,
                "--warmup",
                "2",
                "--no-log-realtime",
                "--no-score-display",
            ],
        ),
        (
            "b_unscored_no_realtime",
            [
                "run",
                "--bench",
                "discharge",
                "--n",
                str(args.cpu_n),
                *zero,
                "--warmup",
                "2",
                "--no-score",
                "--no-log-realtime",
            ],
        ),
        (
            "b_profile",
            [
                "run",
                "--bench",
                "discharge",
                "--n",
                str(args.cpu_n),
                *zero,
                "--warmup",
                "2",
                "--profile",
                str(run_dir / "b_profile.pyspy.txt"),
            ],
        ),
        # (e) MedSP (Q100 shape) and CPB-Bench (1,044 cases)
        ("e_medsp", ["run", "--bench", "medsp", "--n", "100", *lat]),
        ("e_medsp_cpu", ["run", "--bench", "medsp", "--n", "100", *zero, "--warmup", "2"]),
        ("e_cpb", ["run", "--bench", "cpb", "--n", "1044", *lat]),
        ("e_cpb_cpu", ["run", "--bench", "cpb", "--n", "1044", *zero, "--warmup", "2"]),
        (
            "e_cpb_cpu_lean",
            ["run", "--bench", "cpb", "--n", "1044", *zero, "--warmup", "2", "--no-log-realtime", "--no-score-display"],
        ),
    ]
    only = set(args.only.split(",")) if args.only else None
    started = time.perf_counter()
    for name, step in steps:
        if only and name not in only:
            continue
        if step[0] == "run" and "cpb" in step and not common.CPB_DATA.exists():
            common.write_json(run_dir / f"{name}.json", {"step": "run", "skipped": f"{common.CPB_DATA} is absent"})
            continue
        sh(step, run_dir / f"{name}.json")
    print(f"[bench] all steps: {time.perf_counter() - started:.0f} s; results in {run_dir}", flush=True)
    from bench.report import write_report

    write_report(run_dir, RESULTS, command="make bench", argv=sys.argv[1:])
    print(f"[bench] wrote {RESULTS}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="bedside scale benchmark")
    sub = parser.add_subparsers(dest="step", required=True)
    run = sub.add_parser("run")
    run.add_argument("--bench", choices=sorted(ROLES), default="discharge")
    run.add_argument("--n", type=int, default=96)
    run.add_argument("--latency", type=float, default=0.3)
    run.add_argument("--jitter", type=float, default=0.05)
    run.add_argument("--lanes", type=int, default=16, help="max_samples")
    run.add_argument("--max-connections", type=int, default=0, help="per model (default 6 x lanes: never binding)")
    run.add_argument("--min-turns", type=int, default=10)
    run.add_argument("--max-turns", type=int, default=100)
    run.add_argument("--data")
    run.add_argument("--cache-dir")
    run.add_argument("--port", type=int, default=0)
    run.add_argument("--educator", default="educator")
    run.add_argument("--warmup", type=int, default=0)
    run.add_argument("--no-score", dest="score", action="store_false")
    run.add_argument("--no-log-realtime", dest="log_realtime", action="store_false")
    run.add_argument(
        "--no-score-display",
        dest="score_display",
        action="store_false",
        help="Inspect's --no-score-display: no running metrics while samples complete",
    )
    run.add_argument("--profile")
    run.add_argument("--inputs", help="write the factual-consistency answer pairs and educator texts here")
    run.add_argument("--log-dir")
    run.add_argument("--out", required=True)
    metrics = sub.add_parser("metrics")
    metrics.add_argument("--inputs", required=True)
    metrics.add_argument("--compare-threads", type=int, default=0)
    metrics.add_argument("--out", required=True)
    everything = sub.add_parser("all")
    everything.add_argument("--n", type=int, default=477)
    everything.add_argument("--small-n", type=int, default=96)
    everything.add_argument("--cpu-n", type=int, default=48)
    everything.add_argument("--lanes", type=int, default=8)
    everything.add_argument("--latency", type=float, default=0.3)
    everything.add_argument("--jitter", type=float, default=0.05)
    everything.add_argument("--dir")
    everything.add_argument("--only", help="comma-separated step names")
    report = sub.add_parser("report")
    report.add_argument("--dir", required=True)
    args = parser.parse_args()
    if args.step == "all":
        step_all(args)
        return
    if args.step == "report":
        from bench.report import write_report

        write_report(Path(args.dir), RESULTS, command="make bench", argv=sys.argv[1:])
        return
    result = step_run(args) if args.step == "run" else step_metrics(args)
    common.write_json(Path(args.out), result)


if __name__ == "__main__":
    main()
