"""The scripted model's per-benchmark scripts (``Options`` and ``HANDLERS`` per module)."""

from __future__ import annotations

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser


def system_text(messages: list[ChatMessage]) -> str:
    return "\n".join(m.text for m in messages if isinstance(m, ChatMessageSystem))


def last_user_text(messages: list[ChatMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ChatMessageUser):
            return m.text
    return ""
