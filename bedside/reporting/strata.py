"""``bedside strata LOG [LOG ...] [--by KEY ...] [--csv out.csv]``: every score per stratum.

Every score key's mean, 95 % CI and n per value of each stratum (each benchmark declares its strata
in its descriptor, :mod:`bedside.benchmarks`, with the fewest scored cases a stratum value needs
(``min_n``); item-pooled rates (``pooled_keys``) are left out here and pooled by the benchmark's own
``bedside report`` section instead). Inspect itself shows only the headline numbers. The interval follows
bedside's one rule, chosen by each score key's declared scale (its scorer's declaration,
:func:`bedside.benchmarks.score_key`; :mod:`bedside.intervals`: Wilson for
rates declared binary, otherwise a percentile bootstrap of the mean; none below n = 2), the same as
the headline; unscored samples are left out of n. The ``health`` scorer's copies of other scorers'
bookkeeping are left out. ``--population`` limits the logs of a benchmark whose paper names several populations to the
samples of one (:mod:`bedside.reporting.population`). Each log's paper-silent options (its benchmark's
``run_options``, :mod:`bedside.reporting.run_options`) are printed under the table, one row per log, and are
columns of ``--csv``; logs that used different values of one get a warning on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import pandas as pd

from bedside import benchmarks
from bedside.benchmarks import DERIVED_SCORERS
from bedside.cli import LOGS_HELP, add_command, bad_input
from bedside.intervals import summarise
from bedside.reporting import run_options
from bedside.reporting.load import LoadedLog, benchmark_of, read_runs
from bedside.reporting.population import choices, described, restrict_log
from bedside.reporting.run import Run
from bedside.reporting.scores import as_float, label


def strata_table(log: Run, keys: Sequence[str] | None = None) -> pd.DataFrame:
    """mean, 95 % CI and n of every score key per value of each stratum key present in the log
    (``keys``: default every registered benchmark's strata)."""
    keys = benchmarks.strata() if keys is None else keys
    skip, pooled = benchmarks.skip_keys(), benchmarks.pooled_keys()
    rows = []
    for sample in log.samples or []:
        for scorer, score in (sample.scores or {}).items():
            if scorer in DERIVED_SCORERS:
                continue
            values = score.value if isinstance(score.value, dict) else {scorer: score.value}
            meta = {**(score.metadata or {}), **(sample.metadata or {})}
            for key, value in values.items():
                if key in skip or key in pooled or isinstance(value, bool | str) or value is None:
                    continue
                for stratum in keys:
                    if stratum in meta and isinstance(meta[stratum], str | int | float):
                        rows.append(
                            {
                                "stratum": stratum,
                                "group": str(meta[stratum]),
                                "scorer": scorer,
                                "key": key,
                                "value": as_float(value),
                            }
                        )
    frame = pd.DataFrame(rows, columns=["stratum", "group", "scorer", "key", "value"])
    out = []
    for labels, part in frame.groupby(["stratum", "scorer", "key", "group"], sort=True):
        stratum, scorer, key, group = (str(v) for v in labels)  # every column holds strings
        scored = [v for v in part["value"] if v == v]
        if len(scored) < benchmarks.min_n(stratum):
            continue
        row = summarise(scored, benchmarks.score_key(key).scale)
        out.append(
            {
                "stratum": stratum,
                "group": group,
                "scorer": scorer,
                "key": key,
                **row,
                "unscored": len(part) - len(scored),
            }
        )
    return pd.DataFrame(
        out, columns=["stratum", "group", "scorer", "key", "mean", "ci_lower", "ci_upper", "n", "unscored"]
    )


def run(args: argparse.Namespace) -> int:
    frames, loaded = [], []
    with bad_input("strata", FileNotFoundError, ValueError):
        given = read_runs(args.logs)  # a sharded or retried run's logs as one run
    for run in given:
        log = restrict_log(run, args.population)
        frame = strata_table(log, args.by or None)
        frame.insert(0, "log", label(log))
        item = LoadedLog(path=run.path, log=log, label=label(log), benchmark=benchmark_of(log))
        for key, (value, recorded) in _options(item).items():  # the run's paper-silent options, per row
            frame[key] = run_options.shown(value, recorded)
        frames.append(frame)
        loaded.append(item)
    table = pd.concat(frames, ignore_index=True)
    options = [k for b in benchmarks.all_benchmarks() for k in b.run_options if k in table]
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.drop(columns=options).to_string(index=False, na_rep="–"))  # "–": no interval (n < 2)
        for benchmark in benchmarks.all_benchmarks():
            runs = run_options.options_table(loaded, benchmark)
            if benchmark.run_options and len(runs):
                print(f"\nrun options ({benchmark.title}):")
                print(run_options.wide(runs, benchmark).to_string(index=False))
                for line in run_options.warnings_of(runs, benchmark):
                    print(line, file=sys.stderr, flush=True)
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def _options(item: LoadedLog) -> dict[str, tuple[str, bool]]:
    """The run options of a log of a registered benchmark that declares them (else none)."""
    if item.benchmark not in benchmarks.names():
        return {}
    return run_options.options_of(item.log, benchmarks.get(item.benchmark))


def register(sub: argparse._SubParsersAction) -> None:
    """The ``strata`` sub-command (module docstring)."""
    summary = "every score per stratum (mean, 95 %% CI, n)"
    parser = add_command(sub, "strata", summary, __doc__, run)
    parser.add_argument("logs", nargs="+", metavar="LOG", help=LOGS_HELP)
    parser.add_argument(
        "--by",
        action="append",
        metavar="KEY",
        help=f"stratum key (repeatable; default: {', '.join(benchmarks.strata())})",
    )
    parser.add_argument(
        "--population",
        choices=choices(),
        default=None,
        help=f"the samples to average, where a benchmark's paper names several ({described()}); "
        "other benchmarks' logs are unaffected",
    )
    parser.add_argument("--csv", help="also write the table to this CSV file")
