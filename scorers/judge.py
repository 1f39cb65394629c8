"""Calling an LLM judge (the ``grader`` role) and reading its JSON, the same way for every scorer.

``grader()`` resolves the role at temperature 0 (the DischargeBench paper's judge setting), with the
visible fallback of :mod:`bedside.roles`. ``ask_judge()`` sends a prompt, reads the reply with a
caller-supplied ``parse`` (which raises ``ValueError`` on anything unusable), and retries an
unreadable reply with a fresh sample (``seed = attempt``) up to ``retries`` times. It never
invents a value: a reply that stays unreadable (or a model failure) comes back with ``value=None``
and the reason, so that the scorer marks that sub-score *unscored* (NaN, excluded from metrics and
counted by Inspect as unscored) and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from inspect_ai.event import ModelEvent
from inspect_ai.log import transcript
from inspect_ai.model import CachePolicy, ChatMessage, ChatMessageUser, GenerateConfig, Model, ModelOutput

from bedside.protocols import Protocol
from bedside.roles import role_model
from bedside.solvers.encounter import GenerationError, attempt_config, generate_checked

T = TypeVar("T")

UNSCORED = float("nan")

#: For judge calls that do not depend on the model under test (reading the discharge note): cached
#: without expiry and across epochs, so a second educator on the same cases re-uses them.
REFERENCE_CACHE = CachePolicy(expiry=None, per_epoch=False)


def grader(role: str = "grader") -> tuple[Model, bool]:
    """The judge model (temperature 0) and whether it fell back to the model under test."""
    return role_model(role, GenerateConfig(temperature=0.0))


@dataclass
class JudgeResult(Generic[T]):
    value: T | None
    replies: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


async def ask_judge(
    model: Model,
    prompt: str | list[ChatMessage],
    parse: Callable[[str], T] | None = None,
    retries: int = 2,
    cache: bool | CachePolicy = False,
    protocol: Protocol | None = None,
) -> JudgeResult[T]:
    """Ask ``model``; ``parse`` the reply (default: the ``protocol``'s reply model); retry
    unreadable replies; never raise for bad replies. The call is tagged with ``protocol``. With
    ``cache``, a reply that turns out unreadable is removed from Inspect's cache at once, so that a
    faulty reply is never re-used by a later run."""
    if parse is None:
        if protocol is None or protocol.reply is None:
            raise TypeError("ask_judge needs parse= or a protocol with a reply model")
        parse = protocol.parse  # type: ignore[assignment]
    messages = [ChatMessageUser(content=prompt)] if isinstance(prompt, str) else prompt
    result: JudgeResult[T] = JudgeResult(value=None)
    for attempt in range(retries + 1):
        config = attempt_config(attempt)
        if cache:
            config = config.merge(GenerateConfig(cache=cache))
        try:
            output = await generate_checked(model, messages, config, protocol)
        except GenerationError as ex:
            result.error = f"judge call failed: {ex}"
            return result
        result.replies.append(output.completion)
        try:
            result.value = parse(output.completion)
            result.error = None
            return result
        except ValueError as ex:
            result.error = f"unreadable judge reply after {attempt + 1} tries: {ex}"
            if cache:
                forget_cached(model, output, cache)
    return result


def forget_cached(model: Model, output: ModelOutput, cache: bool | CachePolicy) -> bool:
    """Remove the cache entry that holds ``output`` (an unreadable reply). The entry's key is
    rebuilt from the call's ``ModelEvent`` exactly as Inspect builds it (same config, input,
    tools and policy). True if an entry was removed."""
    from inspect_ai.model._cache import CacheEntry, _cache_entry_path

    for event in reversed(transcript().events):
        if isinstance(event, ModelEvent) and event.cache in ("write", "read") and event.output.completion == output.completion:
            entry = CacheEntry(
                base_url=model.api.base_url,
                config=event.config,
                input=event.input,
                model=str(model),
                policy=cache if isinstance(cache, CachePolicy) else CachePolicy(),
                tool_choice=event.tool_choice,
                tools=event.tools,
            )
            path = _cache_entry_path(entry)
            if path is not None and path.exists():
                path.unlink()
                transcript().info({"removed_from_cache": str(path.name), "reason": "unreadable reply"}, source="cache")
                return True
            return False
    return False
