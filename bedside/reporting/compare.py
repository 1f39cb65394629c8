"""``bedside compare BASELINE.eval CANDIDATE.eval [CANDIDATE2.eval ...] [--metric KEY ...] [--max-drop X]``:
paired comparison of logs on the same cases, and the regression gate for CI.

For each metric (a score key such as ``tcs``, or ``scorer/key`` when two scorers share a key; a key
the ``health`` block copies means the scorer's own; without ``--metric``: every numeric score key both
logs hold, the health block's copies left out), samples of the two logs are paired by sample id and
epoch; pairs where either side is unscored (NaN) are left out (and counted). With ``--epochs`` the
epochs of a case are averaged on each side first (over its scored pairs), so that the case is the
unit: its epochs are not independent draws. The difference is ``candidate − baseline`` per case; its
mean gets a 95 % interval by bedside's one interval rule (:mod:`bedside.intervals`): the percentile
bootstrap of the mean of the per-case differences — both sides of a case resampled together — with
``--resamples`` resamples and ``--seed``; no interval below two cases.

Beside each difference: the **minimum detectable difference** (MDD) at the run's n cases, from the SD
of the per-case differences, at ``--power`` (default 0.8) and ``--alpha`` (default 0.05) — the smallest
true difference a paired t-test of these cases detects with that power: this comparison can reliably
detect differences ≥ MDD (:mod:`bedside.reporting.detectable`: the formula, and its interval). It says
what the comparison could see, not whether the difference it saw is real: that is the interval's (an
observed difference smaller than the MDD whose interval excludes zero is significant). When a log has
two or more epochs of a case, its own **run-to-run noise** follows, for the compared keys
(:mod:`bedside.reporting.epochs`): the within-case SD over epochs, and for yes/no verdicts the share of
units whose verdict flips between epochs (``--pass-k K`` adds pass^K).
The *drop* is the decrease in the good direction: ``−mean difference`` for higher-is-better keys,
``+mean difference`` for lower-is-better keys (the scorer that writes a key declares its direction,
:mod:`bedside.score_keys`, read through :mod:`bedside.benchmarks`; plus any ``--lower-is-better KEY``).

With ``--max-drop`` it is a gate: a metric **regresses** when its drop exceeds ``--max-drop`` *and*
its interval excludes zero on the bad side; the command then exits 1. A drop within the noise
(interval covering 0) or below the threshold passes. Without ``--max-drop`` it only reports (e.g.
a task under a variant argument, ``-T behavior=...``, against its neutral value).
Exit 2: unusable input (no shared sample ids, a metric absent from a log, no scored pair). Every
run prints a Markdown summary per candidate (also written to ``--markdown FILE``, e.g.
``$GITHUB_STEP_SUMMARY``). Deltas are computed only on the same cases, never across case sets.

Logs run on different data or prompts (their recorded hashes, :mod:`bedside.versions`) are refused unless
``--allow-different-data``. Runs of a benchmark that declares paper-silent run options
(:mod:`bedside.reporting.run_options`, e.g. a monitor's policy) are compared whatever
their options: the summary shows each run's values, and when they differ in one it says so in a warning
line (also on stderr; the CSV's ``run_options_differ`` names the options), since the differences then
measure that option's effect as well as the models'.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from inspect_ai.log import EvalLog

from bedside import benchmarks
from bedside.cli import add_command, bad_input
from bedside.intervals import mean_interval
from bedside.reporting import detectable, epochs, run_options
from bedside.reporting.load import LoadedLog, as_run, benchmark_of, read_run, scores_frame
from bedside.reporting.run import Run
from bedside.reporting.scores import own, score_table
from bedside.versions import DataMismatch, check_same_data

#: bootstrap resamples of ``bedside compare``
RESAMPLES = 9999


class CompareError(ValueError):
    """Input that cannot be compared (exit code 2)."""


@dataclass
class Result:
    metric: str
    direction: str
    n: int  # cases with a scored pair
    excluded: int  # unscored pairs (case × epoch) left out
    baseline: float
    candidate: float
    difference: float
    ci_lower: float
    ci_upper: float
    drop: float
    max_drop: float
    verdict: str
    epochs: int  # most scored pairs of a case
    sd_difference: float  # SD of the per-case differences
    mdd: float  # minimum detectable difference at n, --power and --alpha
    mdd_ci_lower: float
    mdd_ci_upper: float

    @property
    def regressed(self) -> bool:
        return self.verdict == "regression"


def select(table: pd.DataFrame, metric: str, where: str) -> pd.DataFrame:
    scorer, _, key = metric.rpartition("/")
    part = table[(table["key"] == key) & ((table["scorer"] == scorer) if scorer else True)]
    if not scorer and part["scorer"].nunique() > 1:  # the health block's copy of a scorer's own key
        part = own(part)
    if part.empty:
        raise CompareError(f"metric {metric!r} is not a score key of {where}")
    if part["scorer"].nunique() > 1:
        raise CompareError(
            f"metric {metric!r} is a key of several scorers in {where} "
            f"({', '.join(sorted(part['scorer'].unique()))}): write it as scorer/key"
        )
    return part[["id", "epoch", "value"]]


def compare_metric(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    metric: str,
    max_drop: float | None,
    *,
    lower_is_better: bool = False,
    resamples: int = RESAMPLES,
    seed: int = 0,
    power: float = detectable.POWER,
    alpha: float = detectable.ALPHA,
) -> Result:
    """One metric's paired comparison; ``max_drop=None``: no gate (never a regression)."""
    pairs = select(baseline, metric, "the baseline").merge(
        select(candidate, metric, "the candidate"), on=["id", "epoch"], suffixes=("_base", "_cand")
    )
    valid = pairs.dropna(subset=["value_base", "value_cand"])
    if len(valid) == 0:
        raise CompareError(f"metric {metric!r}: no pair of scored samples shared by the two logs")
    # the case is the unit: its scored epochs averaged on each side (cases in the logs' order)
    cases = valid.groupby("id", sort=False)[["value_base", "value_cand"]].mean()
    n = len(cases)
    base = cases["value_base"].to_numpy(dtype=float)
    cand = cases["value_cand"].to_numpy(dtype=float)
    difference = float(np.mean(cand - base))
    floor = detectable.detectable(cand - base, benchmarks.score_key(metric).scale, power, alpha)
    interval = mean_interval(cand - base, resamples=resamples, seed=seed)
    lower, upper = interval if interval is not None else (math.nan, math.nan)
    sign = 1.0 if lower_is_better else -1.0
    drop = sign * difference + 0.0  # no -0.0
    # the interval of the drop: the difference's interval mapped to the good direction
    drop_low = min(sign * lower, sign * upper)
    drop_high = max(sign * lower, sign * upper)
    if max_drop is not None and drop > max_drop and drop_low > 0:
        verdict = "regression"
    elif drop_high < 0:
        verdict = "improvement"
    elif drop_low > 0:
        verdict = "drop within threshold" if max_drop is not None else "significant drop"
    else:
        verdict = "no significant change"
    return Result(
        metric=metric,
        direction="lower is better" if lower_is_better else "higher is better",
        n=n,
        excluded=len(pairs) - len(valid),
        baseline=float(base.mean()),
        candidate=float(cand.mean()),
        difference=difference,
        ci_lower=lower,
        ci_upper=upper,
        drop=drop,
        max_drop=math.nan if max_drop is None else max_drop,
        verdict=verdict,
        epochs=int(valid.groupby("id").size().max()),
        sd_difference=floor["sd"],
        mdd=floor["mdd"],
        mdd_ci_lower=floor["mdd_low"],
        mdd_ci_upper=floor["mdd_high"],
    )


