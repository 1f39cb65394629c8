"""A rater's journal on bedside's rating page: ``raters/<rater>/journal.jsonl`` in the study folder, one JSON line
per task the rater sent (its ratings, when, and the working time on it so far), appended and fsync'ed before the
page is told it is saved. Reading it, a later line of a task replaces an earlier one (the rater changed an answer),
so a task counts once; a last line cut short by a crash (never acknowledged: the page still holds those answers and
sends them again) is skipped and said on stderr. Beside it, ``journal.state``: the working intervals of the tasks
on the page, saved every few seconds, so a killed server keeps the rater's time as well as their answers.

:func:`journal_records` gives every journal's ratings to :func:`bedside.study.ratings.read_ratings`, as a ratings
file's rows are; :func:`working_seconds`: the working time on each task sent, summed up by :func:`working_time`.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bedside.person_time import length, union

NAME = "journal.jsonl"


def journal_path(folder: Path, rater: str) -> Path:
    return folder / "raters" / rater / NAME


class Journal:
    """One rater's journal (module docstring): ``tasks`` holds each task's latest line, ``work`` the working
    intervals of each task (epoch seconds)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state_path = path.with_name(path.stem + ".state")
        self.tasks: dict[str, dict[str, Any]] = {}
        self.lines: dict[str, int] = {}  # task -> the line number of its latest line
        for number, line in read_lines(path):
            self.tasks[str(line["task"])] = line
            self.lines[str(line["task"])] = number
        self.work: dict[str, list[list[float]]] = {
            task: [list(i) for i in line.get("intervals") or []] for task, line in self.tasks.items()
        }
        for task, intervals in self._read_state().items():
            self.work[task] = union([*self.work.get(task, []), *intervals])
        self.saved = 0.0

    def _read_state(self) -> dict[str, list[list[float]]]:
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
            return {str(k): [[float(a), float(b)] for a, b in v] for k, v in state.get("work", {}).items()}
        except (OSError, ValueError, TypeError, AttributeError):
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size and not _ends_with_newline(self.path):
                data = b"\n" + data  # after a line cut short by a crash: that line stays alone (and is skipped)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.tasks[task] = line
        self.lines[task] = len(self.path.read_bytes().splitlines())
        return line

    def save_state(self, at_most_every: float = 0.0) -> None:
        """Writes the working intervals (atomically); with ``at_most_every``, not again within that many seconds."""
        if at_most_every and time.time() - self.saved < at_most_every:
            return
        self.saved = time.time()
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"work": self.work}), encoding="utf-8")
        tmp.replace(self.state_path)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line number, line) of every readable line of a journal; an unreadable one is said on stderr and skipped."""
    if not path.exists():
        return
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
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
