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

from inspect_ai.model import CachePolicy, ChatMessage, ChatMessageUser, GenerateConfig, Model

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
    parse: Callable[[str], T],
    retries: int = 2,
    cache: bool | CachePolicy = False,
) -> JudgeResult[T]:
    """Ask ``model``; ``parse`` the reply; retry unreadable replies; never raise for bad replies."""
    messages = [ChatMessageUser(content=prompt)] if isinstance(prompt, str) else prompt
    result: JudgeResult[T] = JudgeResult(value=None)
    for attempt in range(retries + 1):
        config = attempt_config(attempt)
        if cache:
            config = config.merge(GenerateConfig(cache=cache))
        try:
            output = await generate_checked(model, messages, config)
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
    return result
