"""``bedside/human``: a person plays the role this model is bound to, in their browser.

``--model bedside/human`` (a physician as the educator, examinee or doctor: a human baseline),
``--model-role patient=bedside/human`` (a person as the patient) or ``grader=bedside/human`` (a
physician as the judge). For every generate call of that role, the eval process lists the call on a
page it serves on loopback (``http://127.0.0.1:<port>/``, printed once on stderr): which case, epoch,
role and turn it is, what that role sees (its prompt messages: the system prompt, the conversation so
far; nothing else: a call's render context and tag are never shown, and bedside never sends the render
context to this provider), and a reply box. A call whose protocol has a JSON reply (judges, a patient
answering ``{"utterance": ...}``) gets a form built from the protocol's JSON schema, with each field's
criterion beside it (the protocol's ``form``, :attr:`bedside.protocols.Protocol.form`), so the submitted
JSON is read by the same reader as a model's reply; a reply that does not fit the schema is refused at
the field, with the reason.

- **The session.** Several samples wait side by side (one tab per pending call). A role in an
  encounter sees its turn budget (the orchestrator's, in the sample store) and a notice on its last
  turn; the end of each conversation, of each case and of the run are shown as they happen ("session
  complete", with the log's path), through Inspect's hooks (:class:`HumanPageHooks`).
- **What a model in the role is not told** (``-M notices=false`` hides it): :func:`tell` — a
  supervisor's verdict on the person's own turn, an action the scenario could not carry out — shown at
  the person's next turn and recorded in the transcript (source ``bedside_human``). A correction that a
  model would read in its instructions is shown highlighted; a call asked again says why (the reply could
  not be read: the reader's reason; the supervisor discarded it).
- **One journal per run.** Every accepted reply is appended to the run's journal, keyed by the call
  (task, sample, epoch, protocol, attempt and the exact prompt) and the run (Inspect's ``task_id``,
  which ``inspect eval-retry`` keeps): by default ``<INSPECT_LOG_DIR or ./logs>/human/<task>-<task_id>.jsonl``.
  When the same call of the same run comes again (``inspect eval-retry`` re-running an interrupted
  sample whose other roles are deterministic) the journal's reply is returned at once, marked
  ``replayed`` in the output metadata and announced on the page, so a person never types an accepted
  reply twice. A reply of another run (a shared ``-M journal=PATH``) is reused only with
  ``-M replay=across_runs``, also announced.
- **The same address after a crash.** The page's port is kept in the journal's state
  (``<journal>.state``, beside drafts and working time), so a retried run serves the page where the
  old tab is still looking; the page and stderr name the exact ``inspect eval-retry LOG --log-dir DIR``
  that resumes the run beside its log.
- **Person-time** is working time, never waiting time: the page reports, every few seconds, that a
  call is shown on a visible page whose person has been active in the last minutes (:data:`IDLE` on the
  page); a call's ``human_seconds`` is the length of its working intervals (``human_intervals``, epoch
  seconds, in the output metadata; intervals of two calls never overlap on one page, and ``bedside
  estimate`` takes their union across a run). Work on a call before a crash is kept in the journal's
  state and counted when the retried run asks the call again. Usage is 0 model tokens.
- The page long-polls (``/api/pending?after=<version>`` returns as soon as anything changes, or after
  :data:`LONG_POLL_SECONDS`); typed text survives a reload (the browser's storage) and a crash (drafts
  in the journal's state); Ctrl+Enter submits.

Options (``-M`` on ``--model bedside/human``; for a role, its mapping: ``--model-role
'grader={model: bedside/human, model_args: {journal: PATH}}'``): ``port`` (default: the run's last
port, else a free one), ``journal`` (a journal file of your own), ``replay`` (``this_run`` or
``across_runs``), ``notices`` (``true``/``false``). Every role bound to ``bedside/human`` in one eval
shares one page: a role given no options joins the page the first one opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import parse_qs, urlsplit

import anyio
from inspect_ai.hooks import Hooks, RunEnd, SampleEnd, SampleEvent, SampleStart, TaskEnd, TaskStart, hooks
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage

from bedside.params import SetupError
from bedside.person_time import extend, length, union
from bedside.protocols import tag_of
from bedside.providers.api import HUMAN_OPTIONS

PAGE = Path(__file__).with_name("human_page.html")
HOST = "127.0.0.1"  # loopback only: the page shows clinical text
#: the longest the page's request for the pending calls is held when nothing changes
LONG_POLL_SECONDS = 20.0
#: how often a waiting generate call looks whether its reply came (the person's side is the slow one)
ANSWER_POLL_SECONDS = 0.05
#: how long the end of a run waits for an open page to learn that the session is complete
FAREWELL_SECONDS = 3.0
Replay = Literal["this_run", "across_runs"]
#: how each shared end reason reads on the page (a benchmark's own end reasons read as their words)
ENDINGS = {
    "clean_complete": "the conversation came to its end",
    "max_turns": "the session reached its turn limit",
    "hard_stop": "the supervisor stopped the session",
    "error": "a model call failed (a system failure)",
    "system_failure": "the supervisor's verdict could not be read (a system failure)",
}


# ---------------------------------------------------------------------------------------------
# a call, a journal


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
    """One reply journal — a JSONL file, one accepted reply per line, each naming its run — and its state
    beside it (``<name>.state``): the page's port, the drafts and the working intervals of the calls
    not answered yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state_path = state_path(path)
        self.entries = self._read()
        state = self._read_state()
        self.port: int | None = state.get("port")
        self.drafts: dict[str, str] = {str(k): str(v) for k, v in state.get("drafts", {}).items()}
        self.work: dict[str, list[list[float]]] = {
            str(k): [[float(a), float(b)] for a, b in v] for k, v in state.get("work", {}).items()
        }
        self.saved = 0.0

    def _read(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    found[entry["id"]] = entry
                except (ValueError, KeyError):  # a line cut short by a crash: the reply is asked again
                    print(f"bedside/human: {self.path} line {number} unreadable, ignored", file=sys.stderr)
        return found

    def _read_state(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state_path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}

    def find(self, call: Call, replay: Replay) -> dict[str, Any] | None:
        """The accepted reply of this call: of the same run, or of any run under ``across_runs``."""
        entry = self.entries.get(call.id)
        if entry is not None and (replay == "across_runs" or entry.get("run") == call.run):
            return entry
        return None

    def other_runs(self, run: str) -> int:
        """How many replies of other runs the journal holds."""
        return sum(e.get("run") != run for e in self.entries.values())

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        self.entries[call.id] = entry
        self.drafts.pop(call.id, None)
        self.work.pop(call.id, None)
        self.save()
        return entry

    def save(self, at_most_every: float = 0.0) -> None:
        """Writes the state (atomically); with ``at_most_every``, not again within that many seconds."""
        if at_most_every and time.time() - self.saved < at_most_every:
            return
        self.saved = time.time()
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"port": self.port, "drafts": self.drafts, "work": self.work}), encoding="utf-8")
        tmp.replace(self.state_path)


