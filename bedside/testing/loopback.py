"""A loopback OpenAI-compatible HTTP server that plays every bedside role with the scripted replies.

It lets a bedside task run through Inspect's real ``openai-api/...`` provider (HTTP, the ``openai``
client, retries, usage accounting) — the same code path as a user's API key or a vLLM server — with
no network and no model weights. Point Inspect at it like at any OpenAI-compatible endpoint::

    python -m bedside.loopback --port 8765            # prints the base URL and the variables below

    LOOPBACK_API_KEY=x LOOPBACK_BASE_URL=http://127.0.0.1:8765/v1 \\
    inspect eval bedside/discharge --model openai-api/loopback/educator \\
        --model-role patient=openai-api/loopback/patient --model-role monitor=openai-api/loopback/monitor \\
        --model-role grader=openai-api/loopback/grader

(``openai-api/<service>/<model>`` reads ``<SERVICE>_API_KEY`` and ``<SERVICE>_BASE_URL``; any key is
accepted. The model name after the service is free: it only labels the calls.) MedSP1000 also binds
``--model-role environment=openai-api/loopback/environment``; CPB-Bench binds ``grader`` (and
``patient`` with ``-T turns=k``).

Endpoints: ``POST /v1/chat/completions`` (Chat Completions request and response shape; ``stream``
is answered with one server-sent content chunk and a usage chunk, although Inspect's ``openai-api``
provider does not stream unless asked with ``-M stream=true``) and ``GET /v1/models``.

How it answers: the request's messages become Inspect ``ChatMessage``\\ s and the protocol is the
call's tag, which bedside sends on every ``openai-api/...`` call as the ``X-Bedside-Protocol`` request
header (never part of the prompt); a JSON-schema ``response_format`` (structured output) names it too
(its ``name`` is the protocol name with ``.`` replaced by ``_``). The server never reads the prompt to
find the protocol. The reply is :meth:`bedside.testing.scripted.ScriptedEngine.reply_for` with
the request's ``seed`` (0 if absent), so it is deterministic and protocol-valid for every role;
prompts of no known protocol get :data:`UNKNOWN_REPLY`. The scripted engine's behaviour options
(``LoopbackServer(options=...)``, ``--option key=value``) apply to every role; the generic option
``context_window`` (estimated tokens) ends longer prompts with ``finish_reason="length"``.

Token usage is estimated as characters / 4 (+1), as ``bedside/scripted`` does. ``latency`` (seconds,
optionally ± uniform ``jitter``) delays each reply with ``asyncio.sleep``, so concurrent requests
overlap as they would against a real server.

In tests and benchmarks::

    with LoopbackServer(latency=0.05) as server:
        os.environ["LOOPBACK_BASE_URL"] = server.base_url
        ...
        server.calls["discharge.patient"]  # requests answered per protocol
        server.routes["patient", "discharge.patient"]  # ... per (model name, protocol)

Inspect memoizes a model made from a model string for the whole process, keyed by the string (not
by the environment): to run several servers one after another in one process, build the models
with ``get_model("openai-api/loopback/<role>", memoize=False)`` (``tests/loopback_helpers.py``), or
a memoized model would keep calling the first server's port.

Every request passes through :meth:`LoopbackServer._intercept` before it is answered (a hook for
subclasses: the scale benchmark sets its per-request delay there), then through the server's fault
plan.

Fault injection (``LoopbackServer(faults=[...])``, ``--fault SPEC``): each :class:`Fault` rule gives a
matching request (by model name and/or protocol) one of its ``kinds`` with probability ``rate``:

================== ==========================================================================
``http_500``       HTTP 500 with an OpenAI ``server_error`` body (clients retry)
``http_503``       HTTP 503 "overloaded" (clients retry)
``rate_limit``     HTTP 429 ``rate_limit_exceeded`` with ``Retry-After`` / ``retry-after-ms``
                   (``retry_after`` seconds; the ``openai`` client honours it, Inspect's own
                   backoff does not read it)
``timeout``        the server stalls ``hang`` seconds, then drops the connection (set the
                   client's ``timeout``/``attempt_timeout`` below ``hang``)
``reset``          the TCP connection is reset (``SO_LINGER`` 0 + abort) without any reply
``truncated``      HTTP 200 whose body is cut in half (``Content-Length`` of the whole), then
                   the connection is closed
``not_json``       HTTP 200, a well-formed completion whose content is prose, not JSON
``missing_fields`` HTTP 200, the scripted JSON reply with its first key removed (``{}`` when it
                   had one key): JSON that misses a required field
``context_length`` HTTP 400 with OpenAI's ``context_length_exceeded`` error body (Inspect's
                   ``openai-api`` provider turns it into ``stop_reason="model_length"``)
================== ==========================================================================

``context_limit`` (estimated prompt tokens) answers every longer prompt with the
``context_length`` fault, so an encounter hits it mid-session as its history grows. The draw is
deterministic given ``fault_seed``: it hashes the seed, the rule, the request (model, protocol,
seed, message texts) and how many times that same request arrived before, so a retry of a faulted
request gets a fresh draw and the faulted requests do not depend on the order in which concurrent
requests arrive. Counters: ``faults`` (per kind), ``fault_routes`` (per model, protocol, kind),
``requests`` (every request that reached the handler), ``calls``/``routes`` (requests answered with
HTTP 200, content faults included); ``open_connections`` / ``peak_connections``. ``GET /stats``
returns them as JSON, and ``request_log=PATH`` (``--request-log``) appends one JSON line per
request (number, time, model, protocol, outcome, request key), flushed at once, so the counts
survive a crash of the client (or of the server).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import socket
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from aiohttp import web
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from bedside.structured import PROBE_NAME
from bedside.protocols import BODY_KEY, HEADER, LOOPBACK_URL_ENV, TAG
from bedside.testing.scripted import ScriptedEngine

ENV_API_KEY = "LOOPBACK_API_KEY"
ENV_BASE_URL = "LOOPBACK_BASE_URL"
#: the reply to a prompt of no bedside protocol
UNKNOWN_REPLY = "The bedside loopback server has no script for this prompt (it only plays bedside's roles)."
#: the ``calls`` key of requests that matched no protocol
UNKNOWN = "<unknown>"
#: models listed by ``GET /v1/models`` (any other name is accepted too)
MODELS = ("educator", "patient", "monitor", "grader", "environment", "examinee", "doctor")

# -- fault kinds (module docstring) ------------------------------------------------------------
HTTP_500 = "http_500"
HTTP_503 = "http_503"
RATE_LIMIT = "rate_limit"
TIMEOUT = "timeout"
RESET = "reset"
TRUNCATED = "truncated"
NOT_JSON = "not_json"
MISSING_FIELDS = "missing_fields"
CONTEXT_LENGTH = "context_length"
#: faults a client retries (no usable reply reached it)
TRANSPORT_FAULTS = (HTTP_500, HTTP_503, RATE_LIMIT, TIMEOUT, RESET, TRUNCATED)
#: faults answered with HTTP 200 and a reply the caller cannot read
CONTENT_FAULTS = (NOT_JSON, MISSING_FIELDS)
FAULT_KINDS = (*TRANSPORT_FAULTS, *CONTENT_FAULTS, CONTEXT_LENGTH)
#: what a ``not_json`` fault answers
NOT_JSON_REPLY = "I have looked at this carefully and everything seems fine to me."


def estimate_tokens(text: str) -> int:
    return len(text) // 4 + 1


def _text_of(content: Any) -> str:
    """The text of an OpenAI message ``content``: a string or a list of parts (text parts kept)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def to_chat_messages(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    """OpenAI chat messages as Inspect messages (system/developer, user/tool/function, assistant)."""
    out: list[ChatMessage] = []
    for m in messages:
        role, text = m.get("role"), _text_of(m.get("content"))
        if role in ("system", "developer"):
            out.append(ChatMessageSystem(content=text))
        elif role == "assistant":
            out.append(ChatMessageAssistant(content=text))
        else:  # user; tool/function results are read as user text (bedside's roles use no tools)
            out.append(ChatMessageUser(content=text))
    return out


def protocol_from_schema_name(response_format: Any) -> str | None:
    """The protocol named by a JSON-schema ``response_format`` (``discharge_judge_quality`` ->
    ``discharge.judge_quality``: benchmark names hold no ``_``), or None."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    name = (response_format.get("json_schema") or {}).get("name")
    if not isinstance(name, str) or "_" not in name:
        return None
    return name.replace("_", ".", 1)


def _names(value: str | Iterable[str] | None) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        value = value.split(",")
    return frozenset(v.strip() for v in value if v and v.strip())


@dataclass(frozen=True, init=False)
class Fault:
    """One fault rule: a request of one of ``models`` (empty: any model name) and one of
    ``protocols`` (empty: any, unrecognised prompts included) gets one of ``kinds`` (drawn uniformly)
    with probability ``rate``. Rules are tried in order; the first that fires wins."""

    kinds: tuple[str, ...]
    rate: float
    models: frozenset[str]
    protocols: frozenset[str]

    def __init__(
        self,
        kinds: str | Iterable[str],
        rate: float = 1.0,
        models: str | Iterable[str] | None = None,
        protocols: str | Iterable[str] | None = None,
    ) -> None:
        kinds = tuple(dict.fromkeys(k.strip() for k in (kinds.split(",") if isinstance(kinds, str) else kinds) if k.strip()))
        unknown = [k for k in kinds if k not in FAULT_KINDS]
        if not kinds or unknown:
            raise ValueError(f"unknown fault kind(s) {unknown or kinds!r}; known: {list(FAULT_KINDS)}")
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= float(rate) <= 1.0:
            raise ValueError(f"a fault rate must be a number in [0, 1], got {rate!r}")
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "rate", float(rate))
        object.__setattr__(self, "models", _names(models))
        object.__setattr__(self, "protocols", _names(protocols))

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``KINDS[:RATE[:MODELS[:PROTOCOLS]]]``, each list comma-separated; an empty field means
        "any". E.g. ``http_500,reset:0.1``, ``not_json:1::discharge.monitor``,
        ``rate_limit:0.5:grader``."""
        parts = spec.split(":")
        if len(parts) > 4 or not parts[0].strip():
            raise ValueError(f"expected KINDS[:RATE[:MODELS[:PROTOCOLS]]], got {spec!r}")
        try:
            rate = float(parts[1]) if len(parts) > 1 and parts[1].strip() else 1.0
        except ValueError:
            raise ValueError(f"bad rate {parts[1]!r} in fault spec {spec!r}") from None
        return cls(parts[0], rate, parts[2] if len(parts) > 2 else None, parts[3] if len(parts) > 3 else None)

    def matches(self, request: Request) -> bool:
        return (not self.models or request.model in self.models) and (
            not self.protocols or (request.protocol or UNKNOWN) in self.protocols
        )


def request_key(request: Request) -> bytes:
    """What identifies a request for the fault draw: model, protocol, seed and message texts."""
    h = hashlib.sha256(f"{request.model}|{request.protocol}|{request.seed}|".encode())
    for m in request.messages:
        h.update(m.text.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.digest()


def _unit(*parts: bytes) -> tuple[float, int]:
    """(uniform [0, 1), a 64-bit integer) drawn from ``parts``."""
    digest = hashlib.blake2b(b"|".join(parts), digest_size=16).digest()
    return int.from_bytes(digest[:8], "big") / 2**64, int.from_bytes(digest[8:], "big")


def spoil(kind: str, text: str) -> str:
    """The reply of a content fault: prose (``not_json``), or the JSON reply without its first key."""
    if kind == NOT_JSON:
        return NOT_JSON_REPLY
    from bedside.jsonreply import extract_json

    first, second = (list, dict) if text.lstrip().startswith("[") else (dict, list)
    found = extract_json(text, first) or extract_json(text, second)
    value = found.value if found is not None else {}

    def drop_first(obj: Any) -> Any:
        return {k: v for i, (k, v) in enumerate(obj.items()) if i > 0} if isinstance(obj, dict) else obj

    return json.dumps([drop_first(v) for v in value] if isinstance(value, list) else drop_first(value), ensure_ascii=False)


@dataclass
class Request:
    """One chat-completions request as the handler sees it (what fault injection can act on)."""

    body: dict[str, Any]
    messages: list[ChatMessage]
    protocol: str | None
    seed: int
    model: str
    number: int  # 1-based, in order of arrival
    found_by: str  # how the protocol was found: "header", "response_format" or UNKNOWN


class LoopbackServer:
    """An OpenAI-compatible server on 127.0.0.1 in a background thread (its own event loop).

    Use as a context manager (or :meth:`start` / :meth:`stop`). ``port=0`` picks a free port;
    ``latency`` and ``jitter`` (seconds) delay each reply by ``latency ± U(0, jitter)`` (never
    negative); ``options`` are ``bedside/scripted`` behaviour options for every role. ``faults``
    (:class:`Fault` rules or their ``parse`` specs), ``fault_seed``, ``hang``, ``retry_after``,
    ``context_limit`` and ``request_log``: fault injection and the request log (module docstring).
    """

    def __init__(
        self,
        port: int = 0,
        latency: float = 0.0,
        jitter: float = 0.0,
        options: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        faults: Sequence[Fault | str] = (),
        fault_seed: int = 0,
        hang: float = 5.0,
        retry_after: float = 1.0,
        context_limit: int | None = None,
        request_log: str | Path | None = None,
        json_schema: bool = True,
    ) -> None:
        if latency < 0 or jitter < 0:
            raise ValueError("latency and jitter must be >= 0")
        if hang < 0 or retry_after < 0:
            raise ValueError("hang and retry_after must be >= 0")
        if context_limit is not None and context_limit < 1:
            raise ValueError("context_limit must be at least 1 (estimated tokens)")
        self.host, self.port = host, port
        self.latency, self.jitter = latency, jitter
        self.options = dict(options or {})
        self.engine = ScriptedEngine(**self.options)  # validates the options before the server starts
        self.fault_rules: tuple[Fault, ...] = tuple(f if isinstance(f, Fault) else Fault.parse(f) for f in faults)
        self.fault_seed, self.hang, self.retry_after = int(fault_seed), float(hang), float(retry_after)
        self.context_limit = context_limit
        #: False: answer every JSON-schema ``response_format`` like llama-cpp-python's server (a 500
        #: "Input should be 'text' or 'json_object'"), for the fail-fast test of -T structured_output=true
        self.json_schema = json_schema
        self.rejected_json_schema = 0  # requests answered with that 500
        self.request_log = Path(request_log) if request_log is not None else None
        self.calls: Counter[str] = Counter()  # requests answered, per protocol name (UNKNOWN: none)
        self.routes: Counter[tuple[str, str]] = Counter()  # requests per (model name, protocol)
        self.found_by: Counter[str] = Counter()  # "header", "response_format" or UNKNOWN, per request
        self.faults: Counter[str] = Counter()  # faults injected, per kind
        self.fault_routes: Counter[tuple[str, str, str]] = Counter()  # per (model name, protocol, kind)
        self.peak_connections = 0
        self._seen: Counter[bytes] = Counter()  # arrivals per request key (the fault draw's counter)
        self._log_file: IO[str] | None = None
        self._lock = threading.Lock()
        self._number = 0
        self._random = random.Random(0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def env(self) -> dict[str, str]:
        """The variables that point ``openai-api/loopback/...`` models at this server."""
        return {ENV_API_KEY: "loopback", ENV_BASE_URL: self.base_url, LOOPBACK_URL_ENV: self.base_url}

    def start(self) -> LoopbackServer:
        if self._thread is not None:
            raise RuntimeError("the loopback server is already running")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve())
            except BaseException as ex:  # reported to start()
                failure.append(ex)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
                loop.close()
                if self._log_file is not None:
                    self._log_file.close()
                    self._log_file = None

        self._thread = threading.Thread(target=run, name="bedside-loopback", daemon=True)
        self._thread.start()
        ready.wait(timeout=30)
        if failure or not ready.is_set():
            self._thread.join(timeout=5)
            self._thread = None
            raise RuntimeError(f"the loopback server did not start: {failure[0] if failure else 'timeout'}")
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread, self._loop, self._runner = None, None, None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget the call and fault counters (the request numbering and the fault draws go on)."""
        with self._lock:
            self.calls.clear()
            self.routes.clear()
            self.found_by.clear()
            self.faults.clear()
            self.fault_routes.clear()

    @property
    def total_calls(self) -> int:
        with self._lock:
            return sum(self.calls.values())

    @property
    def requests(self) -> int:
        """Requests that reached the chat-completions handler (answered, faulted or refused)."""
        with self._lock:
            return self._number

    @property
    def open_connections(self) -> int:
        """HTTP connections open right now (0 when the server is not running)."""
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

    def stats(self) -> dict[str, Any]:
        """The counters as JSON-ready data (what ``GET /stats`` returns)."""
        with self._lock:
            return {
                "requests": self._number,
                "answered": sum(self.calls.values()),
                "calls": dict(self.calls),
                "routes": [{"model": m, "protocol": p, "n": n} for (m, p), n in sorted(self.routes.items())],
                "faults": dict(self.faults),
                "fault_routes": [
                    {"model": m, "protocol": p, "kind": k, "n": n} for (m, p, k), n in sorted(self.fault_routes.items())
                ],
                "open_connections": self.open_connections,
                "peak_connections": self.peak_connections,
            }

    async def _serve(self) -> None:
        if self.request_log is not None:
            self._log_file = self.request_log.open("a", encoding="utf-8", buffering=1)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_get("/stats", self._stats)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    # -- handlers -------------------------------------------------------------------------------
    async def _list_models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        data = [{"id": m, "object": "model", "created": created, "owned_by": "bedside"} for m in MODELS]
        return web.json_response({"object": "list", "data": data})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _chat_completions(self, http: web.Request) -> web.StreamResponse:
        self._count_connection()
        try:
            body = await http.json()
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("the request needs a 'messages' list")
        except (ValueError, json.JSONDecodeError) as ex:
            return _error(400, f"invalid request: {ex}", "invalid_request_error")
        response_format = body.get("response_format")
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            if not self.json_schema:
                with self._lock:
                    self.rejected_json_schema += 1
                return _error(500, LLAMA_CPP_JSON_SCHEMA_ERROR, "internal_server_error")
            if (response_format.get("json_schema") or {}).get("name") == PROBE_NAME:  # bedside.structured's probe
                return web.json_response(self._completion(self._read(body, None), '{"ok": true}', "stop"))
        request = self._read(body, http.headers.get(HEADER))

        intercepted = await self._intercept(request)
        if intercepted is not None:
            self._log(request, "intercepted")
            return intercepted

        kind = self._draw_fault(request)
        if kind in TRANSPORT_FAULTS or kind == CONTEXT_LENGTH:
            self._record_fault(request, kind)
            return await self._inject(http, request, kind)
        await asyncio.sleep(self._delay())
        try:
            text, finish = self._answer(request)
        except Exception as ex:  # a script that cannot answer this prompt: deterministic, so a 400
            # (which clients do not retry) rather than a 500 (which they retry for minutes)
            self._log(request, "script_error")
            return _error(400, f"the scripted {request.protocol} reply failed: {ex!r}", "loopback_script_error")
        if kind is not None:  # a content fault: answered, with a reply the caller cannot read
            text = spoil(kind, text)
            self._record_fault(request, kind)
        else:
            self._log(request, "answered")
        with self._lock:
            self.calls[request.protocol or UNKNOWN] += 1
            self.routes[request.model, request.protocol or UNKNOWN] += 1
            self.found_by[request.found_by] += 1
        completion = self._completion(request, text, finish)
        if body.get("stream"):
            return await self._stream(http, completion, body)
        return web.json_response(completion)

    def _read(self, body: dict[str, Any], header: str | None = None) -> Request:
        messages = to_chat_messages(body["messages"])
        tag = body.get(BODY_KEY)
        if isinstance(tag, dict) and messages:  # the tag, as bedside.calls sends it on this channel only
            meta = {TAG: {"name": tag.get("name"), "context": tag.get("context") or {}}}
            messages[-1] = messages[-1].model_copy(update={"metadata": meta})
        name, found_by = protocol_from_schema_name(body.get("response_format")), "response_format"
        if name is None:
            name, found_by = (header, "header") if header else (None, UNKNOWN)
        seed = body.get("seed")
        with self._lock:
            self._number += 1
            number = self._number
        return Request(
            body=body,
            messages=messages,
            protocol=name,
            seed=int(seed) if isinstance(seed, int | float) else 0,
            model=str(body.get("model", "")),
            number=number,
            found_by=found_by,
        )

    async def _intercept(self, request: Request) -> web.StreamResponse | None:
        """A hook for subclasses, called first for every request: a response here replaces the
        answer (and skips the fault plan). None: go on (fault plan, then the answer)."""
        return None

    # -- faults ---------------------------------------------------------------------------------
    def _draw_fault(self, request: Request) -> str | None:
        """The fault this request gets (module docstring), or None."""
        if self.context_limit is not None and _prompt_tokens(request) > self.context_limit:
            return CONTEXT_LENGTH
        if not self.fault_rules:
            return None
        key = request_key(request)
        with self._lock:
            occurrence = self._seen[key]
            self._seen[key] += 1
        for i, rule in enumerate(self.fault_rules):
            if not rule.rate or not rule.matches(request):
                continue
            u, n = _unit(str(self.fault_seed).encode(), str(i).encode(), str(occurrence).encode(), key)
            if u < rule.rate:
                return rule.kinds[n % len(rule.kinds)]
        return None

    def _record_fault(self, request: Request, kind: str) -> None:
        with self._lock:
            self.faults[kind] += 1
            self.fault_routes[request.model, request.protocol or UNKNOWN, kind] += 1
        self._log(request, kind)

    async def _inject(self, http: web.Request, request: Request, kind: str) -> web.StreamResponse:
        if kind == CONTEXT_LENGTH:
            tokens = _prompt_tokens(request)
            limit = self.context_limit or max(1, tokens - 1)
            message = (
                f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
                f"{tokens} tokens. Please reduce the length of the messages."
            )
            return _error(400, message, "invalid_request_error", code="context_length_exceeded", param="messages")
        if kind == TIMEOUT:
            await asyncio.sleep(self.hang)
            return _drop(http, reset=False)
        await asyncio.sleep(self._delay())
        if kind == HTTP_500:
            return _error(500, "The server had an error while processing your request.", "server_error")
        if kind == HTTP_503:
            return _error(503, "The server is overloaded, please try again later.", "server_error", code="overloaded")
        if kind == RATE_LIMIT:
            response = _error(429, "Rate limit reached for requests.", "requests", code="rate_limit_exceeded")
            response.headers["Retry-After"] = str(math.ceil(self.retry_after))
            response.headers["retry-after-ms"] = str(int(self.retry_after * 1000))
            return response
        if kind == RESET:
            return _drop(http, reset=True)
        # TRUNCATED: a 200 that announces the whole completion and sends half of it
        payload = json.dumps(self._completion(request, UNKNOWN_REPLY, "stop")).encode()
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.content_length = len(payload)
        await response.prepare(http)
        await response.write(payload[: len(payload) // 2])
        return _drop(http, reset=False)

    def _count_connection(self) -> None:
        open_now = self.open_connections
        if open_now > self.peak_connections:
            self.peak_connections = open_now

    def _log(self, request: Request, outcome: str) -> None:
        if self._log_file is None:
            return
        line = json.dumps({
            "n": request.number, "t": round(time.time(), 3), "model": request.model,
            "protocol": request.protocol or UNKNOWN, "outcome": outcome, "key": request_key(request).hex()[:16],
        })  # fmt: skip
        with self._lock:
            if self._log_file is not None:
                self._log_file.write(line + "\n")

    def _delay(self) -> float:
        if not self.jitter:
            return self.latency
        with self._lock:
            offset = self._random.uniform(-self.jitter, self.jitter)
        return max(0.0, self.latency + offset)

    def _answer(self, request: Request) -> tuple[str, str]:
        """(reply text, finish reason)."""
        window = self.engine.context_window
        if window and sum(len(m.text) for m in request.messages) // 4 + 1 > window:
            return "", "length"
        if request.protocol is None:
            return UNKNOWN_REPLY, "stop"
        return self.engine.reply_for(request.protocol, request.messages, request.seed), "stop"

    def _completion(self, request: Request, text: str, finish: str) -> dict[str, Any]:
        prompt_tokens = sum(len(m.text) for m in request.messages) // 4 + 1
        completion_tokens = estimate_tokens(text) if text else 0
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    async def _stream(self, http: web.Request, completion: dict[str, Any], body: dict[str, Any]) -> web.StreamResponse:
        """The completion as server-sent events: one content chunk, then (if asked) the usage."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(http)
        head = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        choice = completion["choices"][0]
        chunks = [
            head | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": choice["message"]["content"]},
                                 "logprobs": None, "finish_reason": None}]},  # fmt: skip
            head | {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}]},
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(head | {"choices": [], "usage": completion["usage"]})
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


