"""``bedside report LOG_OR_DIR... --out DIR [--prices FILE.yaml]``: what the papers show, from Inspect logs.

Writes ``DIR/index.html`` (open it in a browser; static, no script), the figures as PNG and SVG, and
every table as CSV:

==========================  ===================================================================
``table1.csv``              DischargeBench Table 1, long: model, key, column, mean, 95 % CI, n
``table1_wide.csv``         the same, one row per model ("mean [lower, upper]"), n = evaluable
                            sessions (system failures excluded), ``system_failures``
``fig2_icd_chapter.*``      every Table 1 metric by ICD chapter × model (heatmaps; CSV: mean, CI, n)
``fig3_<axis>.*``           every Table 1 metric by persona axis × model (bars with 95 % CI)
``fig4_outcomes.*``         clean-complete / erroneous / system-failure counts and end-reason mix
``fig4_erroneous_by_axis.*`` erroneous rate (Wilson CI) by persona axis × model
``fig4_end_reasons.csv``    end-reason counts and shares
``fig14_erroneous_by_icd_chapter.*`` erroneous rate by ICD chapter × model (the paper's Appendix
                            A.7 Figure 14; CSV: rate, Wilson CI, n)
``audit.csv``               clean-complete audit (A.7.2): short sessions, short with TCS < 0.5,
                            character breaks (sessions and patient turns), case ids
``usage_by_role.csv``       tokens and cost per role (educator = the model under test)
``usage_by_case.csv``       tokens and cost per case × role; ``cost_per_case.csv``: per case
``medsp.csv``               MedSP1000 micro, PC…PROF, macro rates, overall and per specialty
``cpb.csv``                 CPB-Bench failure / overreaction / persistence rates by category,
                            dataset, language
``leaderboard.csv``         models on the same cases (a sweep), per grader and key: rank, mean,
                            CI, n, resolved order (:mod:`bedside.reporting.sweep`);
                            ``paired_differences.csv``: every pair of models on shared cases
``<benchmark>.csv``         a registered benchmark without a section of its own
                            (:mod:`bedside.benchmarks`): its headline keys overall and per
                            stratum (mean, 95 % CI, n)
``judge_sensitivity.csv``   logs of the same models judged by two graders (``bedside rescore``):
                            Kendall's tau of the two rankings with a case-bootstrap interval
==========================  ===================================================================

Costs use a price table (``--prices``; default: the shipped ``prices.yaml``, whose prices are
EXAMPLES — see that file). Sections of benchmarks absent from the logs are left out.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import pandas as pd

from bedside import benchmarks
from bedside.benchmarks import Benchmark
from bedside.discharge import PERSONA_AXES
from bedside.intervals import describe
from bedside.reporting import tables, usage
from bedside.reporting.html import Page
from bedside.reporting.load import LoadedLog, load, scores_frame

HEATMAP_LABELS = tables.TABLE1


def build(paths: list[str], out: str | Path, prices_path: str | None = None) -> Path:
    """Write the report into ``out``; returns the path of ``index.html``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    logs = load(paths)
    prices = usage.load_prices(prices_path)
    frame = scores_frame(logs)
    page = Page("bedside report")
    page.note(f"Generated {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC} from {len(logs)} log(s).")
    page.table(
        pd.DataFrame(
            [
                {
                    "model": i.label,
                    "task": i.log.eval.task,
                    "samples": len(i.log.samples or []),
                    "status": i.log.status,
                    "log": i.path,
                }
                for i in logs
            ]
        )
    )
    present = {i.benchmark for i in logs}

    def csv(df: pd.DataFrame, name: str) -> str:
        df.to_csv(out / name, index=False)
        return name

    for benchmark in benchmarks.all_benchmarks():  # in registry order; a benchmark without its own section
        if benchmark.name in present:  # gets the generic one (headline keys overall and per stratum)
            SECTIONS.get(benchmark.name, _generic)(page, benchmark, frame, logs, out, csv)
    from bedside.reporting import sweep  # models on the same cases: leaderboard and judge sensitivity

    sweep.section(page, logs, csv)
    _usage(page, logs, prices, csv)
    index = out / "index.html"
    index.write_text(page.render(), encoding="utf-8")
    return index


