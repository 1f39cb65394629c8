"""DischargeBench's section of ``bedside report``: the paper's Table 1 and Figures 2-4 and 14, and the
clean-complete audit (Appendix A.7.2), from the frames of :mod:`bedside.reporting.load`.

==========================  ===================================================================
``table1.csv``              Table 1, long: model, key, column, mean, 95 % CI, n
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
==========================  ===================================================================

- :func:`table1` — per model n (evaluable sessions: system-level failures excluded, they are unscored
  already and counted in ``system_failures``), NA, RE, CL, CR, RD, TCS, Comprehension, ROUGE-L, cosine;
- :func:`outcome_counts`, :func:`end_reasons` — Figure 4's clean-complete vs erroneous counts and
  end-reason mix; :func:`erroneous_by_axis` — Figure 4's erroneous rate by persona axis;
- :func:`audit` — the clean-complete audit (:func:`bedside.discharge.audit.audit_table`, plus the number
  of patient turns with a character-break phrase).

Intervals and n as everywhere in the report (:mod:`bedside.reporting.tables`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from bedside.discharge import BENCHMARK, PERSONA_AXES
from bedside.discharge.audit import audit_table
from bedside.discharge.population import COUNTED, POPULATIONS
from bedside.end_reasons import EndReason
from bedside.intervals import describe
from bedside.reporting.load import LoadedLog, per_case
from bedside.reporting.section import SectionInputs
from bedside.reporting.tables import SUMMARY_COLUMNS, by_stratum, fmt, summarise


def table1_columns() -> list[tuple[str, str]]:
    """Table 1's columns: (score key, the paper's label), as DischargeBench's scorers declare them."""
    return [(k.name, k.label) for k in BENCHMARK.headline]


