"""``bedside/human``'s page (:mod:`bedside.providers.human` is the model provider): the page's session
(:class:`Session`: runs, cases, replays, the end) and the desk that serves the page on loopback and takes its
replies (:class:`Desk`), with the words of a refused reply (:func:`reply_problems`). A pending call and a run's
journal are :mod:`bedside.providers.human_journal`'s."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio

from bedside.person_page import shared_file
from bedside.person_time import extend, length, union
from bedside.providers.human_journal import Call, Journal, Replay, case_key, remote_journal_note

PAGE = Path(__file__).with_name("human_page.html")
HOST = "127.0.0.1"  # loopback only: the page shows clinical text
#: the longest the page's request for the pending calls is held when nothing changes
LONG_POLL_SECONDS = 20.0
#: how often a waiting generate call looks whether its reply came (the person's side is the slow one)
ANSWER_POLL_SECONDS = 0.05
#: how long the end of a run waits for an open page to learn that the session is complete
FAREWELL_SECONDS = 3.0
#: ``bedside/human``'s options (``-M``, or a role's ``model_args``)
OPTIONS = ("port", "journal", "replay", "notices", "steps")


# ---------------------------------------------------------------------------------------------
# the session: runs and cases as Inspect's hooks report them


@dataclass
class Session:
    """What the page says about the runs and cases of this process (fed by :class:`HumanPageHooks`)."""

    #: (run, case, epoch) -> {key, task, case, epoch, state (running, ended, complete), ending (the
    #: encounter's end reason, in words), detail (the outcome), order (when the case was first seen), tracked
    #: (an eval's hooks report its state; a case known only from its calls, e.g. a log re-judged, is not)}
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
            "cases": sorted(self.cases.values(), key=lambda c: c["order"]),
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
        #: run -> its journal (what the page counts for the run is read from it)
        self.run_journals: dict[str, Journal] = {}
        self.session = Session()
        #: (run, case, epoch, role) -> notices for that role's next call (:func:`tell`)
        self.told: dict[tuple[str, str, int, str], list[str]] = {}
        #: (run, case, epoch, role) -> the role's first system prompt (later additions are corrections)
        self.first_system: dict[tuple[str, str, int, str], str] = {}
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
            self.run_journals.setdefault(run, journal)
            if run not in self.session.runs:
                self._run_started(journal, run, log, replay)
            return journal

    def _run_started(self, journal: Journal, run: str, log: str | None, replay: Replay) -> None:
        resume = resume_command(log)
        self.session.runs[run] = {"run": run, "log": log, "resume": resume, "status": "running"}
        # the cases of this run the journal knows: their order, and those that ended before a crash
        running = set(self.session.cases)  # the cases this process runs now (a retried run re-runs these)
        for (of, case, epoch), ended in journal.cases.items():
            if of == run and ended.get("state") == "complete" and (run, case, epoch) not in running:
                shown = self._case(run, str(ended.get("task", "")), case, epoch)
                shown.update(
                    state="complete", ending=ended.get("ending", ""), detail=ended.get("detail", ""), tracked=True
                )
        for entry in journal.of_runs([run]):
            self._case(run, str(entry.get("task", "")), str(entry["case"]), int(entry["epoch"]), entry.get("at"))
        said = [f"journal: {journal.path}"]
        remote = remote_journal_note(log, journal.path)
        if remote:
            said.append(remote)
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
            calls = sorted(self.pending.values(), key=self._order)
            drafts = {c.id: c.journal.drafts[c.id] for c in calls if c.journal and c.id in c.journal.drafts}
            sent = [e for journal in set(self.run_journals.values()) for e in journal.of_runs(self.session.runs)]
            self.served = self.version
            return {
                "pending": [c.view() for c in calls],
                "drafts": drafts,
                "answered": len(sent),
                "work_seconds": round(
                    length([i for e in sent for i in e.get("intervals") or []] + [i for c in calls for i in c.work]), 1
                ),
                "session": self.session.view(),
                "version": self.version,
            }

    def _order(self, call: Call) -> tuple[float, float]:
        """Calls in the order of their cases (as first seen: a case keeps its place), then as they came."""
        case = self.session.cases.get((call.run, call.case, call.epoch))
        return (case["order"] if case else call.opened, call.opened)

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
                    fields = list(dict.fromkeys(field_name(p, call.schema, call.form or {}) for p in problems if p))
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
                    self._case(call.run, call.task, call.case, call.epoch)
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
    def _case(self, run: str, task: str, case: str, epoch: int, seen: float | None = None) -> dict[str, Any]:
        """The page's line of a case (the lock is held): made when first seen, where it keeps its place."""
        entry = self.session.cases.get((run, case, epoch))
        if entry is None:
            entry = self.session.cases[(run, case, epoch)] = {
                "key": case_key(run, case, epoch),
                "task": task,
                "case": case,
                "epoch": epoch,
                "state": "running",
                "ending": "",
                "detail": "",
                "order": seen or time.time(),
                "tracked": False,
            }
        elif seen is not None:
            entry["order"] = min(entry["order"], seen)
        return entry

    def case_state(self, run: str, task: str, case: str, epoch: int, state: str, detail: str = "") -> None:
        """A case is ``running``, has ``ended`` (``detail``: the encounter's end reason, in words) or is
        ``complete`` (``detail``: scored, or its error); a complete case of a run with a journal gets its line
        there."""
        with self.lock:
            entry = self._case(run, task, case, epoch)
            entry["tracked"] = True
            if state == "ended":
                entry.update(state=state, ending=detail)
            else:
                entry.update(state=state, detail=detail or entry["detail"])
            journal = self.run_journals.get(run)
            if state == "complete" and journal is not None:
                journal.record_case(run, {k: entry[k] for k in ("task", "case", "epoch", "state", "ending", "detail")})
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


def resume_command(log: str | None) -> str | None:
    """The command that resumes the run of ``log`` beside it, from any folder (absolute paths)."""
    if not log:
        return None
    if "://" in log:
        return f"inspect eval-retry {log} --log-dir {log.rsplit('/', 1)[0]}"
    where = Path(log).absolute()
    return f"inspect eval-retry {where} --log-dir {where.parent}"


def field_name(path: str, schema: dict[str, Any], form: dict[str, Any]) -> str:
    """A field as the page shows it to the person: its criterion's id (``Q6.2``), a row by its own name
    (``q6``, ``turn 5``: the form's ``row_names``, else ``row 3``), with the field's own key only where the
    criterion or row asks for more than one answer (``naturalness score``)."""
    parts = path.split("/")
    named: list[str] = []
    node: dict[str, Any] = schema
    keys: list[str] = []
    for part in parts:
        node = _plain(node)
        if part.isdigit() and node.get("type") == "array":
            hint = form.get("/".join(keys), {})
            names = hint.get("row_names") or []
            index = int(part)
            named = [names[index] if index < len(names) else f"row {index + 1}"]
            node = node.get("items", {})
            continue
        properties = node.get("properties", {})
        required = [k for k in node.get("required", []) if not form.get("/".join([*keys, k]), {}).get("row_label")]
        if not named or (len(required) > 1 and part != required[0]):
            named.append(part)
        keys.append(part)
        node = properties.get(part, {})
    return " ".join(named)


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """A field's schema, a nullable one (``anyOf`` with null) as its value's; ``$ref`` is not used by replies."""
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    return options[0] if options else schema


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
            elif shared := shared_file(urlsplit(self.path).path.lstrip("/")):
                self._send(HTTPStatus.OK, *shared)
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