def state_path(journal: Path) -> Path:
    """The journal's state: JSON, named ``<journal name>.state`` (not ``.json``: a journal named like a log,
    with a timestamp first, would otherwise make its state look like an Inspect log to ``inspect view``)."""
    return journal.with_name(journal.stem + ".state")


def default_journal(task: str, run: str) -> Path:
    """``<INSPECT_LOG_DIR or ./logs>/human/<task>-<run>.jsonl`` (a local folder: an ``s3://`` log dir
    keeps its journals in ``./logs/human``). ``inspect eval-retry`` keeps the run's ``task_id``, so a
    retried run finds its journal from the same working folder."""
    logs = os.environ.get("INSPECT_LOG_DIR") or "logs"
    if "://" in logs:
        logs = "logs"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", task.split("/")[-1]) or "task"
    return Path(logs) / "human" / f"{name}-{run}.jsonl"


# ---------------------------------------------------------------------------------------------
# the session: runs and cases as Inspect's hooks report them


@dataclass
class Session:
    """What the page says about the runs and cases of this process (fed by :class:`HumanPageHooks`)."""

    #: (run, case, epoch) -> {task, case, epoch, state, detail}
    cases: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    #: run -> {task, log, resume, status}
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: calls answered from a journal (announced on the page)
    replays: list[str] = field(default_factory=list)
    #: where the journal is, what it holds, how to resume (on the page under "About this session")
    about: list[str] = field(default_factory=list)
    finished: bool = False

    def view(self) -> dict[str, Any]:
        return {
            "cases": list(self.cases.values()),
            "runs": list(self.runs.values()),
            "replays": self.replays[-12:],
            "about": self.about,
            "finished": self.finished,
        }