#: what llama-cpp-python's server (0.3.x) answers to ``response_format={"type": "json_schema", ...}``
LLAMA_CPP_JSON_SCHEMA_ERROR = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input should be 'text' or "
    "'json_object' [type=literal_error, input_value='json_schema', input_type=str]"
)


def _error(status: int, message: str, kind: str, code: str | None = None, param: str | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "param": param, "code": code}}, status=status)


def _prompt_tokens(request: Request) -> int:
    return sum(len(m.text) for m in request.messages) // 4 + 1


class _Dropped(web.StreamResponse):
    """What a handler returns after it closed the connection itself: nothing more is written."""

    async def prepare(self, request: web.BaseRequest) -> None:  # type: ignore[override]
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None


def _drop(http: web.Request, reset: bool) -> web.StreamResponse:
    """Close the request's connection: a TCP reset (``SO_LINGER`` 0, abort) or a plain close after
    what was written so far."""
    transport = http.transport
    if transport is not None:
        if reset:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            transport.abort()
        else:
            transport.close()
    return _Dropped()


# ---------------------------------------------------------------------------------------------
# command line


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _fault(text: str) -> Fault:
    try:
        return Fault.parse(text)
    except ValueError as ex:
        raise argparse.ArgumentTypeError(str(ex)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bedside.loopback",
        description="Serve bedside's scripted roles as an OpenAI-compatible endpoint on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free port; default 8765)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply (default 0)")
    parser.add_argument("--jitter", type=float, default=0.0, help="± uniform seconds around --latency (default 0)")
    parser.add_argument(
        "--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
        help="a bedside/scripted behaviour option for every role (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--fault", type=_fault, action="append", default=[], metavar="KINDS[:RATE[:MODELS[:PROTOCOLS]]]",
        help=f"a fault rule (repeatable), e.g. http_500,reset:0.1 or not_json:1::discharge.monitor; kinds: {', '.join(FAULT_KINDS)}",
    )  # fmt: skip
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws (default 0)")
    parser.add_argument("--hang", type=float, default=5.0, help="seconds a 'timeout' fault stalls (default 5)")
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds of a 429 (default 1)")
    parser.add_argument("--context-limit", type=int, default=None, help="estimated prompt tokens above which a 400 context_length_exceeded is returned")
    parser.add_argument("--request-log", default=None, metavar="FILE", help="append one JSON line per request to FILE")
    parser.add_argument("--no-json-schema", action="store_true",
                        help="reject JSON-schema response formats like llama-cpp-python's server (500)")
    args = parser.parse_args(argv)
    try:
        server = LoopbackServer(
            port=args.port, latency=args.latency, jitter=args.jitter, options=dict(args.option),
            faults=args.fault, fault_seed=args.fault_seed, hang=args.hang, retry_after=args.retry_after,
            context_limit=args.context_limit, request_log=args.request_log, json_schema=not args.no_json_schema,
        )  # fmt: skip
    except ValueError as ex:
        parser.error(str(ex))
    with server:
        print(f"bedside loopback server: {server.base_url}", flush=True)
        print("point Inspect's openai-api provider at it with:", flush=True)
        for key, value in server.env.items():
            print(f"  export {key}={value}", flush=True)
        print(
            "  inspect eval bedside/discharge --model openai-api/loopback/educator "
            "--model-role patient=openai-api/loopback/patient --model-role monitor=openai-api/loopback/monitor "
            "--model-role grader=openai-api/loopback/grader",
            flush=True,
        )
        print(f"counters: GET http://{server.host}:{server.port}/stats", flush=True)
        for rule in server.fault_rules:
            print(f"fault: {','.join(rule.kinds)} at rate {rule.rate} (models: {sorted(rule.models) or 'any'}, "
                  f"protocols: {sorted(rule.protocols) or 'any'}; seed {server.fault_seed})", flush=True)  # fmt: skip
        print("Ctrl-C to stop.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            print(f"served {server.total_calls} requests: {dict(server.calls)}", flush=True)
            if server.faults:
                print(f"faults injected: {dict(server.faults)}", flush=True)


if __name__ == "__main__":
    main()
