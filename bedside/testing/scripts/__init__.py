"""The scripted model's per-benchmark scripts (``Options`` and ``HANDLERS`` per module).

A script reads what its call is about from the call's render context (:func:`context`, carried in the
protocol tag) and the conversation from the chat messages' roles; never from rendered prompt text."""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser

from bedside.protocols import tag_of


def context(messages: list[ChatMessage]) -> dict[str, Any]:
    """The call's render context (what its prompt was rendered from), from its protocol tag."""
    tag = tag_of(messages)
    return tag.context if tag is not None else {}


def system_text(messages: list[ChatMessage]) -> str:
    return "\n".join(m.text for m in messages if isinstance(m, ChatMessageSystem))


def last_user_text(messages: list[ChatMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ChatMessageUser):
            return m.text
    return ""
