"""Multi-model sweeps in ``bedside report``: a leaderboard with paired differences, and how the
ranking moves when another grader re-judges the same conversations.

A *sweep* is several models under test (educators, examinees or doctors) run on the same cases with
the same other roles — e.g. ``inspect eval-set`` with ``--model a,b,c`` (docs/reports.md, "Multi-model
sweeps"). Logs are grouped by benchmark, **grader** (``eval.model_roles["grader"]``, which
``bedside rescore`` rewrites) and **model** (labelled as in the rest of the report — the model under
test and any non-default variant argument, plus its ``-M`` arguments or folder when two runs on the
same cases need telling apart — but within one grader, so that a re-judged copy of a run is the same
model under another grader; shards of one run are pooled). Epochs are averaged per case first.

**Leaderboard** (per benchmark, grader and score key, when at least two models share cases): each
model's mean, 95 % interval and n (:func:`bedside.reporting.tables.summarise`, the report's one
interval rule, clipped to the key's scale: 1-5, 0-1, open for readability), its rank, and for
every pair of models the **paired difference** on the cases both have scored: mean of (model A −
model B) per case with the same interval rule applied to the differences, clipped to ± the scale's
width, n pairs, and whether the interval excludes 0; the pair's paired t-test p-value and that p-value
**Holm-adjusted** over every pair of models of the key (:mod:`bedside.reporting.detectable`: k models make
k(k − 1)/2 pairs, and the adjustment keeps the chance of calling any two equally good models different at
most α), and whether the adjusted p-value is below α (``distinguishable``); beside it the **minimum
detectable difference** at those n pairs (from the SD of the per-case differences, at the report's
``--power`` and ``--alpha``, default 0.8 and 0.05): the differences this pair's comparison can reliably
detect, a property of the comparison, not a test of the difference. The rank order is **resolved**
between neighbours when their paired interval excludes 0 (one pair on its own, unadjusted), and resolved
overall when every neighbouring pair is. Models are **grouped** where their observed differences are not
distinguishable: walking down the ranking, a model joins the group of the model that opened it (the best
of the group) while their pair is not distinguishable (Holm-adjusted p ≥ α, or no two shared cases), and
opens the next group otherwise; so a group is a run of neighbours, none distinguishable from its first.
Lower is better for rates of bad outcomes (each key's direction as its scorer declares it,
:mod:`bedside.score_keys`, read through :mod:`bedside.benchmarks`). For a benchmark that declares
paper-silent run options (:mod:`bedside.reporting.run_options`), each model's options are shown
(``run_options``; pairs: ``run_options_differ``), and models ranked together that ran with different
values of one get a warning line: ranking them is legitimate (e.g. ``monitor_policy=algorithm1`` against
``recommended_action``), but their differences then measure the option as well as the models.

**Judge sensitivity** (when the same models were judged by two graders, e.g. a sweep and its
``bedside rescore``; the run's own grader is ``grader_a``): per key, Kendall's τ
(:func:`scipy.stats.kendalltau`, τ-b) between the two graders' model means on the cases scored for
every model under both graders, with a 95 % percentile bootstrap interval over **cases**
(:func:`bedside.intervals.agreement_interval`: :func:`scipy.stats.bootstrap`, 1,000 resamples, seed 0; a
resample draws cases and recomputes every model's mean under both graders), and each model's rank under
each grader. τ = 1: same order; −1: reversed; NaN when a grader ties every model.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from bedside import benchmarks
from bedside.benchmark import NOT_APPLICABLE
from bedside.intervals import AGREEMENT_RESAMPLES, agreement_interval
from bedside.intervals import summarise as summarise_values
from bedside.reporting import detectable, run_options, tables
from bedside.reporting.load import LoadedLog, disambiguate, label_of, scores_frame
from bedside.reporting.rescore import grader_name
from bedside.versions import sweep_problems

NO_GRADER = "(no grader role)"


def grader_of(item: LoadedLog) -> str:
    return grader_name((item.log.eval.model_roles or {}).get("grader")) or NO_GRADER


def sweep_labels(logs: Sequence[LoadedLog]) -> dict[str, tuple[str, str]]:
    """Log path -> (grader, model label): labels as the report's, but within one grader, so that a grader's
    copy of a run (``bedside rescore``) is no rival run."""
    by_path: dict[str, tuple[str, str]] = {}
    groups: dict[tuple[str, str], list[LoadedLog]] = {}
    for item in logs:
        groups.setdefault((item.benchmark, grader_of(item)), []).append(item)
    for (_, grader), members in groups.items():
        copies = [LoadedLog(m.path, m.log, label_of(m.log), m.benchmark) for m in members]
        disambiguate(copies)
        by_path |= {c.path: (grader, c.label) for c in copies}
    return by_path


def case_values(logs: Sequence[LoadedLog], frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (benchmark, grader, model, case id, key): the epoch-averaged value (NaN dropped), from the
    logs' scores (``frame``: their :func:`~bedside.reporting.load.scores_frame` when read already)."""
    frame = scores_frame(logs) if frame is None else frame
    if frame.empty:
        return pd.DataFrame(columns=["benchmark", "grader", "model", "id", "key", "value", "rejudged"])
    by_path = sweep_labels(logs)
    frame = frame.assign(grader=[by_path[p][0] for p in frame["log"]], model=[by_path[p][1] for p in frame["log"]])
    ranked = {b.name: b.ranked for b in benchmarks.all_benchmarks()}  # each benchmark's descriptor
    frame = frame[[k in ranked.get(b, ()) for b, k in zip(frame["benchmark"], frame["key"])]]
    values = frame.groupby(["benchmark", "grader", "model", "id", "key"], sort=True)["value"].mean().reset_index()
    rejudged = {grader_of(i) for i in logs if "bedside_rescore" in (i.log.eval.metadata or {})}
    return values.dropna(subset=["value"]).assign(rejudged=lambda v: v["grader"].isin(rejudged))


