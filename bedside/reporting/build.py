"""``bedside report LOG_OR_DIR... --out DIR [--prices FILE.yaml] [--annotations FILE.csv] [--study STUDY
[--ratings RATINGS.csv...]]``: what the papers show, from Inspect logs.

Writes ``DIR/index.html`` (open it in a browser; static, no script), the figures as PNG and SVG (not with
``--no-figures``: their tables and captions only), and every table as CSV:

==========================  ===================================================================
(a benchmark's own files)   its section (``report`` in its tools, ``bedside/<benchmark>/tools.py``):
                            the paper's tables and figures, each as CSV (figures also PNG, SVG)
``<b>_run_options.csv``     a benchmark's paper-silent options per log (its descriptor's ``run_options``:
                            model, log, option, value, recorded; :mod:`bedside.reporting.run_options`);
                            runs in one table with different values: a warning atop the page and on stderr
(``--annotations FILE``)    a benchmark's judge-calibrated estimates from physician annotations (its
                            tools' ``calibrated`` module), in its section and its own CSV
``clinician_study_*.csv``   ``--study STUDY``: a blinded clinician study's analysis (:mod:`bedside.study.report`:
                            differences per measure, preferences, Bradley-Terry strengths, inter-rater
                            reliability, blinding check), from ``--ratings`` or the raters' templates in
                            the study folder
``<benchmark>.csv``         a registered benchmark without a section of its own
                            (:mod:`bedside.benchmarks`): its headline keys overall and per
                            stratum (mean, 95 % CI, n)
``usage_by_role.csv``       tokens and cost per role (the model under test by its benchmark's name for it) and
                            mode (``batch``: through the provider's batch API, :mod:`bedside.reporting.usage`)
``usage_by_case.csv``       tokens and cost per case × role; ``cost_per_case.csv``: per case
``person_time.csv``         runs where a person played a role (``bedside/human``): per role, the person's
                            replies and working time per case (:func:`bedside.reporting.usage.person_time`)
``leaderboard.csv``         models on the same cases (a sweep), per grader and key: rank, mean,
                            CI, n, resolved order (:mod:`bedside.reporting.sweep`);
                            ``paired_differences.csv``: every pair of models on shared cases
``simulator_errors.csv``    the simulated patient's own error rate per log, patient model and persona trait
                            (:mod:`bedside.reporting.simulator`; runs with ``-T simulator_check=true``)
``judge_sensitivity.csv``   logs of the same models judged by two graders (``bedside rescore``):
                            Kendall's tau of the two rankings with a case-bootstrap interval
``panel_agreement.csv``     runs judged by a panel (``--model-role grader=a,b,c``): per score key, the
                            judges' Krippendorff's alpha with its interval, unparsed calls and ties;
                            ``panel_judges.csv``: each judge against the panel's verdict
                            (:mod:`bedside.reporting.panels`); a judge of the model under test's
                            family is flagged
``epoch_noise.csv``         logs with two or more epochs of a case: each key's within-case SD over
                            epochs; ``epoch_flips.csv``: the share of yes/no verdicts that flip
                            between epochs, and pass^K with ``--pass-k K`` (:mod:`bedside.reporting.epochs`)
==========================  ===================================================================

The leaderboard's minimum detectable differences use ``--power`` and ``--alpha`` (default 0.8 and 0.05;
:mod:`bedside.reporting.detectable`).

Costs use a price table (``--prices``; default: the shipped ``prices.yaml``, whose prices are
EXAMPLES — see that file). Sections of benchmarks absent from the logs are left out. ``--population``
chooses which samples a benchmark's section averages where its paper names several populations
(:mod:`bedside.reporting.population`); usage, costs, the leaderboard and the run-to-run noise use every
sample.
"""

from __future__ import annotations

import argparse
import datetime
from dataclasses import replace
from pathlib import Path

import pandas as pd

from bedside import benchmarks
from bedside.benchmarks import Benchmark
from bedside.cli import add_command, bad_input, tools_of
from bedside.intervals import describe
from bedside.reporting import detectable, epochs, panels, run_options, simulator, sweep, tables, usage
from bedside.reporting.html import Page
from bedside.reporting.load import LoadedLog, load, scores_frame
from bedside.reporting.population import (
    choices,
    described,
    restrict_frame,
    restrict_log,
    restricted_benchmarks,
    shown,
)
from bedside.reporting.section import Section, SectionInputs
from bedside.study import report as clinician_study


