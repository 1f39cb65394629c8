"""``bedside compare BASELINE.eval CANDIDATE.eval --metric KEY [--metric ...] --max-drop X``: a
regression gate for CI.

For each metric (a score key such as ``tcs``, or ``scorer/key`` when two scorers share a key),
samples of the two logs are paired by sample id and epoch; pairs where either side is unscored (NaN)
are left out (and counted). The difference is ``candidate − baseline`` per pair; its mean gets a 95 %
interval by bedside's one interval rule (:mod:`bedside.intervals`): the percentile bootstrap of the
mean of the per-pair differences — pairs resampled together — with ``--resamples`` resamples and
``--seed``; no interval below two pairs. The *drop* is the decrease in the good direction: ``−mean
difference`` for higher-is-better keys, ``+mean difference`` for lower-is-better keys
(:data:`LOWER_IS_BETTER`, plus any ``--lower-is-better KEY``).

A metric **regresses** when its drop exceeds ``--max-drop`` *and* its interval excludes zero on the
bad side; the command then exits 1. A drop within the noise (interval covering 0) or below the
threshold passes. Exit 2: unusable input (no shared sample ids, a metric absent from a log, no
scored pair). Every run prints a Markdown summary (also written to ``--markdown FILE``, e.g.
``$GITHUB_STEP_SUMMARY``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from inspect_ai.log import read_eval_log
from bedside.intervals import mean_interval
from bedside.report import score_table

#: score keys for which lower is better (rates of bad outcomes, counts of problems)
LOWER_IS_BETTER = frozenset({
    "system_failure", "erroneous", "short_session", "char_break", "discarded_turns", "soft_corrections",
    "monitor_unparsed", "patient_repaired", "role_fallbacks", "unscored", "judge_unscored", "items_unscored",
    "unsupported_actions", "failure", "overreaction", "persistence", "no_reply", "persistence_unscored",
    "continuation_error",
})


class CompareError(ValueError):
    """Input that cannot be compared (exit code 2)."""


@dataclass
class Result:
    metric: str
    direction: str
    n: int
    excluded: int
    baseline: float
    candidate: float
    difference: float
    ci_lower: float
    ci_upper: float
    drop: float
    max_drop: float
    verdict: str

    @property
    def regressed(self) -> bool:
        return self.verdict == "regression"


def select(table: pd.DataFrame, metric: str, where: str) -> pd.DataFrame:
    scorer, _, key = metric.rpartition("/")
    part = table[(table["key"] == key) & ((table["scorer"] == scorer) if scorer else True)]
    if part.empty:
        raise CompareError(f"metric {metric!r} is not a score key of {where}")
    if part["scorer"].nunique() > 1:
        raise CompareError(f"metric {metric!r} is a key of several scorers in {where} "
                           f"({', '.join(sorted(part['scorer'].unique()))}): write it as scorer/key")
    return part[["id", "epoch", "value"]]


def compare_metric(baseline: pd.DataFrame, candidate: pd.DataFrame, metric: str, max_drop: float, *,
                   lower_is_better: bool = False, resamples: int = 9999, seed: int = 0) -> Result:
    key = metric.rpartition("/")[2]
    pairs = select(baseline, metric, "the baseline").merge(select(candidate, metric, "the candidate"),
                                                           on=["id", "epoch"], suffixes=("_base", "_cand"))
    valid = pairs.dropna(subset=["value_base", "value_cand"])
    n = len(valid)
    if n == 0:
        raise CompareError(f"metric {metric!r}: no pair of scored samples shared by the two logs")
    base = valid["value_base"].to_numpy(dtype=float)
    cand = valid["value_cand"].to_numpy(dtype=float)
    difference = float(np.mean(cand - base))
    interval = mean_interval(cand - base, resamples=resamples, seed=seed)
    lower, upper = interval if interval is not None else (math.nan, math.nan)
    sign = 1.0 if lower_is_better else -1.0
    drop = sign * difference + 0.0  # no -0.0
    # the interval of the drop: the difference's interval mapped to the good direction
    drop_low = min(sign * lower, sign * upper)
    drop_high = max(sign * lower, sign * upper)
    if drop > max_drop and drop_low > 0:
        verdict = "regression"
    elif drop_high < 0:
        verdict = "improvement"
    elif drop_low > 0:
        verdict = "drop within threshold"
    else:
        verdict = "no significant change"
    return Result(metric=metric, direction="lower is better" if lower_is_better else "higher is better",
                  n=n, excluded=len(pairs) - n, baseline=float(base.mean()), candidate=float(cand.mean()),
                  difference=difference, ci_lower=lower, ci_upper=upper, drop=drop, max_drop=max_drop,
                  verdict=verdict)


def compare(baseline_path: str, candidate_path: str, metrics: Sequence[str], max_drop: float, *,
            lower_is_better: Sequence[str] = (), resamples: int = 9999, seed: int = 0) -> list[Result]:
    baseline = score_table(read_eval_log(baseline_path))
    candidate = score_table(read_eval_log(candidate_path))
    shared = set(baseline["id"]) & set(candidate["id"])
    if not shared:
        raise CompareError(f"{baseline_path} and {candidate_path} share no sample id: a paired comparison needs the same cases")
    lower = LOWER_IS_BETTER | set(lower_is_better)
    return [compare_metric(baseline, candidate, m, max_drop, lower_is_better=m.rpartition("/")[2] in lower or m in lower,
                           resamples=resamples, seed=seed) for m in metrics]


ICON = {"regression": "❌", "improvement": "✅", "drop within threshold": "⚠️", "no significant change": "✅"}


def markdown(results: Sequence[Result], baseline: str, candidate: str, resamples: int, seed: int) -> str:
    failed = [r for r in results if r.regressed]
    head = "❌ **Regression**" if failed else "✅ **No regression**"
    lines = [
        f"## bedside compare: {head}", "",
        f"Baseline `{baseline}` vs candidate `{candidate}`: paired by sample id and epoch; "
        f"difference = candidate − baseline; 95 % paired-bootstrap CI ({resamples} resamples, seed {seed}). "
        "A metric fails when its drop exceeds the threshold and the CI excludes zero.", "",
        "| metric | direction | n pairs | baseline | candidate | difference [95 % CI] | drop | max drop | verdict |",
        "|---|---|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in results:
        excluded = f" ({r.excluded} unscored left out)" if r.excluded else ""
        interval = f" [{r.ci_lower:+.4f}, {r.ci_upper:+.4f}]" if r.ci_lower == r.ci_lower else " (no interval: n < 2)"
        lines.append(f"| `{r.metric}` | {r.direction} | {r.n}{excluded} | {r.baseline:.4f} | {r.candidate:.4f} | "
                     f"{r.difference:+.4f}{interval} | {r.drop:+.4f} | {r.max_drop:g} | "
                     f"{ICON[r.verdict]} {r.verdict} |")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    try:
        results = compare(args.baseline, args.candidate, args.metric, args.max_drop,
                          lower_is_better=args.lower_is_better or (), resamples=args.resamples, seed=args.seed)
    except CompareError as error:
        print(f"bedside compare: {error}")
        return 2
    text = markdown(results, args.baseline, args.candidate, args.resamples, args.seed)
    print(text)
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as handle:
            handle.write(text)
    if args.csv:
        pd.DataFrame([asdict(r) for r in results]).to_csv(args.csv, index=False)
    return 1 if any(r.regressed for r in results) else 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``compare`` sub-command (module docstring)."""
    parser = sub.add_parser("compare", help="paired-bootstrap regression gate of a candidate log against a baseline log",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", metavar="BASELINE.eval")
    parser.add_argument("candidate", metavar="CANDIDATE.eval")
    parser.add_argument("--metric", action="append", required=True, metavar="KEY",
                        help="score key (or scorer/key) to gate on; repeatable")
    parser.add_argument("--max-drop", type=float, required=True, metavar="X",
                        help="largest tolerated drop of the mean (in the metric's units)")
    parser.add_argument("--lower-is-better", action="append", metavar="KEY",
                        help=f"treat KEY as lower-is-better (built in: {', '.join(sorted(LOWER_IS_BETTER))})")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--resamples", type=int, default=9999, help="bootstrap resamples (default 9999)")
    parser.add_argument("--markdown", metavar="FILE", help="append the Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY)")
    parser.add_argument("--csv", metavar="FILE", help="also write the results as CSV")
    parser.set_defaults(func=run)
