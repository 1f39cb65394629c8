"""Requests to the loopback server (:mod:`tests.loopback.server`) and what can go wrong with them:
OpenAI chat messages read as Inspect messages, the protocol found for a request, the fault rules and
the error and dropped-connection responses.

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
``batch_expired``  a whole batch of the Batch API expires half done; ``batch_failed``: it fails
                   validation (drawn once per batch, :mod:`tests.loopback.batches`, which also
                   says what the request faults become inside a batch)
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

import hashlib
import json
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

#: the ``calls`` key of requests that matched no protocol
UNKNOWN = "<unknown>"

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
#: faults of a whole batch (the Batch API, :mod:`tests.loopback.batches`): drawn once per batch
BATCH_EXPIRED = "batch_expired"
BATCH_FAILED = "batch_failed"
BATCH_FAULTS = (BATCH_EXPIRED, BATCH_FAILED)
FAULT_KINDS = (*TRANSPORT_FAULTS, *CONTENT_FAULTS, CONTEXT_LENGTH, *BATCH_FAULTS)
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
    """The protocol named by a JSON-schema ``response_format`` (``<benchmark>_judge_quality`` ->
    ``<benchmark>.judge_quality``: benchmark names hold no ``_``), or None."""
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
        kinds = tuple(
            dict.fromkeys(k.strip() for k in (kinds.split(",") if isinstance(kinds, str) else kinds) if k.strip())
        )
        unknown = [k for k in kinds if k not in FAULT_KINDS]
        if not kinds or unknown:
            raise ValueError(f"unknown fault kind(s) {unknown or kinds!r}; known: {list(FAULT_KINDS)}")
        if 0 < len(set(kinds) & set(BATCH_FAULTS)) < len(kinds):
            raise ValueError(f"a rule of batch faults {list(BATCH_FAULTS)} holds no request fault, got {list(kinds)}")
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= float(rate) <= 1.0:
            raise ValueError(f"a fault rate must be a number in [0, 1], got {rate!r}")
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "rate", float(rate))
        object.__setattr__(self, "models", _names(models))
        object.__setattr__(self, "protocols", _names(protocols))

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``KINDS[:RATE[:MODELS[:PROTOCOLS]]]``, each list comma-separated; an empty field means
        "any". E.g. ``http_500,reset:0.1``, ``not_json:1::<benchmark>.monitor``,
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

    return json.dumps(
        [drop_first(v) for v in value] if isinstance(value, list) else drop_first(value), ensure_ascii=False
    )


@dataclass
class Request:
    """One chat-completions request as the handler sees it (what fault injection can act on)."""

    body: dict[str, Any]
    messages: list[ChatMessage]
    protocol: str | None
    seed: int
    model: str
    number: int  # 1-based, in order of arrival
    found_by: str  # how the protocol was found: "header", "response_format", "body" (a batch line) or UNKNOWN
    #: what the role reads about the call (bedside.providers.scripts), as the test channel's hook sent it
    situation: dict[str, Any] = field(default_factory=dict)


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

    async def prepare(self, request: web.BaseRequest) -> None:
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
