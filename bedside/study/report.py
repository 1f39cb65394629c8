"""The clinician study's section of ``bedside report`` (``--study STUDY [--ratings RATINGS.csv...]``): the same
analysis as ``bedside study report`` (:mod:`bedside.study.analysis`), one table per part, each number as
"estimate [95% interval]" beside its n (ratings), cases and raters, each table also as
``clinician_study_<part>.csv`` (the analysis's rows: estimate, low, high, n_cases, n_raters, n, note).

The study is read before the report writes anything (:func:`read`), so a bad study or rating stops it with one
line (:mod:`bedside.study.ratings`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from bedside.reporting.html import Page
from bedside.reporting.section import CsvWriter
from bedside.study.analysis import HEADINGS, analyse, summary
from bedside.study.build import StudyError
from bedside.study.ratings import Study, read_study


@dataclass(frozen=True)
class Rated:
    """A study and its checked ratings."""

    study: Study
    ratings: pd.DataFrame


def read(study: str | None, ratings: Sequence[str] | None) -> Rated | None:
    """The study and its ratings (none given: the raters' templates in its folder); None without ``--study``."""
    if study is None:
        if ratings:
            raise StudyError(f"--ratings {' '.join(ratings)}: ratings of which study? (give --study STUDY)")
        return None
    return Rated(*read_study(study, ratings or ()))


def shown(rows: pd.DataFrame) -> pd.DataFrame:
    """The analysis's rows as the page shows them: the estimate with its interval, then its n's."""
    cells = [f"{e:.3f} [{lo:.3f}, {hi:.3f}]" for e, lo, hi in zip(rows["estimate"], rows["low"], rows["high"])]
    out = rows[["measure", "a", "b"]].assign(**{"estimate [95% CI]": cells})
    out = pd.concat([out, rows[["n", "n_cases", "n_raters", "note"]]], axis=1)
    return out.loc[:, [c for c in out.columns if c not in ("a", "b") or (out[c] != "").any()]]


def section(page: Page, rated: Rated, csv: CsvWriter, seed: int = 0) -> None:
    """The study's analysis: a note saying what it is of, then one table per part of the analysis."""
    table = analyse(rated.study, rated.ratings, seed=seed)
    page.heading("Clinician study")
    page.note(
        summary(rated.study, rated.ratings)
        + f". Study folder: {rated.study.folder}. n: ratings (units for alpha); n_cases, n_raters: "
        "the cases and raters behind each number."
    )
    for part, heading in HEADINGS:
        rows = table[table["section"] == part].drop(columns="section").reset_index(drop=True)
        if rows.empty:
            continue
        page.heading(heading, level=3)
        page.table(shown(rows), csv(rows, f"clinician_study_{part}.csv"))
