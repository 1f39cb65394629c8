"""The tables of ``bedside report``, computed from the frames of :mod:`bedside.reporting.load`.

Every number carries its 95 % interval and n, computed as the headline numbers Inspect shows, by
bedside's one interval rule chosen by each key's declared scale (:mod:`bedside.intervals`: Wilson for
rates declared binary, otherwise a percentile bootstrap of the mean, inside the scale by
construction; no interval below n = 2). Epochs are first averaged per case (as Inspect reduces them);
unscored values (NaN) are left out of n. Numbers are printed with 3 decimals, as the papers print them.

- :func:`table1` — DischargeBench Table 1: per model n (evaluable sessions: system-level failures
  excluded, they are unscored already and counted in ``system_failures``), NA, RE, CL, CR, RD, TCS,
  Comprehension, ROUGE-L, cosine;
- :func:`by_stratum` — any score keys by one stratum × model (Figure 2: ICD chapter; Figure 3: the
  persona axes; Figure 4: erroneous rate by persona axis; CPB-Bench: category, dataset, language);
- :func:`outcome_counts`, :func:`end_reasons` — Figure 4's clean-complete vs erroneous counts and
  end-reason mix;
- :func:`audit` — the clean-complete audit of Appendix A.7.2 (:func:`bedside.discharge.audit.audit_table`,
  plus the number of patient turns with a character-break phrase);
- :func:`medsp_table` — MedSP1000 micro, per-competency, macro rates, overall and per specialty;
- :func:`cpb_table` — CPB-Bench failure / overreaction / persistence rates overall and by category,
  dataset and language.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from bedside import benchmarks, cpb, discharge, medsp
from bedside.discharge import PERSONA_AXES
from bedside.discharge.audit import audit_table
from bedside.end_reasons import EndReason
from bedside.intervals import scale_of
from bedside.intervals import summarise as summarise_values
from bedside.reporting.load import LoadedLog, per_case

#: DischargeBench Table 1 columns: (score key, the paper's column label), from its descriptor
TABLE1 = discharge.BENCHMARK.headline
TABLE1_KEYS = discharge.BENCHMARK.headline_keys
SUMMARY_COLUMNS = ["mean", "ci_lower", "ci_upper", "n"]


#: digits printed (the papers print their tables with 3 decimals)
DIGITS = 3


def summarise(values: Sequence[float], key: str) -> dict[str, float]:
    """mean, 95 % interval (NaN: none) and n of the non-NaN values of score key ``key``, by the
    interval rule of the key's declared scale (:mod:`bedside.intervals`)."""
    return summarise_values(values, scale_of(key))


def fmt(mean: float, lower: float, upper: float, digits: int = DIGITS) -> str:
    if mean != mean:
        return "–"
    if lower != lower:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{lower:.{digits}f}, {upper:.{digits}f}]"


