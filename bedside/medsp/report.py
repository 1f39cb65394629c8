"""MedSP1000's section of ``bedside report``: rubric completion rates per model, overall and per
specialty (``medsp.csv``: micro, PC…PROF, macro; ``medsp_omitted_specialties.csv``: specialties with too
few scored cases), pooled from each case's counts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from bedside.medsp import BENCHMARK
from bedside.medsp.rubric import rubric_rates_from_counts
from bedside.reporting import tables
from bedside.reporting.load import LoadedLog
from bedside.reporting.section import SectionInputs
from bedside.reporting.tables import SUMMARY_COLUMNS


def _medsp_counts(sample) -> dict | None:
    for score in (sample.scores or {}).values():
        counts = (score.metadata or {}).get("counts")
        if isinstance(counts, dict) and not any(v != v for v in _values(score.value)):
            return counts
    return None


def _values(value: object) -> list[float]:
    if isinstance(value, dict):
        return [
            float(v)
            for k, v in value.items()
            if k in ("micro", "scenario_mean", "completion") and isinstance(v, int | float)
        ]
    return [float(value)] if isinstance(value, int | float) else []


def medsp_table(logs: Sequence[LoadedLog]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MedSP1000 rubric rates per model, overall and per specialty (groups with fewer than
    ``min_n["specialty"]`` (MedSP1000's descriptor) scored cases are left out and listed in the second frame), from each
    case's ``counts`` (competency → [met, judged]) pooled by
    :func:`bedside.medsp.rubric.rubric_rates_from_counts` (micro, PC…PROF, macro (the paper's,
    competency-equal), scenario_mean, each with its case-bootstrap interval). Only the first epoch of each case is
    used (the counts are per epoch)."""
    rows, omitted = [], []
    for label in sorted({i.label for i in logs if i.benchmark == BENCHMARK.name}):
        cases: list[tuple[str, dict]] = []
        for item in logs:
            if item.label != label or item.benchmark != BENCHMARK.name:
                continue
            for sample in item.log.samples or []:
                counts = _medsp_counts(sample) if sample.epoch == 1 else None
                if counts is not None:
                    cases.append((str((sample.metadata or {}).get("specialty", "unspecified")), counts))
        groups = {"all": [c for _, c in cases]}
        for specialty in sorted({s for s, _ in cases}):
            members = [c for s, c in cases if s == specialty]
            if len(members) >= BENCHMARK.min_n.get("specialty", 1):
                groups[f"specialty={specialty}"] = members
            else:
                omitted.append({"model": label, "specialty": specialty, "n": len(members)})
        for group, members in groups.items():
            rates = rubric_rates_from_counts(members)
            metrics = [k for k in rates if " " not in k]
            for metric in metrics:
                n = rates.get(f"{metric} n", float(len(members)))
                rows.append(
                    {
                        "model": label,
                        "group": group,
                        "metric": metric,
                        "mean": rates[metric],
                        "ci_lower": rates.get(f"{metric} lower", math.nan),
                        "ci_upper": rates.get(f"{metric} upper", math.nan),
                        "n": int(n),
                        "items": rates.get(f"{metric} items", math.nan),
                    }
                )
    return (
        pd.DataFrame(rows, columns=["model", "group", "metric", *SUMMARY_COLUMNS, "items"]),
        pd.DataFrame(omitted, columns=["model", "specialty", "n"]),
    )


def section(inputs: SectionInputs) -> None:
    """The section (module docstring)."""
    page, logs, csv = inputs.page, inputs.logs, inputs.csv
    page.heading("MedSP1000: rubric completion")
    try:
        table, omitted = medsp_table(logs)
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