def summary(values: Sequence[float], key: str, difference: bool = False) -> dict[str, float]:
    """mean, 95 % interval and n of a model's per-case values of ``key`` by the key's declared scale,
    or of paired differences by the percentile bootstrap (:mod:`bedside.intervals`, the one rule of
    every bedside table): each bound is a mean of observed values, so it stays inside the scale (a
    difference: inside ± the scale's width) by construction."""
    return summarise_values(values) if difference else tables.summarise(values, key)


def groups(order: Sequence[str], distinguishable: dict[tuple[str, str], bool]) -> dict[str, int]:
    """Model -> its group (1, 2, ...): runs of neighbours in ``order`` not distinguishable from the group's first
    model (``distinguishable[(first, model)]`` False; module docstring)."""
    found: dict[str, int] = {}
    first = None
    for model in order:
        if first is None or distinguishable[(first, model)]:
            first = model
        found[model] = found.get(first, len(set(found.values())) + 1)
    return found


#: a model's paired difference with the next model in the ranking, as the ranking gives it: name -> pairs' column
VS_NEXT = {
    "difference_vs_next": "difference",
    "difference_vs_next_ci_lower": "ci_lower",
    "difference_vs_next_ci_upper": "ci_upper",
    "n_vs_next": "n_pairs",
    "p_holm_vs_next": "p_holm",
    "mdd_vs_next": "mdd",
    "mdd_vs_next_ci_lower": "mdd_ci_lower",
    "mdd_vs_next_ci_upper": "mdd_ci_upper",
}


def vs_next(pair: dict | None) -> dict:
    """The ranking's columns of a model's paired difference with the next model (NaN for the last model)."""
    return {name: pair[column] if pair else math.nan for name, column in VS_NEXT.items()}