# ---------------------------------------------------------------------------------------------
# the desk: the page, the pending calls, the journals


class Desk:
    """The page, the pending calls and the journals of one eval process (one per port)."""

    def __init__(self, port: int) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.changes = 0  # counts the changes the page shows: the page waits for the next one
        self.started = f"{time.time():.6f}"  # a restarted eval's page never waits on the old count
        self.pending: dict[str, Call] = {}
        self.journals: dict[Path, Journal] = {}
        self.session = Session()
        #: (run, case, epoch, role) -> notices for that role's next call (:func:`tell`)
        self.told: dict[tuple[str, str, int, str], list[str]] = {}
        #: (run, case, epoch, role) -> the role's first system prompt (later additions are corrections)
        self.first_system: dict[tuple[str, str, int, str], str] = {}
        self.work: list[list[float]] = []  # the intervals of every reply accepted on this page
        self.accepted = 0
        self.served = ""  # the last version a page was sent
        self.polled = 0.0  # when a page last asked
        self.server = ThreadingHTTPServer((HOST, port), _handler(self))
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://{HOST}:{self.port}/"
        threading.Thread(target=self.server.serve_forever, name="bedside-human", daemon=True).start()

    # -- journals ---------------------------------------------------------------------------------
    def journal(self, path: Path, run: str, log: str | None, replay: Replay) -> Journal:
        """The journal at ``path`` (read once), with this page's port recorded; the first time a run
        uses it, stderr and the page say where it is, what it replays and how to resume the run."""
        with self.lock:
            key = path.resolve()
            journal = self.journals.get(key)
            if journal is None:
                journal = self.journals[key] = Journal(path)
                journal.port = self.port
                journal.save()
            if run not in self.session.runs:
                self._run_started(journal, run, log, replay)
            return journal

    def _run_started(self, journal: Journal, run: str, log: str | None, replay: Replay) -> None:
        resume = f"inspect eval-retry {log} --log-dir {Path(log).parent}" if log else None
        self.session.runs[run] = {"run": run, "log": log, "resume": resume, "status": "running"}
        said = [f"journal: {journal.path}"]
        others = journal.other_runs(run)
        if others and replay == "across_runs":
            said.append(f"it holds {others} replies of other runs, reused where a call matches (-M replay=across_runs)")
        elif others:
            said.append(f"it holds {others} replies of other runs, not reused (-M replay=across_runs reuses them)")
        if resume:
            said.append(f"if the eval stops, resume it with: {resume} (this page keeps its address)")
        for line in said:
            print(f"bedside/human: {line}", file=sys.stderr, flush=True)
        self.session.about.extend(said)
        self._bump()

    # -- the page's requests ----------------------------------------------------------------------
    def _bump(self) -> None:
        """What the page shows changed (the lock is held): wake every page waiting for a change."""
        self.changes += 1
        self.changed.notify_all()

    @property
    def version(self) -> str:
        """Names what the page shows: this desk's start and its count of changes."""
        return f"{self.started}-{self.changes}"

    def listing(self, after: str | None = None, wait: float = LONG_POLL_SECONDS) -> dict[str, Any]:
        """The pending calls and the session; with ``after`` (the ``version`` the page last saw), held
        until they change or ``wait`` seconds pass."""
        with self.lock:
            self.polled = time.time()
            if after is not None:
                self.changed.wait_for(lambda: self.version != after, timeout=wait)
            calls = sorted(self.pending.values(), key=lambda c: c.opened)
            drafts = {c.id: c.journal.drafts[c.id] for c in calls if c.journal and c.id in c.journal.drafts}
            self.served = self.version
            return {
                "pending": [c.view() for c in calls],
                "drafts": drafts,
                "answered": self.accepted,
                "work_seconds": round(length(self.work + [i for c in calls for i in c.work]), 1),
                "session": self.session.view(),
                "version": self.version,
            }

    def submit(self, call_id: str, reply: str) -> tuple[HTTPStatus, dict[str, Any]]:
        with self.lock:
            call = self.pending.get(call_id)
            if call is None:
                return HTTPStatus.NOT_FOUND, {"message": "this call is no longer waiting (answered in another tab?)"}
            if not reply.strip():
                return HTTPStatus.BAD_REQUEST, {"message": "the reply is empty", "errors": {"": "the reply is empty"}}
            if call.schema is not None:
                problems = reply_problems(reply, call.schema, call.form or {})
                if problems:
                    fields = [p for p in problems if p]
                    message = (
                        f"{len(fields)} field(s) to correct, marked in red: {', '.join(fields)}"
                        if fields
                        else problems[""]
                    )
                    return HTTPStatus.BAD_REQUEST, {"message": message, "errors": problems}
            now = time.time()
            if call.work:
                extend(call.work, now)
            else:  # answered without the page's reports (a client of the API): from arrival to reply
                call.work = [[call.opened, now]]
            assert call.journal is not None
            call.journal.record(call, reply)
            self.work += call.work
            self.accepted += 1
            call.reply = reply
            del self.pending[call_id]
            self._bump()
        call.done.set()
        return HTTPStatus.OK, {"message": "accepted"}

    def save_draft(self, call_id: str, text: str) -> None:
        with self.lock:
            call = self.pending.get(call_id)
            if call is not None and call.journal is not None:
                call.journal.drafts[call_id] = text
                call.journal.save()

    def seen(self, call_id: str) -> None:
        """The page reports that the person is working on this call now."""
        with self.lock:
            call = self.pending.get(call_id)
            if call is None or call.journal is None:
                return
            extend(call.work, time.time())
            call.journal.work[call_id] = call.work
            call.journal.save(at_most_every=2.0)

    # -- the model's side -------------------------------------------------------------------------
    async def answer(
        self, call: Call, journal: Journal, replay: Replay, notices: bool
    ) -> tuple[str, list[list[float]], bool]:
        """(reply, the person's working intervals, replayed from the journal). A reply of another run is
        replayed only under ``across_runs``; ``notices``: what :func:`tell` said is shown with the call."""
        with self.lock:
            known = journal.find(call, replay)
            if known is None:
                if call.id not in self.pending:
                    call.journal = journal
                    call.work = [list(i) for i in journal.work.get(call.id, [])]  # work before a crash
                    told = self.told.pop((call.run, call.case, call.epoch, call.role), [])
                    call.notices = told if notices else []
                    self.pending[call.id] = call
                    self._bump()
                call = self.pending[call.id]
            else:
                self._replayed(call, known)
        if known is not None:
            intervals = known.get("intervals") or []
            return str(known["reply"]), [[float(a), float(b)] for a, b in intervals], True
        while not call.done.is_set():
            await anyio.sleep(ANSWER_POLL_SECONDS)
        return str(call.reply), union(call.work), False

    def _replayed(self, call: Call, entry: dict[str, Any]) -> None:
        whose = "this run" if entry.get("run") == call.run else f"another run ({entry.get('run')})"
        what = f"case {call.case}: {call.role} turn {call.turn} answered from the journal ({whose})"
        print(f"bedside/human: {what}", file=sys.stderr, flush=True)
        self.session.replays.append(what)
        self._bump()

    def tell(self, key: tuple[str, str, int, str], text: str) -> None:
        with self.lock:
            self.told.setdefault(key, []).append(text)

    def added_instructions(self, key: tuple[str, str, int, str], system: str | None) -> str | None:
        """What the role's system prompt holds beyond its first one (a correction appended for this turn)."""
        if system is None:
            return None
        with self.lock:
            first = self.first_system.setdefault(key, system)
        if system != first and system.startswith(first):
            return system[len(first) :].strip() or None
        return None

    # -- the session (Inspect's hooks) ------------------------------------------------------------
    def case_state(self, run: str, task: str, case: str, epoch: int, state: str, detail: str = "") -> None:
        with self.lock:
            entry = self.session.cases.setdefault(
                (run, case, epoch), {"task": task, "case": case, "epoch": epoch, "state": "", "detail": ""}
            )
            entry.update(state=state, detail=detail or entry["detail"])
            self._bump()

    def run_ended(self, run: str, log: str | None, status: str) -> None:
        with self.lock:
            entry = self.session.runs.setdefault(run, {"run": run, "resume": None})
            entry.update(log=log, status=status, resume=None if status == "success" else entry.get("resume"))
            for key in [k for k in self.told if k[0] == run]:
                del self.told[key]
            self._bump()

    def finish(self) -> None:
        with self.lock:
            self.session.finished = True
            self._bump()

    def restart(self) -> None:
        """A new run in this process (in-process evals): the page leaves its complete state."""
        with self.lock:
            if self.session.finished:
                self.session = Session()
                self._bump()

    async def farewell(self) -> None:
        """Waits (at most :data:`FAREWELL_SECONDS`) until a page that was open lately has been sent the
        final state, so that it shows the session as complete rather than as stopped."""
        deadline = time.time() + FAREWELL_SECONDS
        while time.time() < deadline and time.time() - self.polled < LONG_POLL_SECONDS + 5:
            with self.lock:
                if self.served == self.version:
                    return
            await anyio.sleep(0.05)


