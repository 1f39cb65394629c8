"""Moved: the judges' calls live in the model-call layer, :mod:`bedside.calls` (``grader``, ``ask``,
``UNSCORED``, ``REFERENCE_CACHE``, ``forget_cached``). This module keeps the old names importable;
``ask_judge`` is :func:`bedside.calls.ask` with the old argument order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inspect_ai.model import CachePolicy, ChatMessage, Model

from bedside.calls import REFERENCE_CACHE, UNSCORED, Answer, JudgeResult, ask, forget_cached, grader  # noqa: F401
from bedside.protocols import Protocol


async def ask_judge(
    model: Model,
    prompt: str | list[ChatMessage],
    parse: Callable[[str], Any] | None = None,
    retries: int = 2,
    cache: bool | CachePolicy = False,
    protocol: Protocol | None = None,
) -> Answer[Any]:
    """:func:`bedside.calls.ask` (old signature)."""
    if protocol is None:
        raise TypeError("ask_judge needs a protocol")
    return await ask(model, prompt, protocol, parse=parse, retries=retries, cache=cache)
