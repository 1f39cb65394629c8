"""CPB-Bench's section of ``bedside report``: failure / overreaction / persistence rates by category,
dataset and language (``cpb.csv``)."""

from __future__ import annotations

import pandas as pd

from bedside.cpb import BENCHMARK
from bedside.reporting import tables
from bedside.reporting.section import SectionInputs
from bedside.reporting.tables import by_stratum


def cpb_keys(frame: pd.DataFrame) -> list[str]:
    """The rates of the table, as CPB-Bench's scorers declare them: the headline rates, then the rest of
    Inspect's blocks (the overreaction types A-D), those the logs hold."""
    present = set(frame.loc[frame["benchmark"] == BENCHMARK.name, "key"])
    shown = [k.name for k in BENCHMARK.keys.values() if k.role == "summary"]
    return [k for k in (*BENCHMARK.headline_keys, *shown) if k in present]


def cpb_table(frame: pd.DataFrame) -> pd.DataFrame:
    """CPB-Bench rates (95 % CI by bedside's rule: Wilson for these binary rates; n) per model: overall and by
    category, dataset, language. Always read the failure rate beside the overreaction rate (bedside/cpb/README.md)."""
    keys = cpb_keys(frame)
    part = frame[(frame["benchmark"] == BENCHMARK.name) & frame["key"].isin(keys)].copy()
    part["overall"] = "all"
    frames = [by_stratum(part, "overall", keys, BENCHMARK.name)]
    frames += [by_stratum(part, stratum, keys, BENCHMARK.name) for stratum in BENCHMARK.strata]
    return pd.concat(frames, ignore_index=True)


def section(inputs: SectionInputs) -> None:
    """The section (module docstring)."""
    page, frame, csv = inputs.page, inputs.frame, inputs.csv
    page.heading("CPB-Bench: failure and overreaction rates")
    table = cpb_table(frame)
    csv(table, "cpb.csv")
    page.table(
        tables.wide(table, ["model", "stratum", "group"], "key", order=cpb_keys(frame)),
        "cpb.csv",
        "Rates (lower is better) with 95 % CI (Wilson) and n, overall and by category, dataset and "
        "language. Read the failure rate beside the overreaction rate: a doctor that treats every "
        "patient as difficult lowers its failure rate by overreacting.",
    )