def shared_metrics(baseline: pd.DataFrame, candidate: pd.DataFrame) -> list[str]:
    """Every (scorer, key) both tables hold with a scored pair, the health block's copies left out,
    named ``key`` when no other scorer has that key, else ``scorer/key``."""
    base, cand = own(baseline), own(candidate)
    merged = base.merge(cand, on=["id", "epoch", "scorer", "key"], suffixes=("_base", "_cand"))
    scored = merged.dropna(subset=["value_base", "value_cand"])
    pairs = sorted(set(zip(scored["scorer"], scored["key"])))
    scorers_of = pd.concat([base, cand]).groupby("key")["scorer"].nunique()
    return [key if scorers_of[key] == 1 else f"{scorer}/{key}" for scorer, key in pairs]


def compare(
    baseline: str | Run | EvalLog,
    candidate: str | Run | EvalLog,
    metrics: Sequence[str] | None,
    max_drop: float | None,
    *,
    lower_is_better: Sequence[str] = (),
    resamples: int = RESAMPLES,
    seed: int = 0,
    allow_different_data: bool = False,
    power: float = detectable.POWER,
    alpha: float = detectable.ALPHA,
) -> list[Result]:
    """Every metric of ``metrics`` (``None``: every shared key) of the candidate log against the baseline log
    (each a path, or a log read already, named in messages by its location); logs run on different data or
    prompts are refused unless ``allow_different_data``."""
    baseline_log, candidate_log = as_run(baseline), as_run(candidate)
    baseline_path, candidate_path = baseline_log.location, candidate_log.location
    try:
        check_same_data(baseline_log, baseline_path, candidate_log, candidate_path, allow_different_data)
    except DataMismatch as error:
        raise CompareError(str(error)) from None
    base_scores, cand_scores = score_table(baseline_log), score_table(candidate_log)
    shared = set(base_scores["id"]) & set(cand_scores["id"])
    if not shared:
        raise CompareError(
            f"{baseline_path} and {candidate_path} share no sample id: a paired comparison needs the same cases"
        )
    benchmark = benchmarks.of_task(baseline_log.eval.task)
    lower = benchmarks.lower_is_better(benchmark.name if benchmark else None) | set(lower_is_better)
    metrics = shared_metrics(base_scores, cand_scores) if metrics is None else metrics
    return [
        compare_metric(
            base_scores,
            cand_scores,
            m,
            max_drop,
            lower_is_better=m.rpartition("/")[2] in lower or m in lower,
            resamples=resamples,
            seed=seed,
            power=power,
            alpha=alpha,
        )
        for m in metrics
    ]


