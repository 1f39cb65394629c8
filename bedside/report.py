"""Paired comparisons of eval logs on the same cases, e.g. DischargeBench under a stress overlay
(``-T behavior=care_resistance``) versus ``behavior=none``.

    bedside-report delta BASELINE.eval STRESSED.eval [STRESSED2.eval ...] [--csv out.csv]

For every numeric score key (``tcs``, ``comprehension``, ``naturalness``, ...) and every other log,
samples are paired by sample id and epoch; the delta is ``other - baseline`` per pair; the report
gives the mean delta, its 95 % paired t-interval, n pairs, and how many pairs were left out because
one side was unscored (NaN). Deltas are computed only on the same cases, never across different
case sets.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

import pandas as pd
from inspect_ai.log import EvalLog, read_eval_log
from scipy import stats

#: score keys that are bookkeeping, not outcomes
SKIP_KEYS = {"unscored"}


def score_table(log: EvalLog) -> pd.DataFrame:
    """One row per (sample id, epoch, scorer, key) with the float value (NaN = unscored)."""
    rows = []
    for sample in log.samples or []:
        for scorer, score in (sample.scores or {}).items():
            values = score.value if isinstance(score.value, dict) else {scorer: score.value}
            for key, value in values.items():
                if key in SKIP_KEYS or isinstance(value, bool | str) or value is None:
                    continue
                rows.append({"id": str(sample.id), "epoch": sample.epoch, "scorer": scorer, "key": key, "value": float(value)})
    return pd.DataFrame(rows, columns=["id", "epoch", "scorer", "key", "value"])


def paired_delta(baseline: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Mean of (other - baseline) per score key over the shared (id, epoch) pairs, with a 95 % CI."""
    merged = baseline.merge(other, on=["id", "epoch", "scorer", "key"], suffixes=("_base", "_other"))
    out = []
    for (scorer, key), group in merged.groupby(["scorer", "key"], sort=True):
        valid = group.dropna(subset=["value_base", "value_other"])
        deltas = valid["value_other"] - valid["value_base"]
        n = len(deltas)
        mean = float(deltas.mean()) if n else math.nan
        if n >= 2:
            sem = float(deltas.std(ddof=1)) / math.sqrt(n)
            half = float(stats.t.ppf(0.975, n - 1)) * sem
        else:
            half = math.nan
        out.append({
            "scorer": scorer, "key": key,
            "baseline": float(valid["value_base"].mean()) if n else math.nan,
            "other": float(valid["value_other"].mean()) if n else math.nan,
            "delta": mean, "ci_lower": mean - half, "ci_upper": mean + half,
            "n": n, "excluded_unscored": len(group) - n,
        })
    return pd.DataFrame(out)


def label(log: EvalLog) -> str:
    args = log.eval.task_args or {}
    behavior = args.get("behavior", "none")
    return f"{log.eval.task} behavior={behavior} ({log.eval.model})"


def delta_report(baseline_path: str, other_paths: Sequence[str]) -> pd.DataFrame:
    baseline = read_eval_log(baseline_path)
    base_table = score_table(baseline)
    frames = []
    for path in other_paths:
        other = read_eval_log(path)
        shared = set(base_table["id"]) & set(score_table(other)["id"])
        if not shared:
            raise ValueError(f"{path} and {baseline_path} share no sample ids: deltas need the same cases")
        frame = paired_delta(base_table, score_table(other))
        frame.insert(0, "comparison", f"{label(other)} vs {label(baseline)}")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bedside-report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    delta = sub.add_parser("delta", help="paired score deltas of one or more logs versus a baseline log")
    delta.add_argument("baseline")
    delta.add_argument("others", nargs="+")
    delta.add_argument("--csv", help="also write the table to this CSV file")
    args = parser.parse_args(argv)
    table = delta_report(args.baseline, args.others)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.3f}".format):
        for comparison, group in table.groupby("comparison", sort=False):
            print(comparison)
            print(group.drop(columns="comparison").to_string(index=False))
            print()
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