def build(
    paths: list[str],
    out: str | Path,
    prices_path: str | None = None,
    allow_different_data: bool = False,
    population: str | None = None,
    annotations: str | None = None,
    power: float = detectable.POWER,
    alpha: float = detectable.ALPHA,
    pass_k: int | None = None,
    study: str | None = None,
    ratings: list[str] | None = None,
    figures: bool = True,
) -> Path:
    """Write the report into ``out``; returns the path of ``index.html``. ``annotations``: a physician
    annotations file for the benchmarks that take one (their tools' ``calibrated``); ``study``: a clinician
    study's folder, with its ``ratings`` files (none: its raters' templates); ``figures``: draw the figures (False:
    their tables and captions only)."""
    out = Path(out)
    logs = load(paths)
    present = {i.benchmark for i in logs}
    annotated = _read_annotations(annotations, [b for b in benchmarks.all_benchmarks() if b.name in present])
    rated = clinician_study.read(study, ratings)
    out.mkdir(parents=True, exist_ok=True)
    prices = usage.load_prices(prices_path)
    every_sample = scores_frame(logs)
    frame = restrict_frame(every_sample, logs, population)
    page = Page("bedside report")
    page.note(f"Generated {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC} from {len(logs)} log(s).")
    page.table(
        pd.DataFrame(
            [
                {
                    "model": i.label,
                    "task": i.log.eval.task,
                    "samples": len(i.log.samples),
                    "status": i.log.status,
                    "log": i.path,
                }
                for i in logs
            ]
        )
    )
    for title in restricted_benchmarks(logs, population):
        page.note(
            f"{title} population: {population} samples only (the tables and figures of its section, not its audit)."
        )
    for benchmark in benchmarks.all_benchmarks():
        if benchmark.name in present:
            run_options.warn(page, benchmark, logs)

    def csv(df: pd.DataFrame, name: str) -> str:
        df.to_csv(out / name, index=False)
        return name

    for benchmark in benchmarks.all_benchmarks():  # in registry order; a benchmark without its own section
        if benchmark.name in present:  # gets the generic one (headline keys overall and per stratum)
            tools = tools_of(benchmark)
            section: Section = tools.report or generic_section
            section(
                SectionInputs(
                    page, benchmark, frame, logs, out, csv, population=shown(benchmark, population), figures=figures
                )
            )
            run_options.section(page, benchmark, logs, csv)
            if tools.calibrated and benchmark.name in annotated:  # on the samples its section averages
                mine = [replace(i, log=restrict_log(i.log, population)) for i in logs if i.benchmark == benchmark.name]
                tools.calibrated.section(page, benchmark, mine, annotated[benchmark.name], csv)
    if rated is not None:
        clinician_study.section(page, rated, csv)
    simulator.section(page, logs, csv)  # the simulated patients' own error rate

    sweep.section(page, logs, every_sample, csv, allow_different_data, power, alpha)
    panels.section(page, logs, csv)  # judge panels' agreement; judges of the model under test's family
    epochs.section(page, logs, every_sample, csv, pass_k)
    _usage(page, logs, prices, csv)
    index = out / "index.html"
    index.write_text(page.render(), encoding="utf-8")
    return index


def _read_annotations(path: str | None, present: list[Benchmark]) -> dict[str, pd.DataFrame]:
    """Benchmark name -> its physician annotations read from ``path``, for each benchmark among the logs that
    takes annotations; read before anything is written, so a bad file stops the report with one line."""
    if path is None:
        return {}
    takers = {b.name: tools_of(b).calibrated for b in present if tools_of(b).calibrated}
    if not takers:
        raise ValueError(
            f"--annotations {path}: none of the logs' benchmarks ({', '.join(b.title for b in present)}) "
            "takes physician annotations"
        )
    return {name: module.read_annotations(path) for name, module in takers.items() if module}


def generic_section(inputs: SectionInputs) -> None:
    """A benchmark without a section of its own: its headline keys overall and per declared stratum."""
    page, benchmark = inputs.page, inputs.benchmark
    page.heading(benchmark.title)
    table = tables.headline_table(inputs.frame, benchmark)
    name = inputs.csv(table, f"{benchmark.name}.csv")
    labels = {k.name: k.label for k in benchmark.headline}
    shown = table.assign(key=[labels.get(k, k) for k in table["key"]])
    page.table(
        tables.wide(shown, ["model", "stratum", "group"], "key", order=list(labels.values())),
        name,
        f"Headline scores of {benchmark.title} (mean [95 % CI] (n)), overall and by "
        f"{', '.join(benchmark.strata) or 'no stratum'}. " + describe() + ".",
    )