ICON = {
    "regression": "❌",
    "improvement": "✅",
    "drop within threshold": "⚠️",
    "no significant change": "✅",
    "significant drop": "⚠️",
}


def option_warnings(options: Sequence[dict]) -> list[str]:
    """One line per run option the two runs differ in (``options``: :func:`bedside.reporting.run_options.pair`
    of baseline and candidate)."""
    return [
        f"warning: the two runs differ in {o['option']} (baseline {o['a']}, candidate {o['b']}): "
        "the differences measure this option's effect as well as the models'"
        for o in options
        if o["differs"]
    ]


def markdown(
    results: Sequence[Result],
    baseline: str,
    candidate: str,
    resamples: int,
    seed: int,
    gate: bool = True,
    options: Sequence[dict] = (),
    power: float = detectable.POWER,
    alpha: float = detectable.ALPHA,
    noise: Sequence[str] = (),
) -> str:
    """The summary of one candidate; ``options``: the two runs' run options
    (:func:`bedside.reporting.run_options.pair`); ``noise``: the lines of :func:`noise_lines`."""
    failed = [r for r in results if r.regressed]
    head = ("❌ **Regression**" if failed else "✅ **No regression**") if gate else "paired differences (no gate)"
    rule = (
        "A metric fails when its drop exceeds the threshold and the CI excludes zero."
        if gate
        else "No --max-drop: nothing fails; a significant drop is one whose CI excludes zero."
    )
    lines = [
        f"## bedside compare: {head}",
        "",
        f"Baseline `{baseline}` vs candidate `{candidate}`: paired by sample id and epoch, epochs averaged per "
        f"case; difference = candidate − baseline; 95 % paired-bootstrap CI ({resamples} resamples, seed {seed}). "
        + rule,
        "",
        detectable.describe(power, alpha) + ".",
        "",
        "| metric | direction | n cases | baseline | candidate | difference [95 % CI] "
        "| reliably detects ≥ MDD [95 % CI] | drop | max drop | verdict |",
        "|---|---|---:|---:|---:|---|---|---:|---:|---|",
    ]
    for r in results:
        excluded = f" ({r.excluded} unscored left out)" if r.excluded else ""
        epochs_shown = f" × {r.epochs} epochs" if r.epochs > 1 else ""
        interval = f" [{r.ci_lower:+.4f}, {r.ci_upper:+.4f}]" if r.ci_lower == r.ci_lower else " (no interval: n < 2)"
        floor = f"{r.mdd:.4f} [{r.mdd_ci_lower:.4f}, {r.mdd_ci_upper:.4f}]" if r.mdd == r.mdd else "– (n < 2)"
        threshold = f"{r.max_drop:g}" if r.max_drop == r.max_drop else "–"
        lines.append(
            f"| `{r.metric}` | {r.direction} | {r.n}{epochs_shown}{excluded} | {r.baseline:.4f} | {r.candidate:.4f} | "
            f"{r.difference:+.4f}{interval} | {floor} | {r.drop:+.4f} | {threshold} | "
            f"{ICON[r.verdict]} {r.verdict} |"
        )
    if options:
        lines += [
            "",
            "Run options (the paper-silent options of each run):",
            "",
            "| option | baseline | candidate |",
            "|---|---|---|",
            *(f"| `{o['option']}` | {o['a']} | {o['b']}{' ⚠️' if o['differs'] else ''} |" for o in options),
        ]
        warnings = option_warnings(options)
        lines += ["", *(f"⚠️ **{line}**" for line in warnings)] if warnings else []
    lines += ["", *noise] if noise else []
    return "\n".join(lines) + "\n"


