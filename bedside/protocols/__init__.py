"""Which bedside protocol a prompt belongs to, and the JSON schema its reply must follow.

Both offline providers read the role from the prompt they are given: ``bedside/scripted`` to pick
its script, ``bedside/local`` to constrain JSON output with the schema. Each benchmark declares its
protocols in ``bedside/protocols/<benchmark>.py`` as ``PROTOCOLS``; a marker is the opening
sentence of a prompt in ``prompts/`` (the tests check that every marker occurs in its prompt).
This package finds every such module by itself.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser


@dataclass(frozen=True)
class Protocol:
    name: str  # "<benchmark>.<role>", e.g. "discharge.patient"
    marker: str  # text that identifies the protocol
    where: str  # "system" (any system message) or "user" (the last user message)
    #: JSON schema of the reply (None = prose), or a function of the prompt's messages that builds it
    #: (e.g. a checklist whose required keys are the question ids listed in the prompt)
    schema: dict[str, Any] | Callable[[list[ChatMessage] | None], dict[str, Any]] | None = None
    #: reply length a local model needs for this protocol (None = the provider's default)
    max_tokens: int | None = None

    def json_schema(self, messages: list[ChatMessage] | None = None) -> dict[str, Any] | None:
        return self.schema(messages) if callable(self.schema) else self.schema


@lru_cache(maxsize=1)
def all_protocols() -> tuple[Protocol, ...]:
    """Every benchmark's protocols, user-message protocols first (they refine a system role)."""
    found: list[Protocol] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.extend(getattr(module, "PROTOCOLS", ()))
    names = [p.name for p in found]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise RuntimeError(f"protocol names declared twice: {sorted(duplicated)}")
    return tuple(sorted(found, key=lambda p: p.where != "user"))


def system_text(messages: list[ChatMessage]) -> str:
    return "\n".join(m.text for m in messages if isinstance(m, ChatMessageSystem))


def last_user_text(messages: list[ChatMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ChatMessageUser):
            return m.text
    return ""


def detect(messages: list[ChatMessage]) -> Protocol | None:
    system, user = system_text(messages), last_user_text(messages)
    for protocol in all_protocols():
        haystack = system if protocol.where == "system" else user
        if protocol.marker in haystack:
            return protocol
    return None