def reply_problems(reply: str, schema: dict[str, Any], form: dict[str, Any]) -> dict[str, str]:
    """Why a JSON reply does not fit its schema, per field (path: keys and indices joined by ``/``; ``""``
    for the reply as a whole), in words a person reads beside the field. The protocol's own reader reads
    it afterwards, as a model's reply."""
    from jsonschema import Draft7Validator

    try:
        value = json.loads(reply)
    except ValueError as ex:
        return {"": f"not JSON: {ex}"}
    problems: dict[str, str] = {}
    for error in Draft7Validator(schema).iter_errors(value):
        path = "/".join(str(p) for p in error.absolute_path)
        if error.validator == "required":
            for key in error.validator_value:
                if isinstance(error.instance, dict) and key not in error.instance:
                    problems["/".join(filter(None, [path, str(key)]))] = "an answer is needed here"
        elif error.validator == "enum":
            problems[path] = "choose one of: " + ", ".join(str(v) for v in error.validator_value)
        elif error.validator in ("minimum", "maximum"):
            low, high = error.schema.get("minimum", "…"), error.schema.get("maximum", "…")
            problems[path] = f"must be between {low} and {high}"
        elif error.validator == "type":
            problems[path] = f"expected {error.validator_value}"
        else:
            problems[path] = error.message
    for path, hint in form.items():
        rows = hint.get("rows")
        if rows is None:
            continue
        node: Any = value
        for key in path.split("/"):
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, list) or len(node) != len(rows):
            problems.setdefault(path, f"{len(rows)} answers expected, one per question")
    return problems