def noise_lines(runs: dict[str, Run], metrics: Sequence[str], pass_k: int | None = None) -> list[str]:
    """Markdown: each run's run-to-run noise over its epochs (:mod:`bedside.reporting.epochs`) for the compared
    ``metrics``; nothing when no run has two epochs of a case. ``runs``: name (baseline, candidate) -> log."""
    repeated = [
        LoadedLog(str(log.location), log, name, benchmark_of(log))
        for name, log in runs.items()
        if epochs.epochs_of(log) >= 2
    ]
    if not repeated:
        return []
    keys = {m.rpartition("/")[2] for m in metrics}
    lines = [
        "Run-to-run noise over epochs (each run on its own; cases scored in two or more epochs):",
        "",
        "| run | key | n cases | epochs | within-case SD [95 % CI] |",
        "|---|---|---:|---:|---|",
    ]
    sd = epochs.within_case_sd(scores_frame(repeated))
    for r in sd[sd["key"].isin(keys)].to_dict("records") if not sd.empty else []:
        interval = f"{r['within_sd']:.4f} [{r['within_sd_ci_lower']:.4f}, {r['within_sd_ci_upper']:.4f}]"
        lines.append(f"| {r['model']} | `{r['key']}` | {r['n_cases']} | {r['epochs']} | {interval} |")
    flips = epochs.flips(epochs.verdicts(repeated), pass_k)
    flips = flips[flips["verdict"].isin(keys)] if not flips.empty else flips
    if flips.empty:
        return lines
    extra = f" pass^{pass_k} [95 % CI] |" if pass_k is not None else ""
    lines += [
        "",
        "| run | verdict | unit | n units (cases) | epochs | pass^1 [95 % CI] | flips [95 % CI] |" + extra,
        "|---|---|---|---:|---:|---|---|" + ("---|" if extra else ""),
    ]
    for r in flips.to_dict("records"):
        row = (
            f"| {r['model']} | `{r['verdict']}` | {r['unit']} | {r['n_units']} ({r['n_cases']}) | {r['epochs']} | "
            f"{r['pass_1']:.4f} [{r['pass_1_ci_lower']:.4f}, {r['pass_1_ci_upper']:.4f}] | "
            f"{r['flip_share']:.4f} [{r['flip_ci_lower']:.4f}, {r['flip_ci_upper']:.4f}] |"
        )
        if pass_k is not None:
            row += f" {r['pass_k']:.4f} [{r['pass_k_ci_lower']:.4f}, {r['pass_k_ci_upper']:.4f}] |"
        lines.append(row)
    return lines


