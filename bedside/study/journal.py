"""A rater's journal on bedside's rating page: ``raters/<rater>/journal.jsonl`` in the study folder, one JSON line
per task the rater sent (its ratings, when, and the working time on it so far), appended and fsync'ed before the
page is told it is saved (its files: :mod:`bedside.journal_files`). Reading it, a later line of a task replaces an
earlier one (the rater changed an answer), so a task counts once; a last line cut short by a crash (never
acknowledged: the page still holds those answers and sends them again) is skipped and said on stderr. Beside it,
``journal.state``: the working intervals of the tasks on the page, saved every few seconds, so a killed server
keeps the rater's time as well as their answers.

:func:`journal_records` gives every journal's ratings to :func:`bedside.study.ratings.read_ratings`, as a ratings
file's rows are; :func:`working_seconds`: the working time on each task sent, summed up by :func:`working_time`.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bedside.journal_files import StateFile, append_line
from bedside.person_time import length, union

NAME = "journal.jsonl"


def journal_path(folder: Path, rater: str) -> Path:
    return folder / "raters" / rater / NAME


class Journal:
    """One rater's journal (module docstring): ``tasks`` holds each task's latest line, ``work`` the working
    intervals of each task (epoch seconds)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state = StateFile(path)
        self.tasks: dict[str, dict[str, Any]] = {}
        self.lines: dict[str, int] = {}  # task -> the line number of its latest line
        texts = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        self.count = len(texts)  # the journal's lines (a line cut short by a crash too): the next one is count + 1
        for number, line in _readable(path, texts):
            self.tasks[str(line["task"])] = line
            self.lines[str(line["task"])] = number
        self.work: dict[str, list[list[float]]] = {
            task: [list(i) for i in line.get("intervals") or []] for task, line in self.tasks.items()
        }
        for task, intervals in self._saved_work().items():
            self.work[task] = union([*self.work.get(task, []), *intervals])

    def _saved_work(self) -> dict[str, list[list[float]]]:
        try:
            return {str(k): [[float(a), float(b)] for a, b in v] for k, v in self.state.read().get("work", {}).items()}
        except (ValueError, TypeError, AttributeError):
            return {}

    def append(self, rater: str, task: str, ratings: list[dict[str, str]]) -> dict[str, Any]:
        """The rater sent ``task``: its line, on disk (fsync'ed) when this returns."""
        intervals = union(self.work.get(task, []))
        line = {
            "rater": rater,
            "task": task,
            "ratings": ratings,
            "at": round(time.time(), 3),
            "seconds": round(length(intervals), 3),
            "intervals": [[round(a, 2), round(b, 2)] for a, b in intervals],
        }
        append_line(self.path, line)
        self.tasks[task] = line
        self.count += 1
        self.lines[task] = self.count
        return line

    def save_state(self, at_most_every: float = 0.0) -> None:
        """Writes the working intervals (atomically); with ``at_most_every``, not again within that many seconds."""
        self.state.write({"work": self.work}, at_most_every)


def _readable(path: Path, texts: list[str]) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line number, line) of every readable line of a journal; an unreadable one is said on stderr and skipped."""
    for number, text in enumerate(texts, 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
            if not isinstance(line, dict) or "task" not in line or not isinstance(line.get("ratings"), list):
                raise ValueError("no task or ratings")
        except ValueError:
            print(f"bedside study: {path}: line {number} unreadable (cut short by a crash?), skipped", file=sys.stderr)
            continue
        yield number, line


def journals(folder: Path, raters: Iterable[str]) -> list[Path]:
    """The journals of the study's raters that exist."""
    return [p for p in (journal_path(folder, r) for r in raters) if p.exists()]


def journal_records(folder: Path, raters: Iterable[str]) -> Iterable[tuple[str, dict[str, str]]]:
    """(where, rating record) of each task's latest line in each rater's journal, as a ratings file's rows."""
    for path in journals(folder, raters):
        journal = Journal(path)
        for task, line in journal.tasks.items():
            where = f"{path}: line {journal.lines[task]}"
            for rating in line["ratings"]:
                yield where, {"rater": str(line.get("rater", "")), "task": task, **rating}


def working_seconds(folder: Path, raters: Iterable[str]) -> dict[tuple[str, str], float]:
    """(rater, task) -> the working time on the page on each task sent (its latest line's)."""
    found = {}
    for path in journals(folder, raters):
        for task, line in Journal(path).tasks.items():
            found[(str(line.get("rater", "")), task)] = float(line.get("seconds") or 0.0)
    return found


def working_time(folder: Path, raters: Iterable[str]) -> str | None:
    """The raters' working time per task on the page, in one line (None: no task sent on the page)."""
    spent = working_seconds(folder, raters)
    if not spent:
        return None
    values = sorted(spent.values())

    def shown(seconds: float) -> str:
        if seconds >= 90:
            return f"{seconds / 60:.1f} min"
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"

    return (
        f"Working time on the rating page: median {shown(statistics.median(values))} per task "
        f"(n = {len(values)} tasks of {len({r for r, _ in spent})} raters; "
        f"range {shown(values[0])} to {shown(values[-1])})"
    )