def _medsp(page: Page, benchmark: Benchmark, frame: pd.DataFrame, logs: list[LoadedLog], out: Path, csv) -> None:
    page.heading("MedSP1000: rubric completion")
    try:
        table, omitted = tables.medsp_table(logs)
    except (ImportError, KeyError, TypeError) as error:  # the MedSP scorer's metadata changed shape
        page.note(f"MedSP1000 table unavailable for these logs: {error!r}")
        table = omitted = pd.DataFrame()
    csv(table, "medsp.csv")
    page.table(
        tables.wide(table, ["model", "group"], "metric") if not table.empty else table,
        "medsp.csv",
        "Rates of rubric items met: micro (all items pooled), per ACGME competency (PC … PROF, items "
        "pooled), macro (the paper's: the six competencies weighted equally), scenario_mean (mean of case "
        "rates); 95 % CI (percentile bootstrap over cases), n cases. Per specialty only with at least 5 "
        "scored cases.",
    )
    if not omitted.empty:
        page.table(
            omitted, csv(omitted, "medsp_omitted_specialties.csv"), "Specialties left out (fewer than 5 scored cases):"
        )


def _cpb(page: Page, benchmark: Benchmark, frame: pd.DataFrame, logs: list[LoadedLog], out: Path, csv) -> None:
    page.heading("CPB-Bench: failure and overreaction rates")
    table = tables.cpb_table(frame)
    csv(table, "cpb.csv")
    page.table(
        tables.wide(table, ["model", "stratum", "group"], "key", order=tables.cpb_keys(frame)),
        "cpb.csv",
        "Rates (lower is better) with 95 % CI (Wilson) and n, overall and by category, dataset and "
        "language. Read the failure rate beside the overreaction rate: a doctor that treats every "
        "patient as difficult lowers its failure rate by overreacting.",
    )


def _generic(page: Page, benchmark: Benchmark, frame: pd.DataFrame, logs: list[LoadedLog], out: Path, csv) -> None:
    """A benchmark without a section of its own: its headline keys overall and per declared stratum."""
    page.heading(benchmark.title)
    table = tables.headline_table(frame, benchmark)
    name = csv(table, f"{benchmark.name}.csv")
    labels = dict(benchmark.headline)
    shown = table.assign(key=[labels.get(k, k) for k in table["key"]])
    page.table(
        tables.wide(shown, ["model", "stratum", "group"], "key", order=list(labels.values())),
        name,
        f"Headline scores of {benchmark.title} (mean [95 % CI] (n)), overall and by "
        f"{', '.join(benchmark.strata) or 'no stratum'}. " + describe() + ".",
    )


