"""Which value of each paper-silent option every run used, for ``bedside report`` and ``bedside strata``.

A benchmark declares, in its descriptor (:attr:`bedside.benchmark.Benchmark.run_options`), the parameters of
its main task that its paper leaves open and that change a number (their defaults: the task's). A run's
value is read from the log's task metadata (``eval.metadata``), else from its task arguments
(``eval.task_args``); a log that records neither was written before the option existed and ran with the
default: it is shown as ``<default> (default; not recorded)``.

A task of the benchmark that none of the options applies to (its descriptor's ``tasks_without_run_options``,
e.g. a probe that replays transcripts) has every option shown as
``not applicable``, whatever its log records.

Runs of one benchmark that go into one table (Table 1's models are compared, logs with the same label
are pooled) and used different values of an option (runs it does not apply to left out) get a warning:
one line per option on the page and on stderr, naming each value and its logs (``bedside report``: at the
top of the page). ``bedside compare`` and the sweep leaderboard show the options of the runs they compare
(:func:`pair`, :func:`by_model`) and say when two compared runs differ in one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from inspect_ai.log import EvalLog

from bedside import benchmarks
from bedside.benchmark import NOT_APPLICABLE, Benchmark
from bedside.reporting.run import Run

#: how a value the log does not record is marked
NOT_RECORDED = "(default; not recorded)"
COLUMNS = ["model", "log", "option", "value", "recorded"]


def options_of(log: EvalLog | Run, benchmark: Benchmark) -> dict[str, tuple[str, bool]]:
    """Option -> (its value in this run, whether the log records it) for each of the benchmark's run options;
    a run of a task they do not apply to (the descriptor's ``tasks_without_run_options``): :data:`NOT_APPLICABLE`."""
    if not benchmark.run_options_apply(log.eval.task):
        return {key: (NOT_APPLICABLE, True) for key in benchmark.run_options}
    metadata, args = log.eval.metadata or {}, log.eval.task_args or {}
    found: dict[str, tuple[str, bool]] = {}
    for key in benchmark.run_options:
        if key in metadata:
            found[key] = (str(metadata[key]), True)
        elif key in args:
            found[key] = (str(args[key]), True)
        else:
            found[key] = (benchmark.run_option_defaults[key], False)
    return found


def shown(value: str, recorded: bool) -> str:
    """A value as the tables show it (module docstring)."""
    return value if recorded else f"{value} {NOT_RECORDED}"


def options_table(logs: Sequence, benchmark: Benchmark) -> pd.DataFrame:
    """One row per (log of the benchmark, run option): model, log (file name), option, value, recorded.
    ``logs``: :class:`bedside.reporting.load.LoadedLog` items (others' benchmarks left out)."""
    rows = [
        {"model": item.label, "log": Path(item.path).name, "option": key, "value": value, "recorded": recorded}
        for item in logs
        if item.benchmark == benchmark.name
        for key, (value, recorded) in options_of(item.log, benchmark).items()
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def wide(table: pd.DataFrame, benchmark: Benchmark) -> pd.DataFrame:
    """One row per log (model, log), one column per option, each value as :func:`shown`."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for r in table.to_dict("records"):
        rows.setdefault((r["model"], r["log"]), {"model": r["model"], "log": r["log"]})[r["option"]] = shown(
            r["value"], r["recorded"]
        )
    return pd.DataFrame(list(rows.values()), columns=["model", "log", *benchmark.run_options])


def warnings_of(table: pd.DataFrame, benchmark: Benchmark) -> list[str]:
    """One line per option whose value differs between the runs of ``table`` (module docstring); runs the
    option does not apply to (:data:`NOT_APPLICABLE`) are left out."""
    lines = []
    for option, part in table[table["value"] != NOT_APPLICABLE].groupby("option", sort=False):
        if part["value"].nunique() < 2:
            continue
        values = "; ".join(f"{value} ({', '.join(group['log'])})" for value, group in part.groupby("value", sort=True))
        lines.append(
            f"warning: {benchmark.title} runs in one table used different {option}: {values}; "
            "their numbers differ by this option as well as by model"
        )
    return lines


def warn(page, benchmark: Benchmark, logs: Sequence) -> None:
    """The warnings (:func:`warnings_of`) of a benchmark's runs among ``logs``: on the page and on stderr."""
    if not benchmark.run_options:
        return
    for line in warnings_of(options_table(logs, benchmark), benchmark):
        page.note(line)
        print(line, file=sys.stderr, flush=True)


def section(page, benchmark: Benchmark, logs: Sequence, csv) -> None:
    """The "Run options" table of a benchmark that declares run options (nothing otherwise): shown per
    log, and long in ``<benchmark>_run_options.csv`` (model, log, option, value, recorded)."""
    if not benchmark.run_options:
        return
    table = options_table(logs, benchmark)
    page.heading("Run options", 3)
    page.table(
        wide(table, benchmark),
        csv(table, f"{benchmark.name}_run_options.csv"),
        f"The value of each option the paper leaves open, per run (log): {', '.join(benchmark.run_options)} "
        f"(task metadata; '{NOT_RECORDED}': a log written before the option was recorded, which ran "
        f"with the default; '{NOT_APPLICABLE}': a task none of them applies to, such as a probe).",
    )


def differs(a: str, b: str) -> bool:
    """Whether two runs' values of an option differ, one it does not apply to (:data:`NOT_APPLICABLE`)
    differing from none."""
    return a != b and NOT_APPLICABLE not in (a, b)


def pair(a: EvalLog | Run, b: EvalLog | Run) -> list[dict[str, object]]:
    """The run options of two runs side by side, for a comparison of ``b`` against ``a``: one row per option
    of ``a``'s benchmark (none when the two logs are not of one benchmark that declares run options) with
    ``option``, ``a`` and ``b`` (each as :func:`shown`) and ``differs`` (the values differ and the option
    applies to both runs)."""
    benchmark = benchmarks.of_task(a.eval.task)
    if benchmark is None or not benchmark.run_options or benchmarks.of_task(b.eval.task) != benchmark:
        return []
    mine, theirs = options_of(a, benchmark), options_of(b, benchmark)
    return [
        {
            "option": key,
            "a": shown(*mine[key]),
            "b": shown(*theirs[key]),
            "differs": differs(mine[key][0], theirs[key][0]),
        }
        for key in benchmark.run_options
    ]