def run(args: argparse.Namespace) -> int:
    texts, rows, regressed = [], [], False
    # a log, or a folder holding one run (a sharded run's logs: one run)
    with bad_input("compare", FileNotFoundError, ValueError):
        baseline_log = read_run(args.baseline)
        candidate_logs = [read_run(candidate) for candidate in args.candidates]
    for candidate, candidate_log in zip(args.candidates, candidate_logs):
        options = run_options.pair(baseline_log, candidate_log)
        with bad_input("compare", CompareError):
            results = compare(
                baseline_log,
                candidate_log,
                args.metric,
                args.max_drop,
                lower_is_better=args.lower_is_better or (),
                resamples=args.resamples,
                seed=args.seed,
                allow_different_data=args.allow_different_data,
                power=args.power,
                alpha=args.alpha,
            )
        gate = args.max_drop is not None
        noise = noise_lines(
            {"baseline": baseline_log, "candidate": candidate_log}, [r.metric for r in results], args.pass_k
        )
        texts.append(
            markdown(
                results,
                args.baseline,
                candidate,
                args.resamples,
                args.seed,
                gate,
                options,
                args.power,
                args.alpha,
                noise,
            )
        )
        for line in option_warnings(options):
            print(line, file=sys.stderr, flush=True)
        several = len(args.candidates) > 1  # one CSV for several candidates: say which row is which
        differ = " ".join(str(o["option"]) for o in options if o["differs"])
        rows += [
            {**({"candidate_log": candidate} if several else {}), **asdict(r), "run_options_differ": differ}
            for r in results
        ]
        regressed = regressed or any(r.regressed for r in results)
    text = "\n".join(texts)
    print(text)
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as handle:
            handle.write(text)
    if args.csv:
        pd.DataFrame(rows).to_csv(args.csv, index=False)
    return 1 if regressed else 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``compare`` sub-command (module docstring)."""
    summary = "paired comparison of logs on the same cases (a gate with --max-drop)"
    parser = add_command(sub, "compare", summary, __doc__, run)
    parser.add_argument("baseline", metavar="BASELINE.eval", help="a log, or a folder holding one run (e.g. sharded)")
    parser.add_argument("candidates", nargs="+", metavar="CANDIDATE.eval", help="as BASELINE")
    parser.add_argument(
        "--metric",
        action="append",
        metavar="KEY",
        help="score key (or scorer/key) to compare; repeatable (default: every key both logs hold)",
    )
    parser.add_argument(
        "--max-drop",
        type=float,
        metavar="X",
        help="gate: largest tolerated drop of the mean (in the metric's units); without it, no gate",
    )
    parser.add_argument(
        "--lower-is-better",
        action="append",
        metavar="KEY",
        help="treat KEY as lower-is-better (besides the keys the log's benchmark declares so)",
    )
    detectable.add_options(parser, "the minimum detectable difference")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help=f"bootstrap resamples (default {RESAMPLES})")
    parser.add_argument(
        "--markdown", metavar="FILE", help="append the Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY)"
    )
    parser.add_argument("--csv", metavar="FILE", help="also write the results as CSV")
    parser.add_argument(
        "--allow-different-data",
        action="store_true",
        help="pair logs whose recorded case data or prompt hashes differ (refused by default)",
    )