def table1(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DischargeBench Table 1 → (long: label, key, column, mean, ci_lower, ci_upper, n; wide: one
    row per model with n, system failures and "mean [lower, upper]" per column)."""
    cases = per_case(frame[frame["benchmark"] == "discharge"])
    long_rows, wide_rows = [], []
    for label, group in cases.groupby("label", sort=True):
        failures = group[group["key"] == "system_failure"]
        evaluable = int((failures["value"] < 1).sum())
        wide = {"model": label, "n": evaluable, "system_failures": int((failures["value"] == 1).sum())}
        for key, column in TABLE1:
            stats = summarise(group.loc[group["key"] == key, "value"].tolist(), key)
            long_rows.append({"model": label, "key": key, "column": column, **stats})
            wide[column] = fmt(stats["mean"], stats["ci_lower"], stats["ci_upper"])
            wide[f"{column} n"] = stats["n"]
        wide_rows.append(wide)
    long = pd.DataFrame(long_rows, columns=["model", "key", "column", *SUMMARY_COLUMNS])
    columns = ["model", "n", "system_failures"] + [c for _, c in TABLE1] + [f"{c} n" for _, c in TABLE1]
    return long, pd.DataFrame(wide_rows, columns=columns)


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


def outcome_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Sessions per model: clean-complete, erroneous (hard stop, max turns) and system failures
    (per case and epoch: every session counts once)."""
    part = frame[(frame["benchmark"] == "discharge") & (frame["scorer"] == "encounter_outcome")]
    rows = []
    for label, group in part.groupby("label", sort=True):

        def get(key: str, group: pd.DataFrame = group) -> pd.Series:
            return group.loc[group["key"] == key, "value"]

        rows.append(
            {
                "model": label,
                "sessions": int(len(get("system_failure"))),
                "clean_complete": int((get("clean_complete") == 1).sum()),
                "erroneous": int((get("erroneous") == 1).sum()),
                "system_failures": int((get("system_failure") == 1).sum()),
            }
        )
    return pd.DataFrame(rows, columns=["model", "sessions", "clean_complete", "erroneous", "system_failures"])


def end_reasons(frame: pd.DataFrame) -> pd.DataFrame:
    """End-reason mix per model: count and share of sessions (per case and epoch)."""
    part = frame[(frame["benchmark"] == "discharge") & (frame["key"] == "system_failure")]
    counts = part.groupby(["label", "end_reason"], sort=True).size().rename("count").reset_index()
    counts["share"] = counts["count"] / counts.groupby("label")["count"].transform("sum")
    return counts.rename(columns={"label": "model"})


def erroneous_by_axis(frame: pd.DataFrame, axes: Sequence[str] = PERSONA_AXES) -> pd.DataFrame:
    return pd.concat([by_stratum(frame, axis, ["erroneous"], "discharge") for axis in axes], ignore_index=True)


def audit(logs: Sequence[LoadedLog]) -> pd.DataFrame:
    """Appendix A.7.2 per log (:func:`bedside.discharge.audit.audit_table`), with the short sessions' ids and
    the number of patient turns that broke character."""
    rows = []
    for item in logs:
        if item.benchmark != "discharge":
            continue
        row = audit_table(item.log)
        short_ids, break_turns = [], 0
        for sample in item.log.samples or []:
            outcome = (sample.scores or {}).get("encounter_outcome")
            if outcome is None or outcome.answer != EndReason.CLEAN_COMPLETE:
                continue
            if isinstance(outcome.value, dict) and outcome.value.get("short_session") == 1.0:
                short_ids.append(str(sample.id))
            break_turns += len((outcome.metadata or {}).get("char_break_turns") or [])
        rows.append(
            {
                "model": item.label,
                "log": _basename(item.path),
                "clean_complete": row["clean_complete"],
                "short": row["short"],
                "short_ids": " ".join(short_ids),
                "low_tcs_short": row["low_tcs_short"],
                "low_tcs_short_ids": " ".join(row["low_tcs_short_ids"]),
                "char_break": row["char_break"],
                "char_break_turns": break_turns,
                "char_break_ids": " ".join(row["char_break_ids"]),
                "complete_after_audit": row["complete_after_audit"],
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "model",
            "log",
            "clean_complete",
            "short",
            "short_ids",
            "low_tcs_short",
            "low_tcs_short_ids",
            "char_break",
            "char_break_turns",
            "char_break_ids",
            "complete_after_audit",
        ],
    )


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


# --- MedSP1000 ---------------------------------------------------------------------------------


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
    :func:`bedside.scorers.medsp.rubric.rubric_rates_from_counts` (micro, PC…PROF, macro (the paper's,
    competency-equal), scenario_mean, each with its case-bootstrap interval). Only the first epoch of each case is
    used (the counts are per epoch)."""
    from bedside.scorers.medsp.rubric import rubric_rates_from_counts

    rows, omitted = [], []
    for label in sorted({i.label for i in logs if i.benchmark == "medsp"}):
        cases: list[tuple[str, dict]] = []
        for item in logs:
            if item.label != label or item.benchmark != "medsp":
                continue
            for sample in item.log.samples or []:
                counts = _medsp_counts(sample) if sample.epoch == 1 else None
                if counts is not None:
                    cases.append((str((sample.metadata or {}).get("specialty", "unspecified")), counts))
        groups = {"all": [c for _, c in cases]}
        for specialty in sorted({s for s, _ in cases}):
            members = [c for s, c in cases if s == specialty]
            if len(members) >= medsp.BENCHMARK.min_n.get("specialty", 1):
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


# --- CPB-Bench ---------------------------------------------------------------------------------


def cpb_keys(frame: pd.DataFrame) -> list[str]:
    present = set(frame.loc[frame["benchmark"] == "cpb", "key"])
    flags = sorted(k for k in present if len(k) > 2 and k[0] in "ABCD" and k[1] == "_")
    return [k for k in cpb.BENCHMARK.headline_keys if k in present] + flags


def cpb_table(frame: pd.DataFrame) -> pd.DataFrame:
    """CPB-Bench rates (95 % CI by bedside's rule: Wilson for these binary rates; n) per model: overall and by
    category, dataset, language. Always read the failure rate beside the overreaction rate (README)."""
    keys = cpb_keys(frame)
    part = frame[(frame["benchmark"] == "cpb") & frame["key"].isin(keys)].copy()
    part["overall"] = "all"
    frames = [by_stratum(part, "overall", keys, "cpb")]
    frames += [by_stratum(part, stratum, keys, "cpb") for stratum in cpb.BENCHMARK.strata]
    return pd.concat(frames, ignore_index=True)


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
