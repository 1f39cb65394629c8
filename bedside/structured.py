"""``-T structured_output=true`` fails fast on a server that does not accept a JSON-schema response format.

Some OpenAI-compatible servers accept only ``{"type": "text"}`` or ``{"type": "json_object"}``
(llama-cpp-python's server answers ``500 ... Input should be 'text' or 'json_object'`` on every
structured call). A 500 is retried by Inspect with back-off, so such a run used to retry for many
minutes with nothing on screen. Before the first structured call of a sample, :func:`check_models`
sends one small probe per model and server (once per process, without retries) and stops the run
with one line naming the option and the server's message when the server rejects the format.
"""

from __future__ import annotations

from typing import Any

import anyio
from inspect_ai.model import GenerateConfig, Model

from bedside.compat import active_model
from bedside.params import SetupError

#: the probe's schema name (the loopback test server answers it without counting it as a call)
PROBE_NAME = "bedside_probe"

#: words in a server's error that show it is about the response format (not a transient failure)
FORMAT_WORDS = ("json_schema", "response_format", "json_object", "input should be")

_verdicts: dict[str, str | None] = {}  # (base url, model) -> the server's message, or None when accepted
_lock: anyio.Lock | None = None


class StructuredOutputUnsupported(SetupError):
    """The server rejects the JSON-schema response format that ``-T structured_output=true`` asks for."""


def message(model: str, server_message: str) -> str:
    first = " ".join(server_message.split())[:300]
    return (
        f"-T structured_output=true: {model} does not accept a JSON-schema response format "
        f"(the server answered: {first}); run without structured_output or use a server that supports it"
    )


def _key(model: Model) -> str:
    return f"{getattr(model.api, 'base_url', '')}|{model}"


def _request(model: Model) -> dict[str, Any]:
    return dict(
        model=model.api.service_model_name(),
        messages=[{"role": "user", "content": 'Answer {"ok": true}'}],
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": PROBE_NAME,
                "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
            },
        },
        max_tokens=16,
    )


def _rejection(ex: Exception) -> str | None:
    """The server's message when ``ex`` is a rejection of the response format; None for anything else (a
    transient failure: the run's own calls report it)."""
    import openai

    if isinstance(ex, openai.APIStatusError):
        text = f"HTTP {ex.status_code}: {ex.message}"
        return text if any(w in text.lower() for w in FORMAT_WORDS) else None
    return None


async def _probe(model: Model) -> str | None:
    """One structured request without retries: the server's message when it rejects the format."""
    import openai

    client = getattr(model.api, "client", None)
    if not isinstance(client, openai.AsyncOpenAI):
        return None  # not an OpenAI-compatible client: Inspect's provider handles structured output
    try:
        await client.with_options(max_retries=0, timeout=60.0).chat.completions.create(**_request(model))
    except openai.OpenAIError as ex:
        return _rejection(ex)
    return None


def _probe_sync(model: Model) -> str | None:
    import openai

    client = getattr(model.api, "client", None)
    if not isinstance(client, openai.AsyncOpenAI):
        return None
    sync = openai.OpenAI(api_key=client.api_key, base_url=client.base_url, max_retries=0, timeout=60.0)
    try:
        sync.chat.completions.create(**_request(model))
    except openai.OpenAIError as ex:
        return _rejection(ex)
    finally:
        sync.close()
    return None


def run_models() -> list[Model]:
    """The model under test and the bound role models of the eval being set up (empty outside one)."""
    from inspect_ai.model import model_roles

    model = active_model()
    if model is None:
        return []
    try:
        roles = [m for v in model_roles().values() for m in (v if isinstance(v, list) else [v])]
    except Exception:
        roles = []
    return [model, *roles]


def check_run_models() -> None:
    """While a task is built by ``inspect eval`` (the run's models are known): probe each model's server
    once and raise :class:`StructuredOutputUnsupported` (printed by the CLI as one line, no traceback)."""
    for model in run_models():
        key = _key(model)
        if key not in _verdicts:
            _verdicts[key] = _probe_sync(model)
        if _verdicts[key]:
            raise StructuredOutputUnsupported(message(str(model), _verdicts[key] or ""))


async def check_models(models: list[Model]) -> None:
    """Probe each model's server once (per process); :class:`StructuredOutputUnsupported` on rejection."""
    global _lock
    if _lock is None:
        _lock = anyio.Lock()
    async with _lock:
        for model in models:
            key = _key(model)
            if key not in _verdicts:
                _verdicts[key] = await _probe(model)
            if _verdicts[key]:
                raise StructuredOutputUnsupported(message(str(model), _verdicts[key] or ""))


def structured_output_rejected(ex: BaseException, config: GenerateConfig) -> StructuredOutputUnsupported | None:
    """A call that asked for structured output and failed with a response-format error (after Inspect's
    retries): the same one-line error as the probe's."""
    if config.response_schema is None:
        return None
    text = str(ex)
    cause: Any = getattr(ex, "last_attempt", None)
    if cause is not None and getattr(cause, "failed", False):
        text = str(cause.exception())
    if any(w in text.lower() for w in FORMAT_WORDS):
        return StructuredOutputUnsupported(message("the model", text))
    return None
