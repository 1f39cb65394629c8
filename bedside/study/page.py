"""``bedside study serve STUDY [--port N]``: bedside's rating page for the raters of a built study, on loopback.

Each rater has a link of their own, ``http://127.0.0.1:PORT/<token>/``: the token is a random secret
(:func:`secrets.token_urlsafe`, 128 bits) made the first time the study is served and kept with the port in
``page/links.json`` in the study folder (the organiser's, like ``key/``), so a server started again serves the same
links; an address with any other token is refused with a page that says so. A rater's page shows their packet's
tasks only (``raters/<rater>/packet.json``, blinded when the study was built), one at a time: the two transcripts
side by side, the case's items for each, the blinding guess for each, the preference, and their progress; they can
go back to any task and send it again. The page never reads ``key/``.

A task sent is checked field by field against its items' scales (a missing or off-scale answer is refused, named
as the page shows it: ``Left conversation, Q7``) and appended to the rater's journal
(:mod:`bedside.study.journal`), fsync'ed before the page hears it is saved; what the page shows as sent and the
progress are read from the journals, so a server killed and started again shows each rater everything they sent.
The page reports every 2 s that a rater is working on a task (visible and active), as ``bedside/human``'s page
does; the working intervals (:mod:`bedside.person_time`) go with each task into the journal.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
import secrets
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bedside.person_page import shared_file
from bedside.person_time import extend, length
from bedside.study.build import StudyError
from bedside.study.items import GUESS, PREFERENCE, Item
from bedside.study.journal import Journal, journal_path

PAGE = Path(__file__).with_name("rating_page.html")
HOST = "127.0.0.1"  # loopback only: the page shows clinical text
SIDES = {"left": "Left conversation", "right": "Right conversation"}
#: how often a journal's working intervals are saved, at most
STATE_EVERY_SECONDS = 2.0


def links_path(folder: Path) -> Path:
    return folder / "page" / "links.json"


def access(folder: Path, raters: list[str], port: int | None) -> tuple[int, dict[str, str]]:
    """(port, rater -> token): the study's saved ones, a token made for a rater who has none; ``port`` given
    replaces the saved port (0: none saved yet, the system picks one)."""
    path = links_path(folder)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        saved = {}
    except ValueError as ex:
        raise StudyError(f"{path}: unreadable ({ex}); delete it to make new links") from ex
    tokens = {r: str(saved.get("tokens", {}).get(r) or secrets.token_urlsafe(16)) for r in raters}
    return (port if port is not None else int(saved.get("port") or 0)), tokens


def save_access(folder: Path, port: int, tokens: dict[str, str]) -> None:
    path = links_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"port": port, "tokens": tokens}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


class Rater:
    """One rater's packet and journal."""

    def __init__(self, folder: Path, name: str) -> None:
        self.name = name
        path = folder / "raters" / name / "packet.json"
        try:
            self.packet = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as ex:
            raise StudyError(f"{path}: unreadable ({ex}); bedside study build writes it") from ex
        self.tasks = {t["task"]: t for t in self.packet["tasks"]}
        self.journal = Journal(journal_path(folder, name))

    def items(self, task: dict[str, Any]) -> list[Item]:
        """The items asked of each transcript of a task: the case's own, then the blinding guess."""
        return [*(Item.from_dict(i) for i in task["items"]), GUESS]

    def sent(self, code: str) -> dict[str, Any] | None:
        """A task's latest answers as the page holds them: {left: {item: value}, right: {...}, preference}."""
        line = self.journal.tasks.get(code)
        if line is None:
            return None
        task = self.tasks[code]
        sides = {task[side]["transcript"]: side for side in SIDES}
        answers: dict[str, Any] = {side: {} for side in SIDES}
        for rating in line["ratings"]:
            if rating["item"] == PREFERENCE.id:
                answers[PREFERENCE.id] = rating["value"]
            elif rating["transcript"] in sides:
                answers[sides[rating["transcript"]]][rating["item"]] = rating["value"]
        return {"answers": answers, "at": line.get("at")}

    def check(self, code: str, answers: dict[str, Any]) -> tuple[list[dict[str, str]], dict[str, str]]:
        """(the task's rating records, problems: field -> what is wrong, named as the page names the field)."""
        task = self.tasks[code]
        records: list[dict[str, str]] = []
        problems: dict[str, str] = {}

        def take(field: str, transcript: str, item: Item, value: Any) -> None:
            if value is None or str(value).strip() == "":
                problems[field] = "no answer"
                return
            try:
                item.value(str(value))
            except ValueError:
                problems[field] = f"{str(value)!r} is not on its scale ({' / '.join(item.choices)})"
                return
            records.append({"transcript": transcript, "item": item.id, "value": str(value)})

        items = self.items(task)
        for side in SIDES:
            found = answers.get(side)
            given: dict[str, Any] = found if isinstance(found, dict) else {}
            for item in items:
                take(f"{side}/{item.id}", task[side]["transcript"], item, given.get(item.id))
            for unknown in sorted(set(given) - {i.id for i in items}):
                problems[f"{side}/{unknown}"] = "no such question in this task"
        take(PREFERENCE.id, "", PREFERENCE, answers.get(PREFERENCE.id))
        return records, problems


