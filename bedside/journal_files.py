"""The files of a person's journal on a bedside page (``bedside/human``'s and the rating study's): the journal,
JSON lines appended one at a time and fsync'ed before the page hears they are saved (:func:`append_line`), and its
state beside it, one JSON object rewritten atomically, at most every few seconds (:class:`StateFile`).

A line is written with non-ASCII characters escaped, so a text holding a line separator (U+2028) stays on its
line. A last line cut short by a crash (never acknowledged: the page sends it again) stays alone on its line, and
whoever reads the journal skips it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def append_line(path: Path, line: dict[str, Any]) -> None:
    """Appends ``line`` to the journal at ``path``: on disk (fsync'ed) when this returns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(line) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size and not _ends_with_newline(path):
            data = b"\n" + data  # after a line cut short by a crash: that line stays alone (and is skipped)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def state_path(journal: Path) -> Path:
    """The journal's state: JSON, named ``<journal name>.state`` (not ``.json``: a journal named like a log,
    with a timestamp first, would otherwise make its state look like an Inspect log to ``inspect view``)."""
    return journal.with_name(journal.stem + ".state")


class StateFile:
    """A journal's state (:func:`state_path`): read whole (``{}`` when missing or unreadable), written atomically
    (a temporary file replacing it), not again within ``at_most_every`` seconds when that is given."""

    def __init__(self, journal: Path) -> None:
        self.path = state_path(journal)
        self.saved = 0.0

    def read(self) -> dict[str, Any]:
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def write(self, state: dict[str, Any], at_most_every: float = 0.0) -> None:
        if at_most_every and time.time() - self.saved < at_most_every:
            return
        self.saved = time.time()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state), encoding="utf-8")
        tmp.replace(self.path)
