"""Tables from bedside eval logs.

    bedside-report strata LOG [LOG ...] [--by KEY ...] [--csv out.csv]
    bedside-report audit LOG [LOG ...]
    bedside-report delta BASELINE.eval STRESSED.eval [STRESSED2.eval ...] [--csv out.csv]

``strata``: every score key's mean, 95 % CI and n per value of each stratum (DischargeBench: ICD
chapter, the persona axes, end reason; CPB-Bench: category, dataset, language; MedSP1000:
specialty, reported only for specialties with at least 5 scored cases; MedSP's item-pooled
``micro`` and ``macro`` are pooled per specialty by ``bedside report`` instead). Inspect
itself shows only the headline numbers. The interval follows bedside's one rule, chosen by each
score key's declared scale (:mod:`bedside.intervals`: Wilson for rates declared binary, otherwise a
percentile bootstrap of the mean; none below n = 2), the same as the headline; unscored samples
are left out of n. The ``health`` scorer's copies of other scorers' bookkeeping are left out.

``audit``: DischargeBench's clean-complete audit (paper Appendix A.7.2): among clean-complete
sessions, the short ones (≤ 15 turns), the short ones with a Topic Checklist score below 0.5, and
those in which the Virtual Patient broke character, with counts and case ids.

``delta``: paired comparisons of logs on the same cases, e.g. DischargeBench under a stress overlay
(``-T behavior=care_resistance``) versus ``behavior=none``.
For every numeric score key (``tcs``, ``comprehension``, ``naturalness``, ...) and every other log,
samples are paired by sample id and epoch; the delta is ``other - baseline`` per pair; the report
gives the mean delta, its 95 % interval (bedside's rule applied to the per-pair deltas: percentile
bootstrap, :mod:`bedside.intervals`), n pairs, and how many pairs were left out because
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

from bedside.intervals import scale_of, summarise

#: score keys that are bookkeeping, not outcomes
SKIP_KEYS = {"unscored", "safety_turns", "safety_unsafe_turns", "safety_unscored_turns"}
#: scorers whose keys copy other scorers' (the health block): left out of per-stratum tables
DERIVED_SCORERS = {"health"}

#: the strata each benchmark's results are broken down by (sample metadata, else score metadata)
STRATA = (
    "icd_chapter", "personality", "education_level", "health_literacy", "recall_level", "end_reason",
    "category", "dataset", "language", "specialty",
)
#: fewest scored cases a stratum needs to be reported (MedSP1000: per-specialty rates need 5)
MIN_N = {"specialty": 5}
#: MedSP1000 rates pooled over items (ratio estimators): a mean of per-case values would be wrong, so
#: ``strata`` leaves them out; ``bedside report`` pools them per specialty from each case's counts
POOLED_KEYS = {"micro", "macro"}


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


def strata_table(log: EvalLog, keys: Sequence[str] = STRATA) -> pd.DataFrame:
    """mean, 95 % CI and n of every score key per value of each stratum key present in the log."""
    rows = []
    for sample in log.samples or []:
        for scorer, score in (sample.scores or {}).items():
            if scorer in DERIVED_SCORERS:
                continue
            values = score.value if isinstance(score.value, dict) else {scorer: score.value}
            meta = {**(score.metadata or {}), **(sample.metadata or {})}
            for key, value in values.items():
                if key in SKIP_KEYS or key in POOLED_KEYS or isinstance(value, bool | str) or value is None:
                    continue
                for stratum in keys:
                    if stratum in meta and isinstance(meta[stratum], str | int | float):
                        rows.append({"stratum": stratum, "group": str(meta[stratum]), "scorer": scorer,
                                     "key": key, "value": float(value)})
    frame = pd.DataFrame(rows, columns=["stratum", "group", "scorer", "key", "value"])
    out = []
    for (stratum, scorer, key, group), part in frame.groupby(["stratum", "scorer", "key", "group"], sort=True):
        values = [v for v in part["value"] if v == v]
        if len(values) < MIN_N.get(stratum, 1):
            continue
        row = summarise(values, scale_of(key))
        out.append({"stratum": stratum, "group": group, "scorer": scorer, "key": key, **row,
                    "unscored": len(part) - len(values)})
    return pd.DataFrame(out, columns=["stratum", "group", "scorer", "key", "mean", "ci_lower", "ci_upper", "n", "unscored"])


LOW_TCS = 0.5  # A.7.2: "TCS below 0.5 (fewer than half of the required discharge topics covered)"


def audit_table(log: EvalLog) -> dict[str, object]:
    """DischargeBench's clean-complete audit (A.7.2) of one log."""
    clean, short, low, breaks = [], [], [], []
    for sample in log.samples or []:
        outcome = (sample.scores or {}).get("encounter_outcome")
        if outcome is None or outcome.answer != "clean_complete":
            continue
        sid = str(sample.id)
        clean.append(sid)
        if outcome.value.get("short_session") == 1.0:
            short.append(sid)
            tcs = (sample.scores or {}).get("topic_checklist")
            value = tcs.value.get("tcs") if tcs is not None else None
            if isinstance(value, float) and value == value and value < LOW_TCS:
                low.append(sid)
        if outcome.value.get("char_break") == 1.0:
            breaks.append(sid)
    return {"log": label(log), "clean_complete": len(clean), "short": len(short),
            "low_tcs_short": len(low), "char_break": len(breaks),
            "complete_after_audit": len(set(clean) - set(low) - set(breaks)),
            "low_tcs_short_ids": low, "char_break_ids": breaks}