def asked(item: Item) -> dict[str, Any]:
    """An item as the page asks it: its question and choices (not their numbers: the guess's "cannot tell" is NaN,
    which JSON has not)."""
    return {k: v for k, v in item.as_dict().items() if k in ("id", "question", "choices", "anchors", "section")}


def field_name(field: str) -> str:
    """A field as the page shows it: ``left/Q7`` -> ``Left conversation, Q7``."""
    side, _, item = field.partition("/")
    return f"{SIDES[side]}, {item}" if item and side in SIDES else field


class RatingDesk:
    """The rating page of one study: its raters, their journals, and the server (on loopback, in a thread)."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.folder = folder
        try:
            self.design = json.loads((folder / "study.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as ex:
            raise StudyError(f"{folder}: not a study folder (study.json: {ex}); bedside study build writes one") from ex
        self.raters = {name: Rater(folder, name) for name in self.design["raters"]}
        self.lock = threading.Lock()
        wanted, self.tokens = access(folder, list(self.raters), port)
        try:
            self.server = ThreadingHTTPServer((HOST, wanted), _handler(self))
        except OSError as ex:
            if ex.errno != errno.EADDRINUSE:
                raise
            raise StudyError(
                f"port {wanted} is in use: is this study served already? Stop that server, or give another "
                "--port (the raters' links then change)"
            ) from ex
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        save_access(folder, self.port, self.tokens)

    def link(self, rater: str) -> str:
        return f"http://{HOST}:{self.port}/{self.tokens[rater]}/"

    def rater_of(self, token: str) -> Rater | None:
        for name, known in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return self.raters[name]
        return None

    def progress(self, rater: Rater) -> tuple[int, int]:
        return sum(code in rater.journal.tasks for code in rater.tasks), len(rater.tasks)

    # -- the page's requests ----------------------------------------------------------------------
    def state(self, rater: Rater) -> dict[str, Any]:
        """What the rater's page shows: their packet, what they sent, their progress."""
        with self.lock:
            done, total = self.progress(rater)
            return {
                "rater": rater.name,
                "title": rater.packet["title"],
                "clinician": rater.packet["clinician"],
                "tasks": rater.packet["tasks"],
                "guess": asked(GUESS),
                "preference": asked(PREFERENCE),
                "sent": {code: sent for code in rater.tasks if (sent := rater.sent(code)) is not None},
                "done": done,
                "total": total,
                "work_seconds": round(length([i for w in rater.journal.work.values() for i in w]), 1),
            }

    def rate(self, rater: Rater, code: str, answers: Any) -> tuple[HTTPStatus, dict[str, Any]]:
        """The rater sent a task: refused field by field, or appended to their journal."""
        if code not in rater.tasks:
            return HTTPStatus.NOT_FOUND, {"message": f"task {code!r} is not one of your tasks"}
        if not isinstance(answers, dict):
            return HTTPStatus.BAD_REQUEST, {"message": "expected {task, answers}"}
        records, problems = rater.check(code, answers)
        if problems:
            named = [field_name(f) for f in problems]
            message = f"Not sent: {len(named)} answer(s) to give or correct, marked in red: {', '.join(named)}"
            return HTTPStatus.BAD_REQUEST, {
                "message": message,
                "errors": {f: f"{field_name(f)}: {p}" for f, p in problems.items()},
            }
        with self.lock:
            # the work runs to the sending (sent without the page's reports, by a client of the API: none)
            extend(rater.journal.work.setdefault(code, []), time.time())
            line = rater.journal.append(rater.name, code, records)
            rater.journal.save_state()
            done, total = self.progress(rater)
        return HTTPStatus.OK, {"message": "saved", "at": line["at"], "done": done, "total": total}

    def seen(self, rater: Rater, code: str) -> None:
        """The page reports that the rater is working on this task now."""
        if code not in rater.tasks:
            return
        with self.lock:
            extend(rater.journal.work.setdefault(code, []), time.time())
            rater.journal.save_state(at_most_every=STATE_EVERY_SECONDS)