def leaderboard(
    values: pd.DataFrame, power: float = detectable.POWER, alpha: float = detectable.ALPHA
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ranking: one row per benchmark, grader, key, model; pairs: every pair of models' paired difference)."""
    ranks: list[dict] = []
    pairs: list[dict] = []
    for (benchmark, grader, key), part in values.groupby(["benchmark", "grader", "key"], sort=True):
        wide = part.pivot(index="id", columns="model", values="value")
        if wide.shape[1] < 2:
            continue
        lower = key in benchmarks.lower_is_better(str(benchmark))
        stats_of = {m: summary(wide[m].dropna().tolist(), str(key)) for m in wide.columns}
        order = sorted(wide.columns, key=lambda m: (stats_of[m]["mean"] if lower else -stats_of[m]["mean"], m))
        diffs, rows = {}, {}  # per pair (a above b): resolved, the pair's row
        scale = benchmarks.score_key(str(key)).scale
        for a, b in itertools.combinations(order, 2):  # a ranks above b
            both = wide[[a, b]].dropna()
            stats = summary((both[a] - both[b]).tolist(), str(key), difference=True)
            resolved = bool(stats["n"] >= 2 and (stats["ci_lower"] > 0 or stats["ci_upper"] < 0))
            diffs[(a, b)] = resolved
            floor = detectable.detectable((both[a] - both[b]).to_numpy(), scale, power, alpha)
            rows[(a, b)] = len(pairs)
            pairs.append(
                {
                    "benchmark": benchmark,
                    "grader": grader,
                    "key": key,
                    "model_a": a,
                    "model_b": b,
                    "difference": stats["mean"],
                    "ci_lower": stats["ci_lower"],
                    "ci_upper": stats["ci_upper"],
                    "n_pairs": stats["n"],
                    "resolved": resolved,
                    "sd_difference": floor["sd"],
                    "mdd": floor["mdd"],
                    "mdd_ci_lower": floor["mdd_low"],
                    "mdd_ci_upper": floor["mdd_high"],
                    "p_value": detectable.paired_p((both[a] - both[b]).to_numpy()),
                }
            )
        family = [pairs[row] for row in rows.values()]  # this key's pairs: one family of tests
        for pair, adjusted in zip(family, detectable.holm([p["p_value"] for p in family], alpha)):
            pair.update(p_holm=adjusted, distinguishable=bool(adjusted < alpha))
        grouped = groups(order, {ab: pairs[row]["distinguishable"] for ab, row in rows.items()})
        for rank, model in enumerate(order, start=1):
            below = order[rank] if rank < len(order) else None
            ranks.append(
                {
                    "benchmark": benchmark,
                    "grader": grader,
                    "key": key,
                    "rank": rank,
                    "model": model,
                    **stats_of[model],
                    "direction": "lower is better" if lower else "higher is better",
                    "resolved_vs_next": diffs[(model, below)] if below else None,
                    "order_resolved": all(diffs[(x, y)] for x, y in zip(order, order[1:])),
                    **vs_next(pairs[rows[(model, below)]] if below else None),
                    "group": grouped[model],
                }
            )
    ranking = pd.DataFrame(
        ranks,
        columns=[
            "benchmark",
            "grader",
            "key",
            "rank",
            "model",
            "mean",
            "ci_lower",
            "ci_upper",
            "n",
            "direction",
            "resolved_vs_next",
            "order_resolved",
            *VS_NEXT,
            "group",
        ],
    )
    return ranking, pd.DataFrame(
        pairs,
        columns=[
            "benchmark",
            "grader",
            "key",
            "model_a",
            "model_b",
            "difference",
            "ci_lower",
            "ci_upper",
            "n_pairs",
            "resolved",
            "sd_difference",
            "mdd",
            "mdd_ci_lower",
            "mdd_ci_upper",
            "p_value",
            "p_holm",
            "distinguishable",
        ],
    )


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: NaN, reported as such
        return float(kendalltau(x, y).statistic)


def judge_sensitivity(values: pd.DataFrame, resamples: int = AGREEMENT_RESAMPLES) -> pd.DataFrame:
    """Kendall's τ between two graders' rankings of the same models, with a case-bootstrap interval."""
    rows = []
    for (benchmark, key), part in values.groupby(["benchmark", "key"], sort=True):
        # the run's own grader first, graders of `bedside rescore` copies after it
        graders = sorted(
            part["grader"].unique(), key=lambda g: (bool(part.loc[part["grader"] == g, "rejudged"].any()), g)
        )
        for first, second in itertools.combinations(graders, 2):
            a = part[part["grader"] == first].pivot(index="id", columns="model", values="value")
            b = part[part["grader"] == second].pivot(index="id", columns="model", values="value")
            models = sorted(set(a.columns) & set(b.columns))
            if len(models) < 2:
                continue
            cases = sorted(set(a[models].dropna().index) & set(b[models].dropna().index))
            if not cases:
                continue
            x, y = a.loc[cases, models].to_numpy(), b.loc[cases, models].to_numpy()  # (cases, models)
            tau = _tau(x.mean(axis=0), y.mean(axis=0))
            low = high = math.nan
            if math.isfinite(tau):

                def statistic(drawn: np.ndarray, x: np.ndarray = x, y: np.ndarray = y) -> float:
                    return _tau(x[drawn].mean(axis=0), y[drawn].mean(axis=0))

                low, high = agreement_interval(len(cases), statistic, resamples, vectorized=False)
            lower = key in benchmarks.lower_is_better(str(benchmark))

            def ranking(means: np.ndarray, models: list[str] = models, lower: bool = lower) -> str:
                order = sorted(range(len(models)), key=lambda i: (means[i] if lower else -means[i], models[i]))
                return " > ".join(models[i] for i in order)

            rows.append(
                {
                    "benchmark": benchmark,
                    "key": key,
                    "grader_a": first,
                    "grader_b": second,
                    "n_models": len(models),
                    "n_cases": len(cases),
                    "tau": tau,
                    "tau_low": low,
                    "tau_high": high,
                    "ranking_a": ranking(x.mean(axis=0)),
                    "ranking_b": ranking(y.mean(axis=0)),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "benchmark",
            "key",
            "grader_a",
            "grader_b",
            "n_models",
            "n_cases",
            "tau",
            "tau_low",
            "tau_high",
            "ranking_a",
            "ranking_b",
        ],
    )


def model_options(logs: Sequence[LoadedLog]) -> dict[tuple[str, str, str], dict[str, str]]:
    """(benchmark, grader, model) -> option -> its value in that model's runs, for the benchmarks that declare
    run options (:mod:`bedside.reporting.run_options`; a model whose pooled logs differ: the values joined
    with `` | ``)."""
    labels = sweep_labels(logs)
    found: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for item in logs:
        if item.benchmark not in benchmarks.names() or not benchmarks.get(item.benchmark).run_options:
            continue
        grader, model = labels[item.path]
        values = found.setdefault((item.benchmark, grader, model), {})
        for option, (value, _) in run_options.options_of(item.log, benchmarks.get(item.benchmark)).items():
            if value not in values.setdefault(option, []):
                values[option].append(value)
    return {group: {o: " | ".join(v) for o, v in options.items()} for group, options in found.items()}


def options_differ(options: dict[str, str], other: dict[str, str]) -> list[str]:
    """The options two models' runs differ in (an option that does not apply to one of them left out)."""
    return [o for o in options if run_options.differs(options[o], other.get(o, options[o]))]


def option_notes(ranking: pd.DataFrame, options: dict[tuple[str, str, str], dict[str, str]]) -> list[str]:
    """One warning per (benchmark, grader, option) whose ranked models ran with different values."""
    notes = []
    for (benchmark, grader), part in ranking.groupby(["benchmark", "grader"], sort=True):
        models = list(dict.fromkeys(part["model"]))
        mine = {m: options.get((str(benchmark), str(grader), m), {}) for m in models}
        for option in dict.fromkeys(o for values in mine.values() for o in values):
            by_value: dict[str, list[str]] = {}
            for m in models:
                value = mine[m].get(option)
                if value is not None and value != NOT_APPLICABLE:
                    by_value.setdefault(value, []).append(m)
            if len(by_value) > 1:
                listed = "; ".join(f"{v} ({', '.join(ms)})" for v, ms in sorted(by_value.items()))
                notes.append(
                    f"warning: the models ranked for {benchmarks.get(str(benchmark)).title} (grader {grader}) ran "
                    f"with different {option}: {listed}; their paired differences measure this option's effect "
                    "as well as the models'"
                )
    return notes


def indistinguishable(ranking: pd.DataFrame, pairs: pd.DataFrame, alpha: float = detectable.ALPHA) -> list[str]:
    """One line per group of two or more models (per benchmark, grader and key): models whose observed
    differences from the group's first model are not distinguishable, with the test and its adjustment."""
    tested = pairs.dropna(subset=["p_holm"]).groupby(["benchmark", "grader", "key"]).size()
    lines = []
    for (benchmark, grader, key, _), part in ranking.groupby(["benchmark", "grader", "key", "group"], sort=False):
        if len(part) >= 2:
            family = int(tested.get((benchmark, grader, key), 0))
            lines.append(
                f"Not distinguishable ({benchmark}, {key}, grader {grader}): "
                + ", ".join(f"{m} ({v:.3f}, n {n})" for m, v, n in zip(part["model"], part["mean"], part["n"]))
                + f" — none differs from the first by a paired t-test at α = {alpha:g}, Holm-adjusted over the "
                + f"{family} model pair{'s' if family != 1 else ''} of this key."
            )
    return lines


def section(
    page,
    logs: Sequence[LoadedLog],
    every_sample: pd.DataFrame,
    csv,
    allow_different_data: bool = False,
    power: float = detectable.POWER,
    alpha: float = detectable.ALPHA,
) -> None:
    """The report's sweep section over the logs' scores (``every_sample``: their
    :func:`~bedside.reporting.load.scores_frame`); nothing when no two models share cases; a note instead of
    the leaderboard when the logs were run on different data or prompts, unless ``allow_different_data``."""
    values = case_values(logs, every_sample)
    ranking, pairs = leaderboard(values, power, alpha)
    if ranking.empty:
        return
    page.heading("Leaderboard: models on the same cases")
    problems = sweep_problems(logs)
    if problems and not allow_different_data:
        page.note(
            "No leaderboard: these runs were not run on the same data and prompts (" + "; ".join(problems) + "). "
            "Pass --allow-different-data to rank them anyway."
        )
        return
    options = model_options(logs)
    if options:  # each model's paper-silent run options, and which ones a pair of models differ in
        ranking = ranking.assign(
            run_options=[
                ", ".join(f"{o}={v}" for o, v in options.get((b, g, m), {}).items())
                for b, g, m in zip(ranking["benchmark"], ranking["grader"], ranking["model"])
            ]
        )
        pairs = pairs.assign(
            run_options_differ=[
                " ".join(options_differ(options.get((b, g, x), {}), options.get((b, g, y), {})))
                for b, g, x, y in zip(pairs["benchmark"], pairs["grader"], pairs["model_a"], pairs["model_b"])
            ]
        )
        for line in option_notes(ranking, options):
            page.note(line)
    for line in indistinguishable(ranking, pairs, alpha):
        page.note(line)
    shown = ranking.assign(
        **{
            "mean [95 % CI]": [
                tables.fmt(m, lo, hi, 3) for m, lo, hi in zip(ranking["mean"], ranking["ci_lower"], ranking["ci_upper"])
            ],
            "vs next: difference [95 % CI] (n)": [
                f"{tables.fmt(d, lo, hi, 3)} ({n:.0f})" if d == d else "–"
                for d, lo, hi, n in zip(
                    ranking["difference_vs_next"],
                    ranking["difference_vs_next_ci_lower"],
                    ranking["difference_vs_next_ci_upper"],
                    ranking["n_vs_next"],
                )
            ],
            "vs next: Holm p": [f"{p:.3g}" if p == p else "–" for p in ranking["p_holm_vs_next"]],
            "vs next: reliably detects ≥ MDD [95 % CI]": [
                tables.fmt(m, lo, hi, 3)
                for m, lo, hi in zip(
                    ranking["mdd_vs_next"], ranking["mdd_vs_next_ci_lower"], ranking["mdd_vs_next_ci_upper"]
                )
            ],
        }
    )
    page.table(
        shown[
            [
                "benchmark",
                "grader",
                "key",
                "rank",
                "group",
                "model",
                "mean [95 % CI]",
                "n",
                "vs next: difference [95 % CI] (n)",
                "vs next: Holm p",
                "vs next: reliably detects ≥ MDD [95 % CI]",
                "resolved_vs_next",
                "order_resolved",
                *(["run_options"] if options else []),
            ]
        ],
        csv(ranking, "leaderboard.csv"),
        "Per score key, models ranked by their mean over the cases they were scored on (n; 95 % interval as "
        "in Table 1). resolved_vs_next: the paired difference with the next model, on the cases both have "
        "scored, has a 95 % interval that excludes 0; order_resolved: every neighbouring pair is resolved. "
        "vs next: the paired difference with the next model (mean over the n cases both have scored, 95 % "
        "interval), its paired t-test's p-value Holm-adjusted over every pair of models of the key, and its "
        f"minimum detectable difference ({detectable.describe(power, alpha)}). group: walking down the ranking, "
        f"a model joins the group of the group's first model while their Holm-adjusted p-value is ≥ {alpha:g} "
        "(not distinguishable), else it opens the next group; resolved_vs_next is one pair's unadjusted interval, "
        "so two neighbours can be resolved and still share a group."
        + (
            " run_options: the paper-silent options each model's runs used (the paired differences' "
            "run_options_differ names those two models differ in)."
            if options
            else ""
        ),
    )
    page.details(f"Paired differences ({len(pairs)} model pairs × keys)", pairs, csv(pairs, "paired_differences.csv"))
    sensitivity = judge_sensitivity(values)
    if sensitivity.empty:
        return
    page.heading("Judge sensitivity: the same conversations, another grader", 3)
    page.table(
        sensitivity,
        csv(sensitivity, "judge_sensitivity.csv"),
        "Kendall's tau between the two graders' rankings of the same models (n_cases scored for every model "
        "under both graders), with a 95 % bootstrap interval over cases; 1 = same order, -1 = reversed.",
    )