def paired_delta(baseline: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Mean of (other - baseline) per score key over the shared (id, epoch) pairs, with a 95 % CI."""
    merged = baseline.merge(other, on=["id", "epoch", "scorer", "key"], suffixes=("_base", "_other"))
    out = []
    for (scorer, key), group in merged.groupby(["scorer", "key"], sort=True):
        valid = group.dropna(subset=["value_base", "value_other"])
        deltas = valid["value_other"] - valid["value_base"]
        n = len(deltas)
        row = summarise(deltas.tolist())  # a difference: no declared scale; the bootstrap stays in its range
        out.append({
            "scorer": scorer, "key": key,
            "baseline": float(valid["value_base"].mean()) if n else math.nan,
            "other": float(valid["value_other"].mean()) if n else math.nan,
            "delta": row["mean"], "ci_lower": row["ci_lower"], "ci_upper": row["ci_upper"],
            "n": n, "excluded_unscored": len(group) - n,
        })
    return pd.DataFrame(out)


def label(log: EvalLog) -> str:
    args = log.eval.task_args or {}
    behavior = args.get("behavior", "none")
    return f"{log.eval.task} behavior={behavior} ({log.eval.model})"


def _own(table: pd.DataFrame) -> pd.DataFrame:
    """Without the health block's copies of other scorers' keys."""
    return table[~table["scorer"].isin(DERIVED_SCORERS)]


def delta_report(baseline_path: str, other_paths: Sequence[str]) -> pd.DataFrame:
    baseline = read_eval_log(baseline_path)
    base_table = _own(score_table(baseline))
    frames = []
    for path in other_paths:
        other = read_eval_log(path)
        shared = set(base_table["id"]) & set(score_table(other)["id"])
        if not shared:
            raise ValueError(f"{path} and {baseline_path} share no sample ids: deltas need the same cases")
        frame = paired_delta(base_table, _own(score_table(other)))
        frame.insert(0, "comparison", f"{label(other)} vs {label(baseline)}")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def run_strata(args: argparse.Namespace) -> int:
    frames = []
    for path in args.logs:
        log = read_eval_log(path)
        frame = strata_table(log, args.by or STRATA)
        frame.insert(0, "log", label(log))
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False, na_rep="–"))  # "–": no interval (n < 2)
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def run_audit(args: argparse.Namespace) -> int:
    for path in args.logs:
        row = audit_table(read_eval_log(path))
        print(f"{row.pop('log')}")
        for key, value in row.items():
            print(f"  {key}: {value}")
    return 0


def run_delta(args: argparse.Namespace) -> int:
    table = delta_report(args.baseline, args.others)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.3f}".format):
        for comparison, group in table.groupby("comparison", sort=False):
            print(comparison)
            print(group.drop(columns="comparison").to_string(index=False, na_rep="–"))
            print()
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``strata``, ``audit`` and ``delta`` sub-commands (module docstring)."""
    by = sub.add_parser("strata", help="every score per stratum (mean, 95 %% CI, n)")
    by.add_argument("logs", nargs="+")
    by.add_argument("--by", action="append", help=f"stratum key (repeatable; default: {', '.join(STRATA)})")
    by.add_argument("--csv", help="also write the table to this CSV file")
    by.set_defaults(func=run_strata)
    audit = sub.add_parser("audit", help="DischargeBench clean-complete audit (Appendix A.7.2)")
    audit.add_argument("logs", nargs="+")
    audit.set_defaults(func=run_audit)
    delta = sub.add_parser("delta", help="paired score deltas of one or more logs versus a baseline log")
    delta.add_argument("baseline")
    delta.add_argument("others", nargs="+")
    delta.add_argument("--csv", help="also write the table to this CSV file")
    delta.set_defaults(func=run_delta)


def main(argv: Sequence[str] | None = None) -> int:
    """``bedside-report``: the same sub-commands as ``bedside strata|audit|delta``."""
    parser = argparse.ArgumentParser(prog="bedside-report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
