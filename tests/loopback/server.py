"""A loopback OpenAI-compatible HTTP server that plays every bedside role with the scripted replies.

It lets a bedside task run through Inspect's real ``openai-api/...`` provider (HTTP, the ``openai``
client, retries, usage accounting) — the same code path as a user's API key or a vLLM server — with
no network and no model weights. Point Inspect at it like at any OpenAI-compatible endpoint::

    python -m tests.loopback --port 8765   # in the repository root; prints the base URL and the variables below

    LOOPBACK_API_KEY=x LOOPBACK_BASE_URL=http://127.0.0.1:8765/v1 BEDSIDE_LOOPBACK_URL=http://127.0.0.1:8765/v1 \\
    inspect eval bedside/<task> --model openai-api/loopback/<model under test> \\
        --model-role <role>=openai-api/loopback/<role> ...     # every role of the benchmark

(``openai-api/<service>/<model>`` reads ``<SERVICE>_API_KEY`` and ``<SERVICE>_BASE_URL``; any key is
accepted. The model name after the service is free: it only labels the calls. A benchmark's roles are
its descriptor's ``roles``; the command line prints the command for the first registered benchmark.)

Endpoints: ``POST /v1/chat/completions`` (Chat Completions request and response shape; ``stream``
is answered with one server-sent content chunk and a usage chunk, although Inspect's ``openai-api``
provider does not stream unless asked with ``-M stream=true``), ``GET /v1/models``, and OpenAI's Files and
Batches endpoints, which Inspect's batch mode calls for ``openai/...`` models
(``GenerateConfig(batch=...)``; :mod:`tests.loopback.batches`: each request line is answered as the live
endpoint answers it; ``batch_delay`` seconds until a batch ends; a batch that expires or fails as faults).

How it answers: the request's messages become Inspect ``ChatMessage``\\ s; the call's protocol and its
situation (what the role reads about the call from the sample it runs in) come with the request on
the test channel only: when the model's base URL is one ``BEDSIDE_LOOPBACK_URL`` names (which
:attr:`LoopbackServer.env` exports), bedside's Inspect hook adds the ``X-Bedside-Protocol`` header (the
name) and the ``bedside_call`` body field (name and situation; :mod:`loopback_channel`); a
JSON-schema ``response_format`` names the protocol too (``.`` -> ``_``). The server never reads the
prompt. The reply is :meth:`bedside.providers.scripted.ScriptedEngine.reply_for` with the request's
``seed`` (0 if absent) and situation (``{}`` if absent: the scripts' defaults), so it is deterministic
and protocol-valid for every role; prompts of no known protocol get :data:`UNKNOWN_REPLY`. The
scripted engine's behaviour options (``LoopbackServer(options=...)``, ``--option key=value``) apply to
every role; the generic option ``context_window`` (estimated tokens) ends longer prompts with
``finish_reason="length"``.

Token usage is estimated as characters / 4 (+1), as ``bedside/scripted`` does. ``latency`` (seconds,
optionally ± uniform ``jitter``) delays each reply with ``asyncio.sleep``, so concurrent requests
overlap as they would against a real server.

In tests and benchmarks::

    with LoopbackServer(latency=0.05) as server:
        os.environ.update(server.env)
        ...
        server.calls["<benchmark>.patient"]  # requests answered per protocol
        server.routes["patient", "<benchmark>.patient"]  # ... per (model name, protocol)

Inspect memoizes a model made from a model string for the whole process, keyed by the string (not
by the environment): to run several servers one after another in one process, build the models
with ``get_model("openai-api/loopback/<role>", memoize=False)`` (``tests/loopback_helpers.py``), or
a memoized model would keep calling the first server's port.

Every request passes through :meth:`LoopbackServer._intercept` before it is answered (a hook for
subclasses: the scale benchmark sets its per-request delay there), then through the server's fault
plan.

Fault injection (``LoopbackServer(faults=[...])``, ``--fault SPEC``), the ``context_limit`` and the
request log are described in :mod:`tests.loopback.requests`; the command line is
:mod:`tests.loopback.__main__` (``python -m tests.loopback``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from aiohttp import web

from bedside.providers.scripted import ScriptedEngine
from bedside.structured import PROBE_NAME
from loopback_channel import BODY_KEY, HEADER, LOOPBACK_URL_ENV, register
from tests.loopback.batches import Batches
from tests.loopback.requests import (  # noqa: F401  (re-exported: the server's public names)
    BATCH_EXPIRED,
    BATCH_FAILED,
    BATCH_FAULTS,
    CONTENT_FAULTS,
    CONTEXT_LENGTH,
    FAULT_KINDS,
    HTTP_500,
    HTTP_503,
    LLAMA_CPP_JSON_SCHEMA_ERROR,
    MISSING_FIELDS,
    NOT_JSON,
    NOT_JSON_REPLY,
    RATE_LIMIT,
    RESET,
    TIMEOUT,
    TRANSPORT_FAULTS,
    TRUNCATED,
    UNKNOWN,
    Fault,
    Request,
    _drop,
    _error,
    _prompt_tokens,
    _unit,
    estimate_tokens,
    protocol_from_schema_name,
    request_key,
    spoil,
    to_chat_messages,
)

# a process that starts a server (a test) may call it: the test channel's hook is registered here
register()

ENV_API_KEY = "LOOPBACK_API_KEY"
ENV_BASE_URL = "LOOPBACK_BASE_URL"
#: the reply to a prompt of no bedside protocol
UNKNOWN_REPLY = "The bedside loopback server has no script for this prompt (it only plays bedside's roles)."
#: models listed by ``GET /v1/models`` (any other name is accepted too)
MODELS = ("educator", "patient", "monitor", "grader", "environment", "examinee", "doctor")


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
        batch_delay: float = 0.0,
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
        self._stopping: asyncio.Event | None = None  # set when the server stops: ends every hang at once
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        #: OpenAI's Files and Batches endpoints (:mod:`tests.loopback.batches`); a batch ends ``batch_delay``
        #: seconds after its creation
        self.batches = Batches(self, batch_delay)

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
            self._stopping = asyncio.Event()
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
        if self._stopping is not None:  # a hanging request would otherwise hold the shutdown for its hang
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread, self._loop, self._runner, self._stopping = None, None, None, None

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
        self.batches.reset()

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
            } | self.batches.stats()

    async def _serve(self) -> None:
        if self.request_log is not None:
            self._log_file = self.request_log.open("a", encoding="utf-8", buffering=1)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_get("/stats", self._stats)
        self.batches.routes(app)
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
        self._count_answer(request)
        completion = self._completion(request, text, finish)
        if body.get("stream"):
            return await self._stream(http, completion, body)
        return web.json_response(completion)

    def _count_answer(self, request: Request) -> None:
        with self._lock:
            self.calls[request.protocol or UNKNOWN] += 1
            self.routes[request.model, request.protocol or UNKNOWN] += 1
            self.found_by[request.found_by] += 1

    def _read(self, body: dict[str, Any], header: str | None = None) -> Request:
        messages = to_chat_messages(body["messages"])
        # as the test channel's hook sends it (loopback_channel): a body field; in a batch's request line,
        # where Inspect's batcher leaves the call's extra_body as it is, under "extra_body"
        call = body.get(BODY_KEY) or (body.get("extra_body") or {}).get(BODY_KEY)
        situation = call.get("situation") if isinstance(call, dict) else None
        named = call.get("name") if isinstance(call, dict) else None
        name, found_by = protocol_from_schema_name(body.get("response_format")), "response_format"
        if name is None and header:
            name, found_by = header, "header"
        elif name is None:
            name, found_by = (named, "body") if named else (None, UNKNOWN)
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
            situation=situation if isinstance(situation, dict) else {},
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
        if not any(set(rule.kinds) - set(BATCH_FAULTS) for rule in self.fault_rules):
            return None
        key = request_key(request)
        with self._lock:
            occurrence = self._seen[key]
            self._seen[key] += 1
        for i, rule in enumerate(self.fault_rules):
            if not rule.rate or not rule.matches(request) or set(rule.kinds) <= set(BATCH_FAULTS):
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
            with contextlib.suppress(TimeoutError):  # the hang, or until the server stops
                await asyncio.wait_for((self._stopping or asyncio.Event()).wait(), self.hang)
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
        stream = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        stream.content_length = len(payload)
        await stream.prepare(http)
        await stream.write(payload[: len(payload) // 2])
        return _drop(http, reset=False)

    def _count_connection(self) -> None:
        open_now = self.open_connections
        if open_now > self.peak_connections:
            self.peak_connections = open_now

    def _log(self, request: Request, outcome: str) -> None:
        if self._log_file is None:
            return
        line = json.dumps(
            {
                "n": request.number,
                "t": round(time.time(), 3),
                "model": request.model,
                "protocol": request.protocol or UNKNOWN,
                "outcome": outcome,
                "key": request_key(request).hex()[:16],
            }
        )
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
        return self.engine.reply_for(request.protocol, request.messages, request.seed, request.situation), "stop"

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
            head
            | {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": choice["message"]["content"]},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ]
            },
            head | {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}]},
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(head | {"choices": [], "usage": completion["usage"]})
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
