"""The shared tables of ``bedside report``, computed from the frames of :mod:`bedside.reporting.load`
(each benchmark's own tables are in its report section, ``bedside/<benchmark>/report.py``).

Every number carries its 95 % interval and n, computed as the headline numbers Inspect shows, by
bedside's one interval rule chosen by each key's declared scale (its scorer's declaration,
:func:`bedside.benchmarks.score_key`; :mod:`bedside.intervals`: Wilson for
rates declared binary, otherwise a percentile bootstrap of the mean, inside the scale by
construction; no interval below n = 2). Epochs are first averaged per case (as Inspect reduces them);
unscored values (NaN) are left out of n. Numbers are printed with 3 decimals, as the papers print them.

- :func:`by_stratum` — any score keys by one stratum × model;
- :func:`headline_table` — a benchmark's headline keys overall and per declared stratum;
- :func:`wide` — a long table as one "mean [lower, upper] (n)" cell per column value.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from bedside import benchmarks
from bedside.intervals import summarise as summarise_values
from bedside.reporting.load import per_case

SUMMARY_COLUMNS = ["mean", "ci_lower", "ci_upper", "n"]


#: digits printed (the papers print their tables with 3 decimals)
DIGITS = 3


def summarise(values: Sequence[float], key: str) -> dict[str, float]:
    """mean, 95 % interval (NaN: none) and n of the non-NaN values of score key ``key``, by the
    interval rule of the key's declared scale (:func:`bedside.benchmarks.score_key`)."""
    return summarise_values(values, benchmarks.score_key(key).scale)


def fmt(mean: float, lower: float, upper: float, digits: int = DIGITS) -> str:
    if mean != mean:
        return "–"
    if lower != lower:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{lower:.{digits}f}, {upper:.{digits}f}]"


def by_stratum(
    frame: pd.DataFrame, stratum: str, keys: Sequence[str], benchmark: str | None = None, min_n: int | None = None
) -> pd.DataFrame:
    """mean, 95 % CI and n of each key per (model, value of ``stratum``); values without the
    stratum are left out. ``min_n`` (default: the benchmarks' declared floor, :func:`bedside.benchmarks.min_n`)
    drops small groups."""
    part = frame if benchmark is None else frame[frame["benchmark"] == benchmark]
    part = part[part["key"].isin(keys) & part[stratum].notna()]
    cases = per_case(part, by=[stratum])
    rows = []
    floor = benchmarks.min_n(stratum) if min_n is None else min_n
    for (label, key, group), values in cases.groupby(["label", "key", stratum], sort=True):
        stats = summarise(values["value"].tolist(), str(key))
        if stats["n"] < floor:
            continue
        rows.append({"model": label, "stratum": stratum, "group": group, "key": key, **stats})
    return pd.DataFrame(rows, columns=["model", "stratum", "group", "key", *SUMMARY_COLUMNS])


def headline_table(frame: pd.DataFrame, benchmark: benchmarks.Benchmark) -> pd.DataFrame:
    """A benchmark's headline keys (its descriptor's) per model: overall and by each declared stratum."""
    keys = list(benchmark.headline_keys)
    part = frame[(frame["benchmark"] == benchmark.name) & frame["key"].isin(keys)].assign(overall="all")
    frames = [by_stratum(part, stratum, keys, benchmark.name) for stratum in ("overall", *benchmark.strata)]
    return pd.concat(frames, ignore_index=True)


def wide(
    table: pd.DataFrame, index: Sequence[str], column: str, digits: int = DIGITS, order: Sequence[str] | None = None
) -> pd.DataFrame:
    """A long table of (mean, ci_lower, ci_upper, n) as one row per ``index`` and one
    "mean [lower, upper] (n)" cell per value of ``column`` (in ``order``, else as they appear)."""
    if table.empty:
        return table
    cells = table.assign(
        cell=[
            f"{fmt(m, lo, hi, digits)} (n={int(n)})"
            for m, lo, hi, n in zip(table["mean"], table["ci_lower"], table["ci_upper"], table["n"])
        ]
    )
    out = cells.pivot_table(index=list(index), columns=column, values="cell", aggfunc="first", sort=False)
    out = out.reindex(columns=[c for c in (order or dict.fromkeys(table[column])) if c in out.columns])
    out.columns.name = None
    return out.reset_index().fillna("–")