# ---------------------------------------------------------------------------------------------
# the process's one desk and session


_desk: Desk | None = None
_desk_lock = threading.Lock()
#: the options a human role of this process named (every role's model is built before any call)
_asked: dict[str, Any] = {}
#: from the hooks: eval_id -> (run = the task's task_id, task name); sample uuid -> (run, task, case, epoch)
_evals: dict[str, tuple[str, str]] = {}
_samples: dict[str, tuple[str, str, str, int]] = {}


def saved_port(journal: Path) -> int | None:
    """The port of the page the journal's run last used (from its state), if any."""
    try:
        port = json.loads(state_path(journal).read_text(encoding="utf-8")).get("port")
    except (OSError, ValueError, AttributeError):
        return None
    return int(port) if port else None


def desk(port: int | None, preferred: int | None) -> Desk:
    """The process's one desk (started on first use), shared by every role bound to ``bedside/human``:
    one page lists all their calls. It listens on ``port`` (an option), else on ``preferred`` (the run's
    journal's last port) when that is free, else on a free port. A role that names another port than the
    running desk's is refused (two pages would split a person's work)."""
    global _desk
    with _desk_lock:
        if _desk is None:
            wanted = port or _asked.get("port") or preferred or 0
            try:
                made = Desk(wanted)
            except OSError as ex:
                if port or _asked.get("port"):
                    raise RuntimeError(f"bedside/human: cannot serve the page on port {wanted}: {ex}") from None
                made = Desk(0)
                print(
                    f"bedside/human: port {wanted} of the last run is taken; the page moved to {made.url}",
                    file=sys.stderr,
                )
            for run, task, case, epoch in list(_samples.values()):  # the samples already running
                made.session.cases[(run, case, epoch)] = {
                    "task": task,
                    "case": case,
                    "epoch": epoch,
                    "state": "running",
                    "detail": "",
                }
            _desk = made
            print(f"bedside/human: replies are typed at {made.url}", file=sys.stderr, flush=True)
        elif port and port != _desk.port:
            raise ValueError(
                f"bedside/human: one page per eval process, already at {_desk.url}; a role asked for "
                f"port={port}: give the same -M options to every human role"
            )
        return _desk


