"""Every time and size that README.md and docs/*.md state names the measurement it comes from.

A *figure* is a number with a unit of time or size (``12 s``, ``6.5 min``, ``1,437 MB``, ``54.3 calls/s``)
outside code. Each paragraph and each table row that states one carries its source (docs/testing.md,
"Figures in the docs"):

- on the measurements page, docs/results.md: the day (``YYYY-MM-DD``) and the command (in backticks) in
  the row or paragraph itself or in the paragraph just above its table (the machine is the page's
  "Machine" section unless the row names another);
- anywhere else: a link to the measurement, on docs/results.md or in a ``bench/RESULTS*.md`` report;
- a figure that is not a measurement (a configured timeout, a setting, a figure quoted from a paper, a
  hypothetical input): the marker ``<!-- not measured: why -->`` in the same paragraph or row.

A table row may also take its source from the paragraph just above its table (its caption).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs_commands import REPO

#: a number (1,437 / 6.5 / 1.38-1.53) and a unit of time, size or rate
FIGURE = re.compile(
    r"(?<![\w.,/-])\d+(?:[.,]\d+)*(?:\s?[-–]\s?\d+(?:[.,]\d+)*)?[ \u00a0-]?"
    r"(?:ms|s|min|minutes?|seconds?|h|hours?|KB|kB|MB|GB|TB|KiB|MiB|GiB|calls/s|sessions/h)(?![\w/])"
)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
#: a link to a measurement: the measured-figures page or a benchmark's report
MEASURED_LINK = re.compile(r"\]\((?:[./]*(?:docs/)?results\.md|[./]*bench/RESULTS[\w-]*\.md)(?:#[^)]*)?\)")
NOT_MEASURED = re.compile(r"<!--\s*not measured:\s*\S[^>]*-->")
COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
RESULTS = "docs/results.md"


@dataclass
class Unit:
    """A paragraph or a table row, with the paragraph above its table (``caption``) for a row."""

    path: str
    line: int
    text: str
    caption: str = ""


def units(path: str, text: str) -> list[Unit]:
    """The paragraphs and table rows of a Markdown text, fenced and indented code left out."""
    found: list[Unit] = []
    block: list[tuple[int, str]] = []
    previous = ""

    def flush() -> None:
        nonlocal previous
        if not block:
            return
        lines = [line for _, line in block]
        if all(line.startswith("    ") for line in lines) and not lines[0].lstrip().startswith(("-", "*", "|")):
            pass  # an indented code block
        elif lines[0].lstrip().startswith("|"):
            rows = [(n, line) for n, line in block if not re.fullmatch(r"\s*\|[\s|:-]*\|?\s*", line)]
            found.extend(Unit(path, n, line, previous) for n, line in rows[1:])  # rows[0]: the header
        else:
            found.append(Unit(path, block[0][0], "\n".join(lines)))
            previous = found[-1].text
        block.clear()

    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1)[0] * len(fence) == opening.group(1)[: len(fence)]:
                fence = None
            continue
        if opening:
            flush()
            fence = opening.group(1)
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            flush()
            continue
        block.append((number, line))
    flush()
    return found


def figures(text: str) -> list[str]:
    """The figures of a text, outside code spans, comments and link targets."""
    prose = LINK_TARGET.sub("]", COMMENT.sub(" ", CODE_SPAN.sub(" ", text)))
    return [m.group(0) for m in FIGURE.finditer(prose)]


def sourced(unit: Unit) -> bool:
    where = unit.text + "\n" + unit.caption  # a table row: its caption too
    if NOT_MEASURED.search(where):
        return True
    if unit.path == RESULTS:
        return bool(DATE.search(where) and CODE_SPAN.search(where))
    return bool(MEASURED_LINK.search(where))


def unsourced(path: str, text: str) -> list[str]:
    """``path:line: figures`` of every paragraph or row whose figures name no source."""
    return [
        f"{u.path}:{u.line}: {', '.join(found)}"
        for u in units(path, text)
        if (found := figures(u.text)) and not sourced(u)
    ]


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_figure_of_the_readme_and_the_docs_names_its_measurement():
    missing = [line for path in documents() for line in unsourced(str(path.relative_to(REPO)), path.read_text())]
    assert not missing, (
        "figures without a source (link the measurement on docs/results.md, or mark a figure that is not a "
        "measurement with <!-- not measured: why -->; docs/testing.md, 'Figures in the docs'):\n" + "\n".join(missing)
    )


def test_the_pages_state_figures_at_all():
    """The scan sees the figures it is meant to check (a broken pattern would pass everything)."""
    found = [f for path in documents() for u in units(str(path), path.read_text()) for f in figures(u.text)]
    assert len(found) >= 30


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("`make test` takes about 6.5 min.\n", ["x.md:1: 6.5 min"]),
        ("`make test` takes 11 min 10 s ([measured](docs/results.md#set-up-test-and-ci-times)).\n", []),
        ("`make test` takes 11 min 10 s ([measured](../bench/RESULTS-scale-out.md)).\n", []),
        ("Retries wait 5 s, then 10 s.<!-- not measured: configured backoff -->\n", []),
        ("Retries wait 5 s.<!-- not measured: -->\n", ["x.md:1: 5 s"]),  # a marker names its reason
        ("Run it:\n\n```bash\nsleep 5s; echo 30 min\n```\n\nand `--timeout 30s`.\n", []),
        (
            "| what | time |\n|---|---|\n| the suite | 8 min 34 s |\n| lint | 30 s |\n",
            ["x.md:3: 8 min, 34 s", "x.md:4: 30 s"],
        ),
        ("an 85-s span, 1,437 MB, 2.4 calls/s, 3 h, 300 ms\n", ["x.md:1: 85-s, 1,437 MB, 2.4 calls/s, 3 h, 300 ms"]),
        ("1,482 passed, 3 samples, Python 3.11.7, 5×A100, 16 samples at once\n", []),
    ],
)
def test_a_figure_without_its_source_is_found(text, missing):
    assert unsourced("x.md", text) == missing


def test_on_the_results_page_the_day_and_command_come_with_the_row_or_its_caption():
    page = (
        "CPU seconds, each in one process; 2026-12-03.\n\n"
        "| what | command | measured |\n|---|---|---|\n| report | `bedside report` | 11.1 s |\n\n"
        "Two workers went 1.53× (83.3 calls/s).\n"
    )
    assert unsourced(RESULTS, page) == ["docs/results.md:7: 83.3 calls/s"]