def _discharge(page: Page, benchmark: Benchmark, frame: pd.DataFrame, logs: list[LoadedLog], out: Path, csv) -> None:
    from bedside.reporting import figures  # matplotlib: imported only by this command

    page.heading("DischargeBench")
    long, wide = tables.table1(frame)
    csv(long, "table1.csv")
    page.heading("Table 1: main results", 3)
    page.table(
        wide[["model", "n", "system_failures"] + [c for _, c in tables.TABLE1]],
        csv(wide, "table1_wide.csv"),
        "Mean [95 % CI] per model. n = evaluable sessions (system-level failures excluded and counted "
        "separately; their scores are unscored). NA naturalness, RE responsiveness, CL clarity, CR "
        "clinical relevance (1–5), RD Flesch–Kincaid grade, TCS topic checklist score, Comprehension, "
        "ROUGE-L and cosine (factual consistency). " + describe() + "; each metric's own n "
        "(unscored sub-scores left out) is in the CSV.",
    )

    page.heading("Figure 2: metrics by ICD chapter", 3)
    grid = tables.by_stratum(frame, "icd_chapter", tables.TABLE1_KEYS, "discharge")
    csv(grid, "fig2_icd_chapter.csv")
    page.figure(
        figures.heatmaps(grid, HEATMAP_LABELS, out, "fig2_icd_chapter", "ICD chapter"),
        "Mean of every Table 1 metric by ICD chapter × model (fig2_icd_chapter.csv: mean, CI, n)",
    )

    page.heading("Figure 3: metrics by persona", 3)
    for axis in PERSONA_AXES:
        grid = tables.by_stratum(frame, axis, tables.TABLE1_KEYS, "discharge")
        name = f"fig3_{axis}"
        csv(grid, f"{name}.csv")
        page.figure(
            figures.grouped_bars(grid, HEATMAP_LABELS, out, name, axis.replace("_", " ")),
            f"Every Table 1 metric by {axis.replace('_', ' ')} × model, 95 % CI ({name}.csv)",
        )

    page.heading("Figure 4: failure analysis", 3)
    counts, reasons = tables.outcome_counts(frame), tables.end_reasons(frame)
    page.figure(
        figures.outcomes(counts, reasons, out, "fig4_outcomes"),
        "Clean-complete vs erroneous (hard stop, max turns) vs system-failure sessions, and the end-reason mix",
    )
    page.table(counts, csv(counts, "fig4_outcomes.csv"))
    page.table(reasons, csv(reasons, "fig4_end_reasons.csv"))
    errs = tables.erroneous_by_axis(frame)
    page.figure(
        figures.erroneous_by_axis(errs, out, "fig4_erroneous_by_axis"),
        "Erroneous-session rate by persona axis × model, Wilson 95 % CI (fig4_erroneous_by_axis.csv)",
    )
    csv(errs, "fig4_erroneous_by_axis.csv")

    page.heading("Figure 14: erroneous rate by ICD chapter (Appendix A.7)", 3)
    chapters = tables.by_stratum(frame, "icd_chapter", ["erroneous"], "discharge")
    csv(chapters, "fig14_erroneous_by_icd_chapter.csv")
    page.figure(
        figures.heatmaps(
            chapters, [("erroneous", "erroneous rate")], out, "fig14_erroneous_by_icd_chapter", "ICD chapter"
        ),
        "Erroneous-session rate (hard stop or max turns; system failures excluded) by ICD chapter × model, "
        "as the paper's Figure 14 (fig14_erroneous_by_icd_chapter.csv: rate, Wilson 95 % CI, n)",
    )

    page.heading("Clean-complete audit (Appendix A.7.2)", 3)
    audit = tables.audit(logs)
    page.table(
        audit,
        csv(audit, "audit.csv"),
        "Among clean-complete sessions: short (≤ 15 turns), short with TCS < 0.5, and sessions in which the "
        "Virtual Patient broke character ('as an AI', 'language model', \"I'm an assistant\"), with the "
        "number of such patient turns and the case ids; complete_after_audit drops the last two groups.",
    )


#: benchmarks with a report section of their own (the papers' tables and figures); others: :func:`_generic`
SECTIONS = {"discharge": _discharge, "medsp": _medsp, "cpb": _cpb}


def _usage(page: Page, logs: list[LoadedLog], prices: dict, csv) -> None:
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
        "The model under test is the educator (DischargeBench), examinee (MedSP1000) or doctor (CPB-Bench)."
    )
    if missing := usage.unpriced(by_case):
        page.note(f"No price for: {', '.join(missing)} (cost left empty).")
    page.table(by_role, csv(by_role, "usage_by_role.csv"), "Per role:", float_format="{:.4f}")
    csv(by_case, "usage_by_case.csv")
    page.details(
        f"Per case ({len(per_case)} cases; per case × role in usage_by_case.csv)",
        per_case,
        csv(per_case, "cost_per_case.csv"),
    )


def run(args: argparse.Namespace) -> int:
    try:
        index = build(args.logs, args.out, args.prices)
    except (FileNotFoundError, ValueError) as error:
        print(f"bedside report: {error}")
        return 2
    print(f"wrote {index}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``report`` sub-command (module docstring)."""
    parser = sub.add_parser(
        "report",
        help="HTML report with the papers' tables and figures, CSVs, usage and cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("logs", nargs="+", metavar="LOG_OR_DIR", help="eval log files or directories of logs")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    parser.add_argument("--prices", metavar="FILE.yaml", help="price table (default: the shipped example prices)")
    parser.set_defaults(func=run)