def tell(role: str, text: str) -> None:
    """Tells the person playing ``role`` in the running sample ``text`` at their next turn, if a person
    plays it in this process (``bedside/human``): what the run records about their own turn that a model
    in the role is not told (a supervisor's verdict on it, an action the scenario could not carry out).
    Does nothing otherwise."""
    if _desk is None:
        return
    where = sample_key()
    if where is not None:
        run, _task, case, epoch = where
        _desk.tell((run, case, epoch, role), text)


#: a run outside an eval: a log being re-judged (``bedside rescore``; :func:`scoring`): run, journal, log
_scoring: dict[str, Any] = {}
#: a run Inspect does not name (``inspect score`` without bedside): this process's own, never another's
_PROCESS_RUN = f"process-{os.getpid()}-{int(time.time())}"


def sample_key() -> tuple[str, str, str, int] | None:
    """(run, task, case, epoch) of the running sample: in an eval, the run is the task's ``task_id`` (from
    the hooks), else the log file's name; while a finished log is re-judged, the case comes from the
    sample's transcript and the run is the rescored log's (:func:`scoring`), else this process's."""
    from inspect_ai.log import transcript

    from bedside.compat import sample_active, sample_state

    active, state = sample_active(), sample_state()
    if state is None:
        init = next((e for e in transcript().events if e.event == "sample_init"), None)
        if init is None:
            return None
        return _scoring.get("run", _PROCESS_RUN), _scoring.get("task", ""), str(init.sample.id), 1
    known = _samples.get(str(getattr(active, "sample_uuid", "")))
    if known is not None:
        return known
    run = Path(active.log_location).stem if active is not None and active.log_location else _PROCESS_RUN
    return run, active.task if active is not None else "", str(state.sample_id), int(state.epoch)


@contextmanager
def scoring(log: Path, task: str) -> Iterator[None]:
    """A finished log re-judged by a person (``bedside rescore --grader bedside/human``) is a run of its
    own: named by the log it writes, with its journal beside it (``<out>/human/judged-<log>.jsonl``, unless
    ``-M journal``), so a re-judging stopped half-way and started again resumes from its journal, and two
    physicians writing to two folders never share a reply. The page shows the log once it is written."""
    journal = log.parent / "human" / f"judged-{log.stem}.jsonl"  # not named like a log: inspect view skips it
    _scoring.update(run=str(log.resolve()), journal=journal, task=task, log=log)
    try:
        yield
        if _desk is not None:
            _desk.run_ended(str(log.resolve()), str(log), "success")
    finally:
        _scoring.clear()


def finish() -> None:
    """The end of a re-judging session (``bedside rescore``): the page says the session is complete and
    waits (a few seconds at most) until an open page has seen it."""
    if _desk is not None and _desk.session.runs:
        _desk.finish()
        anyio.run(_desk.farewell)


@hooks(name="bedside_human_page", description="bedside/human's page: the runs, cases and end of a session")
class HumanPageHooks(Hooks):
    """Tells ``bedside/human``'s page what happens around its calls: which run a sample belongs to, the
    end of each conversation (the orchestrator's ``encounter`` event), of each case and of the run. Only
    in a process that built a ``bedside/human`` model."""

    def enabled(self) -> bool:
        return bool(_asked.get("built"))

    async def on_task_start(self, data: TaskStart) -> None:
        _evals[data.eval_id] = (data.spec.task_id, data.spec.task)
        if _desk is not None:
            _desk.restart()

    async def on_sample_start(self, data: SampleStart) -> None:
        run, task = _evals.get(data.eval_id, (data.eval_id, ""))
        summary = data.summary
        _samples[data.sample_id] = (run, task, str(summary.id), int(summary.epoch))
        if _desk is not None:
            _desk.case_state(run, task, str(summary.id), int(summary.epoch), "running")

    async def on_sample_event(self, data: SampleEvent) -> None:
        event = data.event
        if _desk is None or event.event != "info" or getattr(event, "source", None) != "encounter":
            return
        info = event.data if isinstance(event.data, dict) else {}
        known = _samples.get(data.sample_id)
        if known is not None and "end_reason" in info:
            run, task, case, epoch = known
            reason = str(info["end_reason"])
            said = ENDINGS.get(reason, reason.replace("_", " "))
            _desk.case_state(run, task, case, epoch, "ended", f"{said} ({reason}, {info.get('turns')} turns)")

    async def on_sample_end(self, data: SampleEnd) -> None:
        known = _samples.pop(data.sample_id, None)
        if _desk is not None and known is not None:
            run, task, case, epoch = known
            sample = data.sample
            detail = f"error: {sample.error.message}" if sample.error else ("scored" if sample.scores else "")
            _desk.case_state(run, task, case, epoch, "complete", detail)

    async def on_task_end(self, data: TaskEnd) -> None:
        run, _ = _evals.pop(data.eval_id, (data.eval_id, ""))
        if _desk is not None:
            _desk.run_ended(run, data.log.location, data.log.status)

    async def on_run_end(self, data: RunEnd) -> None:
        if _desk is not None and _desk.session.runs:  # a run in which a person answered
            _desk.finish()
            await _desk.farewell()


