"""A person's calls and their journal on ``bedside/human``'s page: one pending generate call as the page shows
it (:class:`Call`), and the journal of a run (:class:`Journal`): the accepted replies and the cases that ended,
one JSON line each (fsync'ed), and the page's state beside it (their files: :mod:`bedside.journal_files`); where a
run's journal lives (:func:`default_journal`: the run's log folder) and the names the page gives its cases
(:func:`case_key`). The page and its desk are :mod:`bedside.providers.human_desk`."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bedside.journal_files import StateFile, append_line
from bedside.person_time import length, union

#: whose replies a journal gives back: the same run's only, or any run's that shares the journal file
Replay = Literal["this_run", "across_runs"]


@dataclass
class Call:
    """One pending generate call as the page shows it."""

    id: str
    run: str
    task: str
    case: str
    epoch: int
    protocol: str
    role: str
    turn: int
    attempt: int
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None
    form: dict[str, Any] | None = None
    #: the role's turn budget in its encounter: turn, of (at most), last, meaning
    budget: dict[str, Any] | None = None
    #: the encounter's other roles (who "they" are in the conversation)
    counterpart: list[str] = field(default_factory=list)
    #: text added to the role's instructions since its first turn (a supervisor's correction)
    added: str | None = None
    #: why this call is asked again: kind (unreadable / discarded), reason, the previous reply
    previous: dict[str, str] | None = None
    #: what the run tells the person beyond the prompt (:func:`tell`)
    notices: list[str] = field(default_factory=list)
    opened: float = field(default_factory=time.time)
    #: working intervals (epoch seconds): the call shown on a visible page whose person is active
    work: list[list[float]] = field(default_factory=list)
    reply: str | None = None
    journal: Journal | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "key": case_key(self.run, self.case, self.epoch),
            "task": self.task,
            "case": self.case,
            "epoch": self.epoch,
            "protocol": self.protocol,
            "role": self.role,
            "turn": self.turn,
            "attempt": self.attempt,
            "messages": self.messages,
            "schema": self.schema,
            "form": self.form or {},
            "budget": self.budget,
            "counterpart": self.counterpart,
            "added": self.added,
            "previous": self.previous,
            "notices": self.notices,
            "waiting_seconds": round(time.time() - self.opened, 1),
            "work_seconds": round(length(self.work), 1),
        }


class Journal:
    """One reply journal — a JSONL file, one accepted reply per line, each naming its run, and a line for each
    case that ended (``"kind": "case"``: its end reason and outcome) — and its state beside it
    (``<name>.state``): the page's port, the drafts and the working intervals of the calls not answered yet.
    What the page counts (replies sent, working time, finished cases) is read from it, so a resumed run's page
    counts the replies and the work of its run before the crash."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state = StateFile(path)
        #: (run, case, epoch) -> the case's last line: {task, case, epoch, state, ending, detail}
        self.cases: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.entries = self._read()
        state = self.state.read()
        self.port: int | None = state.get("port")
        self.drafts: dict[str, str] = {str(k): str(v) for k, v in state.get("drafts", {}).items()}
        self.work: dict[str, list[list[float]]] = {
            str(k): [[float(a), float(b)] for a, b in v] for k, v in state.get("work", {}).items()
        }

    def _read(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    if entry.get("kind") == "case":
                        self.cases[(entry["run"], entry["case"], int(entry["epoch"]))] = entry
                    else:
                        found[entry["id"]] = entry
                except (ValueError, KeyError, TypeError):  # a line cut short by a crash: the reply is asked again
                    print(f"bedside/human: {self.path} line {number} unreadable, ignored", file=sys.stderr)
        return found

    def find(self, call: Call, replay: Replay) -> dict[str, Any] | None:
        """The accepted reply of this call: of the same run, or of any run under ``across_runs``."""
        entry = self.entries.get(call.id)
        if entry is not None and (replay == "across_runs" or entry.get("run") == call.run):
            return entry
        return None

    def other_runs(self, run: str) -> int:
        """How many replies of other runs the journal holds."""
        return sum(e.get("run") != run for e in self.entries.values())

    def of_runs(self, runs: Collection[str]) -> list[dict[str, Any]]:
        """The accepted replies of these runs (before a crash too)."""
        return [e for e in self.entries.values() if e.get("run") in runs]

    def record_case(self, run: str, entry: dict[str, Any]) -> None:
        """A case of ``run`` ended: its line (the page's list of cases after a resume reads it)."""
        line = {"kind": "case", "run": run, **entry, "at": time.time()}
        append_line(self.path, line)
        self.cases[(run, str(entry["case"]), int(entry["epoch"]))] = line

    def record(self, call: Call, reply: str) -> dict[str, Any]:
        entry = {
            "id": call.id,
            "run": call.run,
            "task": call.task,
            "case": call.case,
            "epoch": call.epoch,
            "protocol": call.protocol,
            "turn": call.turn,
            "attempt": call.attempt,
            "reply": reply,
            "seconds": round(length(call.work), 3),
            "intervals": [[round(a, 2), round(b, 2)] for a, b in union(call.work)],
            "at": time.time(),
        }
        append_line(self.path, entry)
        self.entries[call.id] = entry
        self.drafts.pop(call.id, None)
        self.work.pop(call.id, None)
        self.save()
        return entry

    def save(self, at_most_every: float = 0.0) -> None:
        """Writes the state (atomically); with ``at_most_every``, not again within that many seconds."""
        self.state.write({"port": self.port, "drafts": self.drafts, "work": self.work}, at_most_every)


def case_key(run: str, case: str, epoch: int) -> str:
    """How the page names a case of a run (its calls and its line in the list of cases)."""
    return f"{run}|{case}|{epoch}"


def default_journal(task: str, run: str, log: str | None) -> Path:
    """``<the run's log folder>/human/<task>-<run>.jsonl``: the journal belongs to the run's log folder
    (``--log-dir``), whatever the current folder, and ``inspect eval-retry`` keeps the run's ``task_id``, so a
    retried run finds it from any folder. A log folder that is not a local one (``s3://...``: a journal is
    appended to line by line) keeps its journals in ``./logs/human`` of the folder the eval runs in, and
    stderr says so (:func:`remote_journal_note`); so does a call outside a logged sample (no log)."""
    folder = Path(log).parent if log and "://" not in log else Path("logs")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", task.split("/")[-1]) or "task"
    return (folder / "human" / f"{name}-{run}.jsonl").absolute()


def remote_journal_note(log: str | None, journal: Path) -> str | None:
    """What stderr and the page say when the log folder is not local: the journal stays on this machine."""
    if not log or "://" not in log:
        return None
    return (
        f"the log folder is not local ({log.rsplit('/', 1)[0]}): the journal is kept on this machine at {journal}; "
        "run inspect eval-retry from this same folder, or give the run -M journal=/an/absolute/path.jsonl"
    )


def saved_port(journal: Path) -> int | None:
    """The port of the page the journal's run last used (from its state), if any."""
    port = StateFile(journal).read().get("port")
    return int(port) if port else None
