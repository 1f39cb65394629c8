"""What a benchmark's section of ``bedside report`` is given, defined once: :class:`SectionInputs`. Every
section takes it — a benchmark's own (its tools' ``report``, :class:`bedside.cli.Tools`) and
the generic one of a benchmark without its own (:func:`bedside.reporting.build.generic_section`) — and
:func:`bedside.reporting.build.build` makes it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pandas as pd

if TYPE_CHECKING:
    from bedside.benchmark import Benchmark
    from bedside.reporting.html import Page
    from bedside.reporting.load import LoadedLog

#: writes a table as ``out/<name>`` and returns ``name`` (to link it under the page's table)
CsvWriter = Callable[[pd.DataFrame, str], str]


@dataclass(frozen=True)
class SectionInputs:
    """One benchmark's section of the report: where it writes and what it reads."""

    page: Page  # the report page it appends its headings, tables and figures to
    benchmark: Benchmark
    #: every log's scores, one row per sample × score key (:func:`bedside.reporting.load.scores_frame`),
    #: restricted to ``population``
    frame: pd.DataFrame
    logs: list[LoadedLog]  # every log of the report (a section reads its own benchmark's)
    out: Path  # the report's folder (figures are written there)
    csv: CsvWriter
    #: the one of the benchmark's populations (its tools' ``populations``) the frame holds; None: every sample
    population: str | None = None
    #: draw the figures (PNG, SVG); False (``bedside report --no-figures``): their tables and captions only
    figures: bool = True


class Section(Protocol):
    """A benchmark's section of ``bedside report``."""

    def __call__(self, inputs: SectionInputs) -> None: ...