# ---------------------------------------------------------------------------------------------
# the engine


def call_id(task: str, case: str, epoch: int, protocol: str, attempt: int, messages: list[dict[str, str]]) -> str:
    blob = json.dumps([task, case, epoch, protocol, attempt, messages], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def visible_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """What the role sees: each message's role and text (never its metadata, which holds the tag)."""
    return [{"role": m.role, "text": m.text} for m in messages]


def turn_budget(role: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(the role's turn budget, the other roles) in the running encounter (the orchestrator's store), or
    (None, []) outside one. ``of`` counts the role's turns at most: the history's cap shared by every role
    in turn order, or the role's own cap, whichever comes first."""
    from inspect_ai.util import store_as

    from bedside.solvers.orchestrator import EncounterProgress

    try:
        progress = store_as(EncounterProgress)
    except Exception:  # outside a sample
        return None, []
    if role not in progress.roles or not progress.max_turns:
        return None, []
    others = [r for r in progress.roles if r != role]
    held = len(progress.turns)
    mine = sum(t.get("role") == role for t in progress.turns)
    shared_left = -(-(progress.max_turns - held) // len(progress.roles))  # this turn and the rounds after it
    limit = progress.role_limits.get(role)
    if limit is not None and limit - mine <= shared_left:
        left = limit - mine
        meaning = f"you have at most {limit} turns in this session (only your own turns count)"
    else:
        left = shared_left
        speakers = " and the ".join(others)
        meaning = (
            f"the session stops after {progress.max_turns} turns in all: every message counts, yours and the "
            f"{speakers}'s"
        )
    if progress.min_turns:
        meaning += f"; it may end earlier, once at least {progress.min_turns} turns have been held"
    budget = {"turn": mine + 1, "of": mine + max(left, 1), "last": left <= 1, "meaning": meaning}
    return budget, others


def asked_again(protocol: str, role: str) -> dict[str, str] | None:
    """Why this call repeats the role's previous one, from the transcript since the person's last reply
    to this protocol: the reply could not be read (the reader's reason), or the supervisor discarded it."""
    from inspect_ai.log import transcript

    for event in reversed(transcript().events):
        if event.event == "model" and getattr(event, "pending", False):
            continue  # this very call
        if event.event == "model" and getattr(event, "model", "") == "bedside/human":
            tag = tag_of(list(event.input))
            if tag is not None and tag.name == protocol:
                return None
        if event.event != "info" or not isinstance(event.data, dict):
            continue
        data = event.data
        if event.source == "parse" and data.get("protocol") == protocol:
            return {"kind": "unreadable", "reason": str(data.get("error")), "reply": str(data.get("unparsed_reply"))}
        if event.source == "discard" and data.get("role") == role:
            return {
                "kind": "discarded",
                "reason": "the supervisor did not accept it; write this turn again (its correction is in your "
                "instructions)",
                "reply": str(data.get("discarded")),
            }
    return None


class HumanEngine:
    """See the module docstring."""

    reads_render_context = False  # the render context (case facts, answer material) never reaches the page
    context_window = 0

    def __init__(
        self,
        port: int | str | None = None,
        journal: str | None = None,
        replay: str = "this_run",
        notices: bool | str = True,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise SetupError(
                f"bedside/human: unknown option(s) {', '.join(sorted(unknown))}; it takes {', '.join(HUMAN_OPTIONS)}"
            )
        if replay not in get_args(Replay):
            raise SetupError(f"bedside/human: replay={replay!r}: use {' or '.join(get_args(Replay))}")
        self.port = int(port) if port else None
        self.journal = Path(journal) if journal else None
        self.replay: Replay = "across_runs" if replay == "across_runs" else "this_run"
        self.notices = str(notices).strip().lower() not in ("false", "0", "no", "off")
        self.instance = os.urandom(6).hex()
        with _desk_lock:
            _asked["built"] = True
            if self.port:
                _asked.setdefault("port", self.port)
            if self.journal:
                _asked.setdefault("journal", self.journal)

    def identity(self) -> str:
        """Never the same twice: Inspect's cache keys a reply on the model's identity, and a reply one
        person typed must never be served to another run (a run's own replies come from its journal)."""
        return f"human/{self.instance}"

    async def generate(self, input: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        from inspect_ai.log import transcript

        from bedside.compat import awaiting_human, sample_active

        tag = tag_of(input)
        protocol = tag.name if tag else "untagged"
        schema = tag.schema if tag else None
        if schema is None and config.response_schema is not None:
            schema = config.response_schema.json_schema.model_dump(exclude_none=True)
        active = sample_active()
        run, task, case, epoch = sample_key() or ("run", "", "?", 1)
        role = protocol.split(".", 1)[-1]
        shown = visible_messages(input)
        attempt = int(config.seed or 0)
        budget, others = turn_budget(role)
        journal_path = self.journal or _asked.get("journal") or _scoring.get("journal") or default_journal(task, run)
        previous = asked_again(protocol, role)
        the_desk = desk(self.port, saved_port(journal_path) if _desk is None else None)
        log = active.log_location if active is not None else None
        journal = the_desk.journal(journal_path, run, log, self.replay)
        system = next((m["text"] for m in shown if m["role"] == "system"), None)
        call = Call(
            id=call_id(task, case, epoch, protocol, attempt, shown),
            run=run,
            task=task,
            case=case,
            epoch=epoch,
            protocol=protocol,
            role=role,
            turn=1 + sum(m.role == "assistant" for m in input),
            attempt=attempt,
            messages=shown,
            schema=schema,
            form=tag.form if tag else None,
            budget=budget,
            counterpart=others,
            added=the_desk.added_instructions((run, case, epoch, role), system) if self.notices else None,
            previous=previous,
        )
        with awaiting_human("question", protocol):
            reply, intervals, replayed = await the_desk.answer(call, journal, self.replay, self.notices)
        if call.notices:
            told: list[Any] = list(call.notices)
            transcript().info({"role": role, "shown": told}, source="bedside_human")
        output = ModelOutput.from_content(model="bedside/human", content=reply, stop_reason="stop")
        output.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
        output.metadata = {
            "human": True,
            "human_seconds": round(length(intervals), 3),
            "human_intervals": [[round(a, 2), round(b, 2)] for a, b in union(intervals)],
            "replayed": replayed,
        }
        return output


def _handler(desk: Desk) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the eval's display is the console
            return

        def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, value: Any) -> None:
            self._send(status, json.dumps(value).encode(), "application/json")

        def do_GET(self) -> None:
            if self.path in ("/", "/index.html"):
                self._send(HTTPStatus.OK, PAGE.read_bytes(), "text/html; charset=utf-8")
            elif urlsplit(self.path).path == "/api/pending":
                after = parse_qs(urlsplit(self.path).query).get("after", [None])[0]
                self._json(HTTPStatus.OK, desk.listing(after))
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                call_id, text = str(body["id"]), str(body.get("text", ""))
            except (ValueError, KeyError):
                self._json(HTTPStatus.BAD_REQUEST, {"error": "expected {id, text}"})
                return
            if self.path == "/api/reply":
                status, answer = desk.submit(call_id, text)
                self._json(status, {"ok": status == HTTPStatus.OK, **answer})
            elif self.path == "/api/draft":
                desk.save_draft(call_id, text)
                self._json(HTTPStatus.OK, {"ok": True})
            elif self.path == "/api/seen":
                desk.seen(call_id)
                self._json(HTTPStatus.OK, {"ok": True})
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    return Handler