REFUSED = (
    "<!doctype html><meta charset='utf-8'><title>bedside: not a rater's link</title>"
    "<body style='font: 16px/1.5 system-ui, sans-serif; margin: 40px; max-width: 40em'>"
    "<h1>This is not a rater's link</h1><p>This address is not one of this study's rater links, so nothing is "
    "shown. Use the whole link the study's organiser sent you: it ends with a long code "
    "(<code>http://127.0.0.1:PORT/…code…/</code>). If it still does not open, ask the organiser for your link "
    "again.</p></body>"
)


def _handler(desk: RatingDesk) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the links hold the tokens
            return

        def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Cache-Control", "no-store")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, value: Any) -> None:
            self._send(status, json.dumps(value, ensure_ascii=False, allow_nan=False).encode(), "application/json")

        def _route(self) -> tuple[Rater | None, str]:
            """(the rater the link's token names, or None; the rest of the path)."""
            path = urlsplit(self.path).path
            token, _, rest = path.lstrip("/").partition("/")
            return desk.rater_of(token) if token else None, rest

        def _refuse(self, rest: str) -> None:
            if rest.startswith("api/"):
                self._json(HTTPStatus.FORBIDDEN, {"message": "this link is not a rater's link of this study"})
            else:
                self._send(HTTPStatus.FORBIDDEN, REFUSED.encode(), "text/html; charset=utf-8")

        def do_GET(self) -> None:
            rater, rest = self._route()
            if rater is None:
                self._refuse(rest)
            elif not urlsplit(self.path).path.lstrip("/").count("/"):  # the link without its last slash
                self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                self.send_header("Location", urlsplit(self.path).path + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif rest in ("", "index.html"):
                self._send(HTTPStatus.OK, PAGE.read_bytes(), "text/html; charset=utf-8")
            elif rest == "api/state":
                self._json(HTTPStatus.OK, desk.state(rater))
            elif shared := shared_file(rest):
                self._send(HTTPStatus.OK, *shared)
            else:
                self._json(HTTPStatus.NOT_FOUND, {"message": "not found"})

        def do_POST(self) -> None:
            rater, rest = self._route()
            if rater is None:
                self._refuse(rest)
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                code = str(body["task"])
            except (ValueError, KeyError, TypeError):
                self._json(HTTPStatus.BAD_REQUEST, {"message": "expected {task, answers}"})
                return
            if rest == "api/rate":
                status, answer = desk.rate(rater, code, body.get("answers"))
                self._json(status, {"ok": status == HTTPStatus.OK, **answer})
            elif rest == "api/seen":
                desk.seen(rater, code)
                self._json(HTTPStatus.OK, {"ok": True})
            else:
                self._json(HTTPStatus.NOT_FOUND, {"message": "not found"})

    return Handler
