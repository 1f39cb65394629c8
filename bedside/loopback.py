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

How it answers: the request's messages become Inspect ``ChatMessage``\\ s and the protocol is found
as a real model would find its instructions, from the prompt alone: by the protocol's marker sentence
(:func:`bedside.protocols.detect`). When the request carries a JSON-schema ``response_format``
(``-T structured_output=true``), its ``name`` (the protocol name with ``.`` replaced by ``_``) names
the protocol directly. The reply is :meth:`bedside.providers.scripted.ScriptedEngine.reply_for` with
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

Every request passes through :meth:`LoopbackServer._intercept` before it is answered: the one place
where fault injection (HTTP errors, rate limits, timeouts) is to be added.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from bedside.protocols import detect
from bedside.providers.scripted import ScriptedEngine

ENV_API_KEY = "LOOPBACK_API_KEY"
ENV_BASE_URL = "LOOPBACK_BASE_URL"
#: the reply to a prompt of no bedside protocol
UNKNOWN_REPLY = "The bedside loopback server has no script for this prompt (it only plays bedside's roles)."
#: the ``calls`` key of requests that matched no protocol
UNKNOWN = "<unknown>"
#: models listed by ``GET /v1/models`` (any other name is accepted too)
MODELS = ("educator", "patient", "monitor", "grader", "environment", "examinee", "doctor")


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


@dataclass
class Request:
    """One chat-completions request as the handler sees it (what fault injection can act on)."""

    body: dict[str, Any]
    messages: list[ChatMessage]
    protocol: str | None
    seed: int
    model: str
    number: int  # 1-based, in order of arrival
    found_by: str  # how the protocol was found: "response_format", "marker" or UNKNOWN


class LoopbackServer:
    """An OpenAI-compatible server on 127.0.0.1 in a background thread (its own event loop).

    Use as a context manager (or :meth:`start` / :meth:`stop`). ``port=0`` picks a free port;
    ``latency`` and ``jitter`` (seconds) delay each reply by ``latency ± U(0, jitter)`` (never
    negative); ``options`` are ``bedside/scripted`` behaviour options for every role.
    """

    def __init__(
        self,
        port: int = 0,
        latency: float = 0.0,
        jitter: float = 0.0,
        options: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        if latency < 0 or jitter < 0:
            raise ValueError("latency and jitter must be >= 0")
        self.host, self.port = host, port
        self.latency, self.jitter = latency, jitter
        self.options = dict(options or {})
        self.engine = ScriptedEngine(**self.options)  # validates the options before the server starts
        self.calls: Counter[str] = Counter()  # requests answered, per protocol name (UNKNOWN: none)
        self.routes: Counter[tuple[str, str]] = Counter()  # requests per (model name, protocol)
        self.found_by: Counter[str] = Counter()  # "response_format", "marker" or UNKNOWN, per request
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
        return {ENV_API_KEY: "loopback", ENV_BASE_URL: self.base_url}

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
        """Forget the call counters."""
        with self._lock:
            self.calls.clear()
            self.routes.clear()
            self.found_by.clear()

    @property
    def total_calls(self) -> int:
        with self._lock:
            return sum(self.calls.values())

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/v1/models", self._list_models)
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

    async def _chat_completions(self, http: web.Request) -> web.StreamResponse:
        try:
            body = await http.json()
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("the request needs a 'messages' list")
        except (ValueError, json.JSONDecodeError) as ex:
            return _error(400, f"invalid request: {ex}", "invalid_request_error")
        request = self._read(body)

        intercepted = await self._intercept(request)
        if intercepted is not None:
            return intercepted

        await asyncio.sleep(self._delay())
        try:
            text, finish = self._answer(request)
        except Exception as ex:  # a script that cannot answer this prompt: deterministic, so a 400
            # (which clients do not retry) rather than a 500 (which they retry for minutes)
            return _error(400, f"the scripted {request.protocol} reply failed: {ex!r}", "loopback_script_error")
        with self._lock:
            self.calls[request.protocol or UNKNOWN] += 1
            self.routes[request.model, request.protocol or UNKNOWN] += 1
            self.found_by[request.found_by] += 1
        completion = self._completion(request, text, finish)
        if body.get("stream"):
            return await self._stream(http, completion, body)
        return web.json_response(completion)

    def _read(self, body: dict[str, Any]) -> Request:
        messages = to_chat_messages(body["messages"])
        name, found_by = protocol_from_schema_name(body.get("response_format")), "response_format"
        if name is None:
            found = detect(messages)
            name, found_by = (found.name, "marker") if found is not None else (None, UNKNOWN)
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
        """The one place for fault injection: a response here (an HTTP error, a rate limit) replaces
        the answer, and a delay here stands in for a timeout. None: answer normally."""
        return None

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


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": None}}, status=status)


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
    args = parser.parse_args(argv)
    server = LoopbackServer(port=args.port, latency=args.latency, jitter=args.jitter, options=dict(args.option))
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
        print("Ctrl-C to stop.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            print(f"served {server.total_calls} requests: {dict(server.calls)}", flush=True)


if __name__ == "__main__":
    main()