def _usage(page: Page, logs: list[LoadedLog], prices: dict, csv) -> None:
    present = {i.benchmark for i in logs}
    page.heading("Token usage and cost")
    by_case = usage.usage_by_case(logs, prices)
    by_role = usage.usage_by_role(by_case)
    per_case = usage.cost_per_case(by_case)
    currency = prices.get("currency") or ""
    shipped = Path(prices["source"]) == usage.default_prices_path()
    page.note(
        f"Prices from {prices['source']} ({currency}, per {prices['per_tokens']:,} tokens). "
        + (
            "The shipped price table holds EXAMPLE prices only: pass your own with --prices FILE.yaml. "
            if shipped
            else ""
        )
        + "Calls served from Inspect's local cache are counted as cached_calls, not in tokens or cost. "
        "mode: batch for calls sent through the provider's batch API (the role's generate config batch), "
        "priced less the price table's batch_discount; live for the others. "
        "The model under test is the "
        + " or ".join(f"{b.subject_role} ({b.title})" for b in benchmarks.all_benchmarks() if b.name in present)
        + "."
    )
    if missing := usage.unpriced(by_case):
        page.note(f"No price for: {', '.join(missing)} (cost left empty).")
    if full := usage.undiscounted(by_case, prices):
        page.note(
            f"Batched calls priced at the full price (the price table sets no batch_discount): {', '.join(full)}."
        )
    page.table(by_role, csv(by_role, "usage_by_role.csv"), "Per role:", float_format="{:.4f}")
    csv(by_case, "usage_by_case.csv")
    page.details(
        f"Per case ({len(per_case)} cases; per case × role in usage_by_case.csv)",
        per_case,
        csv(per_case, "cost_per_case.csv"),
    )
    by_role_played, by_case_played = usage.person_time(by_case)
    if not by_case_played.empty:
        page.heading("Person-time", level=3)
        page.table(
            pd.DataFrame(
                {
                    "model": by_role_played["model"],
                    "role": by_role_played["role"],
                    "replies per case": _cells(by_role_played, "replies"),
                    "minutes per case": _cells(by_role_played, "minutes"),
                    "total minutes": by_role_played["total_minutes"],
                }
            ),
            csv(by_role_played, "person_time.csv"),
            "Roles a person played (bedside/human): replies and working minutes per case, mean [95 % CI] (n cases). "
            "Working time is the union of the page's working intervals (reading and typing on a visible page, "
            "never waiting for the other roles) of the role's calls in the case. " + describe() + ".",
        )
        page.details(
            f"Per case ({len(by_case_played)} case × role)",
            by_case_played,
            csv(by_case_played, "person_time_by_case.csv"),
        )


def _cells(table: pd.DataFrame, name: str) -> list[str]:
    """``name``'s "mean [lower, upper] (n=...)" cell of each row (columns ``<name>_per_case``, ``<name>_ci_*``)."""
    return [
        f"{tables.fmt(m, lo, hi)} (n={n})"
        for m, lo, hi, n in zip(
            table[f"{name}_per_case"], table[f"{name}_ci_lower"], table[f"{name}_ci_upper"], table["n"]
        )
    ]


def run(args: argparse.Namespace) -> int:
    with bad_input("report", FileNotFoundError, ValueError):
        index = build(
            args.logs,
            args.out,
            args.prices,
            args.allow_different_data,
            args.population,
            args.annotations,
            args.power,
            args.alpha,
            args.pass_k,
            args.study,
            args.ratings,
            figures=not args.no_figures,
        )
    print(f"wrote {index}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``report`` sub-command (module docstring)."""
    summary = "HTML report with the papers' tables and figures, CSVs, usage and cost"
    parser = add_command(sub, "report", summary, __doc__, run)
    parser.add_argument("logs", nargs="+", metavar="LOG_OR_DIR", help="eval log files or directories of logs")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    parser.add_argument("--prices", metavar="FILE.yaml", help="price table (default: the shipped example prices)")
    parser.add_argument(
        "--allow-different-data",
        action="store_true",
        help="rank runs in the leaderboard although their recorded case data or prompt hashes differ",
    )
    parser.add_argument(
        "--population",
        choices=choices(),
        default=None,
        help=f"the samples a benchmark's tables and figures average, where its paper names several ({described()}); "
        "other benchmarks' logs are unaffected",
    )
    parser.add_argument(
        "--annotations",
        metavar="FILE.csv",
        help="physician annotations (the format of bedside agreement): adds each headline metric's "
        "judge-calibrated estimate (judge-only mean, judge bias, prediction-powered estimate) to the "
        "sections of the benchmarks that take them",
    )
    parser.add_argument(
        "--study",
        metavar="STUDY",
        help="a clinician study's folder (bedside study build): adds its analysis (bedside study report's)",
    )
    parser.add_argument(
        "--ratings",
        nargs="+",
        metavar="RATINGS.csv",
        help="the study's ratings files (the templates filled in; default: the raters' templates in the study folder)",
    )
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="write the figures' tables (CSV) and captions without drawing the figures: on a 10-model sweep about "
        "a third of the report's time (a CI gate, a first look)",
    )
    detectable.add_options(parser, "the leaderboard's minimum detectable differences")
