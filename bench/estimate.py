"""``bedside estimate`` against a real second run: a 4-case scripted DischargeBench pilot estimates the
24-case scripted run; each run in a process of its own (as a user runs a pilot, then the run). Prints
estimate / measured for calls, input tokens, output tokens and wall time (one measurement: a ratio, not
a target; on a shared machine the wall time is noisy).

    .venv/bin/python bench/estimate.py [--cases 24] [--pilot 4] [--max-connections 4]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

RUN = """
import sys
from inspect_ai import eval
roles = {r: "bedside/scripted" for r in ("patient", "monitor", "grader")}
[log] = eval("bedside/discharge", model="bedside/scripted", model_roles=roles, limit=int(sys.argv[1]),
             task_args={"cache_references": False}, log_dir=sys.argv[2], display="none",
             max_connections=int(sys.argv[3]))
assert log.status == "success", log.error
print(log.location)
"""


def run(n: int, folder: Path, connections: int) -> str:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(n), str(folder), str(connections)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    options = argparse.ArgumentParser()
    options.add_argument("--cases", type=int, default=24)
    options.add_argument("--pilot", type=int, default=4)
    options.add_argument("--max-connections", type=int, default=4)
    args = options.parse_args()
    from inspect_ai.log import read_eval_log

    from bedside.reporting.estimate import estimate, read_pilot

    with tempfile.TemporaryDirectory() as tmp:
        pilot = run(args.pilot, Path(tmp) / "pilot", args.max_connections)
        full = run(args.cases, Path(tmp) / "run", args.max_connections)
        planned = estimate(read_pilot([pilot]), cases=args.cases, max_connections=args.max_connections)
        totals = planned["totals"].iloc[0]
        measured = read_pilot([full]).calls
        stats = read_eval_log(full, header_only=True).stats
        wall = (pd.Timestamp(stats.completed_at) - pd.Timestamp(stats.started_at)).total_seconds()
    print(f"{args.pilot}-case pilot -> {args.cases}-case run, max_connections={args.max_connections}")
    for field in ("calls", "input_tokens", "output_tokens"):
        print(
            f"  {field}: estimate {totals[field]:.0f} / measured {measured[field].sum():.0f}"
            f" = {totals[field] / measured[field].sum():.3f}"
        )
    print(
        f"  wall_seconds: estimate {totals['wall_seconds']:.1f} / measured {wall:.1f} = {totals['wall_seconds'] / wall:.2f}"
    )


if __name__ == "__main__":
    main()
