"""``bedside/human``: a person plays the role this model is bound to, in their browser.

``--model bedside/human`` (a physician as the educator, examinee or doctor: a human baseline),
``--model-role patient=bedside/human`` (a person as the patient) or ``grader=bedside/human`` (a
physician as the judge). For every generate call of that role, the eval process lists the call on a
page it serves on loopback (``http://127.0.0.1:<port>/``, printed once on stderr): which case, epoch,
role and turn it is, what that role sees (its prompt messages: the system prompt, the conversation so
far; nothing else: a call's render context and tag are never shown, and bedside never sends the render
context to this provider), and a reply box. A call whose protocol has a JSON reply (judges, a patient
answering ``{"utterance": ...}``) gets a form built from the protocol's JSON schema, so the submitted
JSON is read by the same reader as a model's reply.

- Several samples wait side by side (one tab per pending call, with its case id).
- Typed text survives a reload (the browser's localStorage) and a crash of the eval (drafts are also
  saved beside the journal); Ctrl+Enter submits.
- Every accepted reply is appended to a journal (``-M journal=PATH``, default
  ``logs/human/replies.jsonl``), keyed by the call (task, sample, epoch, protocol, attempt and the exact
  prompt). When the same call comes again (``inspect eval-retry`` re-running an interrupted sample
  whose other roles are deterministic) the journal's reply is returned at once, marked
  ``replayed`` in the output metadata, so a person never types an accepted reply twice. A different
  prompt (e.g. a sampled patient model's new wording) is a new call.
- The page long-polls (``/api/pending?after=<version>`` returns as soon as the pending calls change,
  or after :data:`LONG_POLL_SECONDS`), so the next turn appears the moment the eval asks for it.
- Usage is honest: 0 model tokens; the person's seconds on the call are ``human_seconds`` in the
  output's metadata (and the wait counts as Inspect's waiting time, not working time).

Options (``-M``): ``port`` (default: a free port; pass a fixed one to keep the address across
runs), ``journal`` (the reply journal's path). Every role bound to ``bedside/human`` in one eval shares
one page: a role given no options joins the page the first one opened.
"""

from __future__ import annotations

import hashlib
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
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage

from bedside.protocols import tag_of

PAGE = Path(__file__).with_name("human_page.html")
DEFAULT_JOURNAL = Path("logs") / "human" / "replies.jsonl"
HOST = "127.0.0.1"  # loopback only: the page shows clinical text
#: the longest the page's request for the pending calls is held when nothing changes
LONG_POLL_SECONDS = 20.0
#: how often a waiting generate call looks whether its reply came (the person's side is the slow one)
ANSWER_POLL_SECONDS = 0.05


@dataclass
class Call:
    """One pending generate call as the page shows it."""

    id: str
    task: str
    case: str
    epoch: int
    protocol: str
    role: str
    turn: int
    attempt: int
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None
    opened: float = field(default_factory=time.time)
    reply: str | None = None
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
            "waiting_seconds": round(time.time() - self.opened, 1),
        }


class Desk:
    """The page, the pending calls and the journal of one eval process (one per port)."""

    def __init__(self, port: int, journal: Path) -> None:
        self.journal = journal
        self.drafts_path = journal.with_suffix(".drafts.json")
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.changes = 0  # counts the changes of ``pending``: the page waits for the next one
        self.started = f"{time.time():.6f}"  # a restarted eval's page never waits on the old count
        self.pending: dict[str, Call] = {}
        self.answered = self._read_journal()
        self.drafts: dict[str, str] = self._read_drafts()
        self.server = ThreadingHTTPServer((HOST, port), _handler(self))
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://{HOST}:{self.port}/"
        threading.Thread(target=self.server.serve_forever, name="bedside-human", daemon=True).start()
        print(f"bedside/human: replies are typed at {self.url} (journal: {journal})", file=sys.stderr, flush=True)

    # -- journal ----------------------------------------------------------------------------------
    def _read_journal(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        if self.journal.exists():
            for number, line in enumerate(self.journal.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    found[entry["id"]] = entry
                except (ValueError, KeyError):  # a line cut short by a crash: the reply is asked again
                    print(f"bedside/human: {self.journal} line {number} unreadable, ignored", file=sys.stderr)
        return found

    def _read_drafts(self) -> dict[str, str]:
        try:
            return dict(json.loads(self.drafts_path.read_text()))
        except (OSError, ValueError):
            return {}

    def record(self, call: Call, reply: str, seconds: float) -> None:
        entry = {
            "id": call.id,
            "task": call.task,
            "case": call.case,
            "epoch": call.epoch,
            "protocol": call.protocol,
            "attempt": call.attempt,
            "reply": reply,
            "seconds": round(seconds, 3),
            "at": time.time(),
        }
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with self.journal.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        self.answered[call.id] = entry
        self.drafts.pop(call.id, None)
        self._write_drafts()

    def _write_drafts(self) -> None:
        self.drafts_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.drafts_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.drafts))
        tmp.replace(self.drafts_path)

    # -- the page's requests ----------------------------------------------------------------------
    def _bump(self) -> None:
        """``pending`` changed (the lock is held): wake every page waiting for a change."""
        self.changes += 1
        self.changed.notify_all()

    @property
    def version(self) -> str:
        """Names the current pending calls: this desk's start and its count of changes."""
        return f"{self.started}-{self.changes}"

    def listing(self, after: str | None = None, wait: float = LONG_POLL_SECONDS) -> dict[str, Any]:
        """The pending calls; with ``after`` (the ``version`` the page last saw), held until they change
        or ``wait`` seconds pass."""
        with self.lock:
            if after is not None:
                self.changed.wait_for(lambda: self.version != after, timeout=wait)
            calls = sorted(self.pending.values(), key=lambda c: c.opened)
            return {
                "pending": [c.view() for c in calls],
                "drafts": {c.id: self.drafts[c.id] for c in calls if c.id in self.drafts},
                "answered": len(self.answered),
                "version": self.version,
            }

    def submit(self, call_id: str, reply: str) -> tuple[HTTPStatus, str]:
        with self.lock:
            call = self.pending.get(call_id)
            if call is None:
                return HTTPStatus.NOT_FOUND, "this call is no longer waiting (answered in another tab?)"
            if not reply.strip():
                return HTTPStatus.BAD_REQUEST, "the reply is empty"
            if call.schema is not None:
                problem = schema_problem(reply, call.schema)
                if problem:
                    return HTTPStatus.BAD_REQUEST, problem
            self.record(call, reply, time.time() - call.opened)
            call.reply = reply
            del self.pending[call_id]
            self._bump()
        call.done.set()
        return HTTPStatus.OK, "accepted"

    def save_draft(self, call_id: str, text: str) -> None:
        with self.lock:
            if call_id in self.pending:
                self.drafts[call_id] = text
                self._write_drafts()

    # -- the model's side -------------------------------------------------------------------------
    async def answer(self, call: Call) -> tuple[str, float, bool]:
        """(reply, the person's seconds, replayed from the journal)."""
        with self.lock:
            known = self.answered.get(call.id)
            if known is None:
                if call.id not in self.pending:
                    self.pending[call.id] = call
                    self._bump()
                call = self.pending[call.id]
        if known is not None:
            return str(known["reply"]), float(known.get("seconds", 0.0)), True
        while not call.done.is_set():
            await anyio.sleep(ANSWER_POLL_SECONDS)
        return str(call.reply), time.time() - call.opened, False