def table1(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """DischargeBench Table 1 → (long: label, key, column, mean, ci_lower, ci_upper, n; wide: one
    row per model with n, system failures and "mean [lower, upper]" per column)."""
    cases = per_case(frame[frame["benchmark"] == BENCHMARK.name])
    columns_of = table1_columns()
    long_rows, wide_rows = [], []
    for label, group in cases.groupby("label", sort=True):
        failures = group[group["key"] == "system_failure"]
        evaluable = int((failures["value"] < 1).sum())
        wide = {"model": label, "n": evaluable, "system_failures": int((failures["value"] == 1).sum())}
        for key, column in columns_of:
            stats = summarise(group.loc[group["key"] == key, "value"].tolist(), key)
            long_rows.append({"model": label, "key": key, "column": column, **stats})
            wide[column] = fmt(stats["mean"], stats["ci_lower"], stats["ci_upper"])
            wide[f"{column} n"] = stats["n"]
        wide_rows.append(wide)
    long = pd.DataFrame(long_rows, columns=["model", "key", "column", *SUMMARY_COLUMNS])
    columns = ["model", "n", "system_failures"] + [c for _, c in columns_of] + [f"{c} n" for _, c in columns_of]
    return long, pd.DataFrame(wide_rows, columns=columns)


def outcome_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Sessions per model: clean-complete, erroneous (hard stop, max turns) and system failures
    (per case and epoch: every session counts once)."""
    part = frame[(frame["benchmark"] == BENCHMARK.name) & (frame["scorer"] == "encounter_outcome")]
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
    part = frame[(frame["benchmark"] == BENCHMARK.name) & (frame["key"] == "system_failure")]
    counts = part.groupby(["label", "end_reason"], sort=True).size().rename("count").reset_index()
    counts["share"] = counts["count"] / counts.groupby("label")["count"].transform("sum")
    return counts.rename(columns={"label": "model"})


def erroneous_by_axis(frame: pd.DataFrame, axes: Sequence[str] = PERSONA_AXES) -> pd.DataFrame:
    return pd.concat([by_stratum(frame, axis, ["erroneous"], BENCHMARK.name) for axis in axes], ignore_index=True)


def audit(logs: Sequence[LoadedLog]) -> pd.DataFrame:
    """Appendix A.7.2 per log (:func:`bedside.discharge.audit.audit_table`), with the short sessions' ids and
    the number of patient turns that broke character."""
    rows = []
    for item in logs:
        if item.benchmark != BENCHMARK.name:
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


def section(inputs: SectionInputs) -> None:
    """The section (module docstring); its population (default: evaluable) is named in Table 1's caption."""
    page, frame, out, csv = inputs.page, inputs.frame, inputs.out, inputs.csv
    if inputs.figures:
        from bedside.reporting import figures  # matplotlib: imported only when the report draws

    def figure(draw: Callable[[], str | None], caption: str, table: str | None) -> None:
        """A figure drawn and shown with its ``table``'s CSV; with ``--no-figures`` its caption and CSV only."""
        if inputs.figures:
            page.figure(draw(), caption, table)
        else:
            page.undrawn(caption, "bedside report --no-figures", table)

    page.heading("DischargeBench")
    columns, keys = table1_columns(), BENCHMARK.headline_keys
    long, wide = table1(frame)
    csv(long, "table1.csv")
    page.heading("Table 1: main results", 3)
    page.table(
        wide[["model", "n", "system_failures"] + [c for _, c in columns]],
        csv(wide, "table1_wide.csv"),
        f"Mean [95 % CI] per model. n = {COUNTED[inputs.population or POPULATIONS[0]]}. NA naturalness, RE "
        "responsiveness, CL clarity, CR clinical relevance (1–5), RD Flesch–Kincaid grade, TCS topic checklist "
        "score, Comprehension, ROUGE-L and cosine (factual consistency). " + describe() + "; each metric's own n "
        "(unscored sub-scores left out) is in the CSV.",
    )

    page.heading("Figure 2: metrics by ICD chapter", 3)
    grid = by_stratum(frame, "icd_chapter", keys, BENCHMARK.name)
    csv(grid, "fig2_icd_chapter.csv")
    figure(
        lambda: figures.heatmaps(grid, columns, out, "fig2_icd_chapter", "ICD chapter"),
        "Mean of every Table 1 metric by ICD chapter × model (fig2_icd_chapter.csv: mean, CI, n)",
        "fig2_icd_chapter.csv",
    )

    page.heading("Figure 3: metrics by persona", 3)
    for axis in PERSONA_AXES:
        grid = by_stratum(frame, axis, keys, BENCHMARK.name)
        name = f"fig3_{axis}"
        csv(grid, f"{name}.csv")
        figure(
            lambda: figures.grouped_bars(grid, columns, out, name, axis.replace("_", " ")),  # noqa: B023 (called at once)
            f"Every Table 1 metric by {axis.replace('_', ' ')} × model, 95 % CI ({name}.csv)",
            f"{name}.csv",
        )

    page.heading("Figure 4: failure analysis", 3)
    counts, reasons = outcome_counts(frame), end_reasons(frame)
    figure(
        lambda: figures.outcomes(counts, reasons, out, "fig4_outcomes"),
        "Clean-complete vs erroneous (hard stop, max turns) vs system-failure sessions, and the end-reason mix",
        None,  # its two tables follow, each with its CSV
    )
    page.table(counts, csv(counts, "fig4_outcomes.csv"))
    page.table(reasons, csv(reasons, "fig4_end_reasons.csv"))
    errs = erroneous_by_axis(frame)
    figure(
        lambda: figures.erroneous_by_axis(errs, out, "fig4_erroneous_by_axis"),
        "Erroneous-session rate by persona axis × model, Wilson 95 % CI (fig4_erroneous_by_axis.csv)",
        "fig4_erroneous_by_axis.csv",
    )
    csv(errs, "fig4_erroneous_by_axis.csv")

    page.heading("Figure 14: erroneous rate by ICD chapter (Appendix A.7)", 3)
    chapters = by_stratum(frame, "icd_chapter", ["erroneous"], BENCHMARK.name)
    csv(chapters, "fig14_erroneous_by_icd_chapter.csv")
    figure(
        lambda: figures.heatmaps(
            chapters, [("erroneous", "erroneous rate")], out, "fig14_erroneous_by_icd_chapter", "ICD chapter"
        ),
        "Erroneous-session rate (hard stop or max turns; system failures excluded) by ICD chapter × model, "
        "as the paper's Figure 14 (fig14_erroneous_by_icd_chapter.csv: rate, Wilson 95 % CI, n)",
        "fig14_erroneous_by_icd_chapter.csv",
    )

    page.heading("Clean-complete audit (Appendix A.7.2)", 3)
    audited = audit(inputs.logs)
    page.table(
        audited,
        csv(audited, "audit.csv"),
        "Among clean-complete sessions: short (≤ 15 turns), short with TCS < 0.5, and sessions in which the "
        "Virtual Patient broke character ('as an AI', 'language model', \"I'm an assistant\"), with the "
        "number of such patient turns and the case ids; complete_after_audit drops the last two groups.",
    )
