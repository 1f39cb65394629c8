"""OpenAI's Batch API on the loopback server (:mod:`tests.loopback.server`): the Files and Batches
endpoints that Inspect's batch mode (``GenerateConfig(batch=...)``, its ``OpenAIBatcher``) calls, so that a
test runs Inspect's own batch client — upload, create, poll, download results — against the scripted roles.

Endpoints (the shapes of OpenAI's API reference and of its ``openai`` client's types):

- ``POST /v1/files`` (multipart: ``file``, ``purpose``), ``GET /v1/files``, ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``;
- ``POST /v1/batches`` (``input_file_id``, ``endpoint``: ``/v1/chat/completions`` or ``/v1/responses``,
  ``completion_window``: ``24h``), ``GET /v1/batches/{id}``, ``GET /v1/batches``,
  ``POST /v1/batches/{id}/cancel``.

A batch is ``validating`` when created, ``in_progress`` from its first retrieval, and ends ``batch_delay``
seconds after its creation (``LoopbackServer(batch_delay=...)``; 0: at its first retrieval). Then each line
of its input file is answered as the live endpoint answers the same request — the scripted reply of the
call's protocol (the test channel's ``bedside_call`` rides in the line's ``body``, or in ``body.extra_body``
where Inspect's batcher leaves ``extra_body``), through the same fault plan — and the batch is ``completed``
with an output file (one line per answered request, ``{"id", "custom_id", "response": {"status_code":
200, "request_id", "body"}, "error": null}``) and an error file (the requests that failed). A ``/v1/responses``
line is answered with a Responses API object (the reply as one ``output_text``).

What fails, as OpenAI reports it:

- a request fault of the fault plan (:mod:`tests.loopback.requests`) fails that request only: an HTTP fault
  (``http_500``, ``http_503``, ``rate_limit``; ``timeout``, ``reset`` and ``truncated``, which have no
  meaning inside a batch, as a 500) and ``context_length`` (a 400) become an error-file line
  ``{"response": {"status_code": <status>, "body": {"error": {...}}}, "error": null}`` (the shape OpenAI's
  batch error files have, github.com/openai/openai-openapi/issues/302); a content fault (``not_json``,
  ``missing_fields``) is answered with status 200 and a reply the caller cannot read;
- ``batch_expired`` (a batch fault, drawn once per batch): the batch ends ``expired``: the requests at even
  positions of its input file (0, 2, 4, ...) were answered (output file), every other one is an error-file
  line ``{"response": null, "error": {"code": "batch_expired", "message": ...}}``;
- ``batch_failed``: the batch ends ``failed`` at validation, no request answered, ``errors.data`` holding one
  error per line (``code``, ``message``, ``line``);
- ``POST /v1/batches/{id}/cancel`` on a batch that has not ended: ``cancelling``, then ``cancelled`` at its
  next retrieval, with no request answered (every line an error-file line with code ``batch_cancelled``).

A batch fault rule (``Fault("batch_expired", rate, models=...)``) is drawn per batch from its requests (the
lines' bodies, not their custom ids) and how often the same requests were submitted before, so a
re-submission gets a fresh draw; its
``models`` match the ``model`` of the batch's first line (``protocols`` never match: a batch mixes them).

Counters (also under ``GET /stats``): ``files`` (uploaded, per purpose), ``batches`` (created, per final
status), ``batch_requests`` (lines answered or failed, per outcome), ``retrievals`` (status polls);
:attr:`Batches.stored` lists the files still stored (what a provider keeps until they are deleted).
"""

from __future__ import annotations

import email.policy
import hashlib
import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from email.parser import BytesParser
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.loopback.requests import (
    BATCH_EXPIRED,
    BATCH_FAILED,
    BATCH_FAULTS,
    CONTEXT_LENGTH,
    HTTP_503,
    RATE_LIMIT,
    TRANSPORT_FAULTS,
    _error,
    _unit,
    spoil,
)

if TYPE_CHECKING:
    from tests.loopback.server import LoopbackServer

#: the endpoints a batch may name
ENDPOINTS = ("/v1/chat/completions", "/v1/responses")

EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
CANCELLED_MESSAGE = "This request was not executed because the batch was cancelled."


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def object(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class StoredBatch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    created_at: int
    due: float  # when it ends (monotonic seconds)
    fault: str | None  # a batch fault drawn at creation
    lines: list[dict[str, Any]]  # its input file's request lines, read at creation (the file may be deleted)
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    ended_at: dict[str, int] = field(default_factory=dict)

    def object(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "created_at": self.created_at,
            "expires_at": self.created_at + 24 * 3600,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "errors": {"object": "list", "data": self.errors} if self.errors is not None else None,
            "request_counts": dict(self.counts),
            **{f"{status}_at": at for status, at in self.ended_at.items()},
        }


class Batches:
    """The Files and Batches endpoints of one :class:`~tests.loopback.server.LoopbackServer` (module docstring)."""

    def __init__(self, server: LoopbackServer, delay: float = 0.0) -> None:
        if delay < 0:
            raise ValueError("batch_delay must be >= 0")
        self.server, self.delay = server, float(delay)
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, StoredBatch] = {}
        self.counters: dict[str, Counter[str]] = {
            "files": Counter(),
            "batches": Counter(),
            "batch_requests": Counter(),
            "retrievals": Counter(),
        }
        self._submitted: Counter[bytes] = Counter()  # per input-file content: the batch fault draw's counter
        self._lock = threading.Lock()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files", self._list_files)
        app.router.add_get("/v1/files/{id}", self._file)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_delete("/v1/files/{id}", self._delete)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches", self._list_batches)
        app.router.add_get("/v1/batches/{id}", self._retrieve)
        app.router.add_post("/v1/batches/{id}/cancel", self._cancel)

    # -- what a test reads --------------------------------------------------------------------------
    @property
    def stored(self) -> list[dict[str, Any]]:
        """The files the server still stores (uploaded inputs, results), as file objects."""
        with self._lock:
            return [f.object() for f in self.files.values()]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {name: dict(counter) for name, counter in self.counters.items()} | {"stored_files": len(self.files)}

    def reset(self) -> None:
        with self._lock:
            for counter in self.counters.values():
                counter.clear()

    def input_lines(self, batch_id: str) -> list[dict[str, Any]]:
        """The request lines of a batch's input file, as they were when the batch was created."""
        with self._lock:
            return list(self.batches[batch_id].lines)

    # -- files ----------------------------------------------------------------------------------------
    async def _upload(self, http: web.Request) -> web.Response:
        form = _form_data(http.headers.get("Content-Type", ""), await http.read())
        if "file" not in form or "purpose" not in form:
            return _error(400, "a file upload needs the fields 'file' and 'purpose'", "invalid_request_error")
        (filename, data), (_, purpose) = form["file"], form["purpose"]
        stored = self._store(data, filename or "upload.jsonl", purpose.decode())
        return web.json_response(stored.object())

    def _store(self, data: bytes, filename: str, purpose: str) -> StoredFile:
        stored = StoredFile(id=f"file-{uuid.uuid4().hex[:24]}", filename=filename, purpose=purpose, data=data)
        with self._lock:
            self.files[stored.id] = stored
            self.counters["files"][purpose] += 1
        return stored

    async def _list_files(self, http: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": self.stored})

    async def _file(self, http: web.Request) -> web.Response:
        stored = self.files.get(http.match_info["id"])
        return web.json_response(stored.object()) if stored else _missing("file", http.match_info["id"])

    async def _content(self, http: web.Request) -> web.Response:
        stored = self.files.get(http.match_info["id"])
        if stored is None:
            return _missing("file", http.match_info["id"])
        return web.Response(body=stored.data, content_type="application/octet-stream")

    async def _delete(self, http: web.Request) -> web.Response:
        with self._lock:
            stored = self.files.pop(http.match_info["id"], None)
        if stored is None:
            return _missing("file", http.match_info["id"])
        return web.json_response({"id": stored.id, "object": "file", "deleted": True})

    # -- batches --------------------------------------------------------------------------------------
    async def _create(self, http: web.Request) -> web.Response:
        try:
            body = await http.json()
        except json.JSONDecodeError:
            return _error(400, "invalid JSON body", "invalid_request_error")
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if file_id not in self.files:
            return _error(
                400, f"input_file_id {file_id!r}: no such file", "invalid_request_error", param="input_file_id"
            )
        if endpoint not in ENDPOINTS:
            return _error(400, f"endpoint must be one of {list(ENDPOINTS)}", "invalid_request_error", param="endpoint")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be '24h'", "invalid_request_error", param="completion_window")
        batch = StoredBatch(
            id=f"batch_{uuid.uuid4().hex[:24]}",
            input_file_id=file_id,
            endpoint=endpoint,
            completion_window="24h",
            created_at=int(time.time()),
            due=time.monotonic() + self.delay,
            fault=self._draw_batch_fault(self.files[file_id].data),
            lines=[json.loads(x) for x in self.files[file_id].data.decode().splitlines() if x.strip()],
        )
        with self._lock:
            self.batches[batch.id] = batch
        return web.json_response(batch.object())

    async def _list_batches(self, http: web.Request) -> web.Response:
        with self._lock:
            data = [b.object() for b in self.batches.values()]
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def _retrieve(self, http: web.Request) -> web.Response:
        batch = self.batches.get(http.match_info["id"])
        if batch is None:
            return _missing("batch", http.match_info["id"])
        with self._lock:
            self.counters["retrievals"][batch.id] += 1
        self._advance(batch)
        return web.json_response(batch.object())

    async def _cancel(self, http: web.Request) -> web.Response:
        batch = self.batches.get(http.match_info["id"])
        if batch is None:
            return _missing("batch", http.match_info["id"])
        if batch.status in ("validating", "in_progress"):
            batch.status = "cancelling"
            batch.ended_at["cancelling"] = int(time.time())
        return web.json_response(batch.object())

    def _advance(self, batch: StoredBatch) -> None:
        """Move ``batch`` on, as the time since its creation allows (module docstring)."""
        if batch.status == "validating":
            batch.status = "in_progress"
            batch.ended_at["in_progress"] = int(time.time())
        if batch.status == "cancelling":
            self._end(batch, "cancelled", answered=set())
        elif batch.status == "in_progress" and time.monotonic() >= batch.due:
            lines = self.input_lines(batch.id)
            if batch.fault == BATCH_FAILED:
                self._fail(batch, lines)
            elif batch.fault == BATCH_EXPIRED:
                self._end(batch, "expired", answered=set(range(0, len(lines), 2)))
            else:
                self._end(batch, "completed", answered=set(range(len(lines))))

    def _fail(self, batch: StoredBatch, lines: list[dict[str, Any]]) -> None:
        batch.errors = [
            {
                "code": "invalid_request",
                "message": "The batch input file could not be validated.",
                "param": None,
                "line": i + 1,
            }
            for i in range(len(lines))
        ]
        batch.status = "failed"
        batch.ended_at["failed"] = int(time.time())
        with self._lock:
            self.counters["batches"]["failed"] += 1

    def _end(self, batch: StoredBatch, status: str, answered: set[int]) -> None:
        """Answer the lines at the positions ``answered``; the others end with ``status``'s error."""
        lines = self.input_lines(batch.id)
        output, errors = [], []
        for i, line in enumerate(lines):
            custom_id = line.get("custom_id")
            if i in answered:
                code, body = self._answer_line(line.get("body") or {}, batch.endpoint)
                record = {
                    "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                    "custom_id": custom_id,
                    "response": {"status_code": code, "request_id": uuid.uuid4().hex, "body": body},
                    "error": None,
                }
                (output if code == 200 else errors).append(record)
                outcome = "answered" if code == 200 else f"status_{code}"
            else:
                code_name = "batch_expired" if status == "expired" else "batch_cancelled"
                message = EXPIRED_MESSAGE if status == "expired" else CANCELLED_MESSAGE
                errors.append(
                    {
                        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                        "custom_id": custom_id,
                        "response": None,
                        "error": {"code": code_name, "message": message},
                    }
                )
                outcome = code_name
            with self._lock:
                self.counters["batch_requests"][outcome] += 1
        if output:
            batch.output_file_id = self._store(_jsonl(output), f"{batch.id}_output.jsonl", "batch_output").id
        if errors:
            batch.error_file_id = self._store(_jsonl(errors), f"{batch.id}_error.jsonl", "batch_output").id
        batch.counts = {"total": len(lines), "completed": len(output), "failed": len(errors)}
        batch.status = status
        batch.ended_at[status] = int(time.time())
        with self._lock:
            self.counters["batches"][status] += 1

    def _answer_line(self, body: dict[str, Any], endpoint: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of one request line, as the live endpoint would answer it (module docstring)."""
        server = self.server
        responses = endpoint == "/v1/responses"
        chat = to_chat_body(body) if responses else body
        request = server._read(chat, None)
        kind = server._draw_fault(request)
        if kind in TRANSPORT_FAULTS or kind == CONTEXT_LENGTH:
            server._record_fault(request, kind)
            return _fault_body(kind, request, server)
        try:
            text, finish = server._answer(request)
        except Exception as ex:  # a script that cannot answer this prompt (as the live endpoint: a 400)
            server._log(request, "script_error")
            return 400, {
                "error": {
                    "message": f"the scripted {request.protocol} reply failed: {ex!r}",
                    "type": "loopback_script_error",
                    "param": None,
                    "code": None,
                }
            }
        if kind is not None:  # a content fault: answered, with a reply the caller cannot read
            text = spoil(kind, text)
            server._record_fault(request, kind)
        else:
            server._log(request, "answered")
        server._count_answer(request)
        completion = server._completion(request, text, finish)
        return 200, response_object(completion) if responses else completion

    # -- batch faults -----------------------------------------------------------------------------------
    def _draw_batch_fault(self, data: bytes) -> str | None:
        rules = [r for r in self.server.fault_rules if set(r.kinds) & set(BATCH_FAULTS)]
        if not rules:
            return None
        # the requests, not their custom ids (a client's per-call ids, e.g. Inspect's uuids), in a fixed order
        bodies = sorted(
            json.dumps(json.loads(x).get("body"), sort_keys=True) for x in data.decode().splitlines() if x.strip()
        )
        key = hashlib.sha256("\n".join(bodies).encode()).digest()
        with self._lock:
            occurrence = self._submitted[key]
            self._submitted[key] += 1
        first = next((json.loads(line) for line in data.decode().splitlines() if line.strip()), {})
        model = str((first.get("body") or {}).get("model", ""))
        for i, rule in enumerate(self.server.fault_rules):
            kinds = [k for k in rule.kinds if k in BATCH_FAULTS]
            if not kinds or not rule.rate or (rule.models and model not in rule.models) or rule.protocols:
                continue
            u, n = _unit(b"batch", str(self.server.fault_seed).encode(), str(i).encode(), str(occurrence).encode(), key)
            if u < rule.rate:
                return kinds[n % len(kinds)]
        return None


def _fault_body(kind: str, request: Any, server: LoopbackServer) -> tuple[int, dict[str, Any]]:
    """(status, error body) of a request fault inside a batch (module docstring)."""
    if kind == CONTEXT_LENGTH:
        tokens = sum(len(m.text) for m in request.messages) // 4 + 1
        limit = server.context_limit or max(1, tokens - 1)
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{tokens} tokens. Please reduce the length of the messages."
        )
        return 400, {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    if kind == RATE_LIMIT:
        return 429, {
            "error": {
                "message": "Rate limit reached for requests.",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    if kind == HTTP_503:
        return 503, {
            "error": {
                "message": "The server is overloaded, please try again later.",
                "type": "server_error",
                "param": None,
                "code": "overloaded",
            }
        }
    return 500, {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


def to_chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses API request body read as a Chat Completions one: its ``instructions`` and ``input``
    items (messages; other items such as reasoning are skipped) as ``messages``; model, seed and the
    test channel's field kept."""
    messages = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        if isinstance(item, dict) and item.get("role") and item.get("type", "message") == "message":
            messages.append({"role": item["role"], "content": item.get("content")})
    return {k: v for k, v in body.items() if k not in ("input", "instructions")} | {"messages": messages}


def response_object(completion: dict[str, Any]) -> dict[str, Any]:
    """A chat completion as a Responses API ``response`` object (one ``output_text``)."""
    choice, usage = completion["choices"][0], completion["usage"]
    text = choice["message"]["content"] or ""
    incomplete = choice["finish_reason"] == "length"
    return {
        "id": completion["id"].replace("chatcmpl-", "resp_"),
        "object": "response",
        "created_at": completion["created"],
        "model": completion["model"],
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None,
        "output": [
            {
                "id": f"msg_{uuid.uuid4().hex}",
                "type": "message",
                "role": "assistant",
                "status": "incomplete" if incomplete else "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
    }


def _form_data(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A ``multipart/form-data`` body: field name -> (file name, bytes). The standard library's MIME parser
    (aiohttp's own reader warns of a deprecated call of its own on every upload)."""
    message = BytesParser(policy=email.policy.HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields = {}
    for part in message.iter_parts() if message.is_multipart() else []:
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            fields[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _missing(kind: str, ident: str) -> web.Response:
    return _error(404, f"No such {kind}: '{ident}'", "invalid_request_error", code=f"{kind}_not_found")