def schema_problem(reply: str, schema: dict[str, Any]) -> str | None:
    """Why a JSON reply does not fit its schema's top level (JSON, object, required keys), or None.
    The full reading is the protocol's own, in the call layer."""
    try:
        value = json.loads(reply)
    except ValueError as ex:
        return f"not JSON: {ex}"
    if schema.get("type") == "object":
        if not isinstance(value, dict):
            return "the reply must be a JSON object"
        missing = [k for k in schema.get("required", []) if k not in value]
        if missing:
            return f"missing field(s): {', '.join(missing)}"
    return None


_desk: Desk | None = None
_desk_lock = threading.Lock()
#: the options a human role of this process named (every role's model is built before any call)
_asked: dict[str, Any] = {}


def desk(port: int | None, journal: Path | None) -> Desk:
    """The process's one desk (started on first use), shared by every role bound to ``bedside/human``:
    one page lists all their calls. A role that names no port or journal joins the running desk; one
    that names others than the running desk's is refused (two pages would split a person's work)."""
    global _desk
    with _desk_lock:
        if _desk is None:
            _desk = Desk(port or _asked.get("port") or 0, journal or _asked.get("journal") or DEFAULT_JOURNAL)
        elif (port and port != _desk.port) or (journal and journal.resolve() != _desk.journal.resolve()):
            raise ValueError(
                f"bedside/human: one page per eval process, already at {_desk.url} (journal {_desk.journal}); "
                f"a role asked for port={port}, journal={journal}: give the same -M options to every human role"
            )
        return _desk


def call_id(task: str, case: str, epoch: int, protocol: str, attempt: int, messages: list[dict[str, str]]) -> str:
    blob = json.dumps([task, case, epoch, protocol, attempt, messages], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def visible_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """What the role sees: each message's role and text (never its metadata, which holds the tag)."""
    return [{"role": m.role, "text": m.text} for m in messages]


class HumanEngine:
    """See the module docstring."""

    reads_render_context = False  # the render context (case facts, answer material) never reaches the page
    context_window = 0

    def __init__(self, port: int | str | None = None, journal: str | None = None) -> None:
        self.port = int(port) if port else None
        self.journal = Path(journal) if journal else None
        with _desk_lock:
            if self.port:
                _asked.setdefault("port", self.port)
            if self.journal:
                _asked.setdefault("journal", self.journal)

    def identity(self) -> str:
        return "human"

    async def generate(self, input: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        from bedside.compat import awaiting_human, sample_active, sample_state

        tag = tag_of(input)
        protocol = tag.name if tag else "untagged"
        schema = tag.schema if tag else None
        if schema is None and config.response_schema is not None:
            schema = config.response_schema.json_schema.model_dump(exclude_none=True)
        state = sample_state()
        active = sample_active()
        case = str(state.sample_id) if state is not None else "?"
        epoch = int(state.epoch) if state is not None else 1
        task = active.task if active is not None else ""
        shown = visible_messages(input)
        attempt = int(config.seed or 0)
        call = Call(
            id=call_id(task, case, epoch, protocol, attempt, shown),
            task=task,
            case=case,
            epoch=epoch,
            protocol=protocol,
            role=protocol.split(".", 1)[-1],
            turn=1 + sum(m.role == "assistant" for m in input),
            attempt=attempt,
            messages=shown,
            schema=schema,
        )
        with awaiting_human("question", protocol):
            reply, seconds, replayed = await desk(self.port, self.journal).answer(call)
        output = ModelOutput.from_content(model="bedside/human", content=reply, stop_reason="stop")
        output.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
        output.metadata = {"human": True, "human_seconds": round(seconds, 3), "replayed": replayed}
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
                status, message = desk.submit(call_id, text)
                self._json(status, {"ok": status == HTTPStatus.OK, "message": message})
            elif self.path == "/api/draft":
                desk.save_draft(call_id, text)
                self._json(HTTPStatus.OK, {"ok": True})
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    return Handler
