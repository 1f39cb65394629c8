"""What the scripted model's scripts share (each benchmark's scripts are in its package, e.g.
``bedside/<benchmark>/scripted.py``, with ``Options`` and ``HANDLERS``; :mod:`bedside.testing.scripted`).

A script reads what its call is about from the call's render context (:func:`context`, carried in the
protocol tag) and the conversation from the chat messages' roles; never from rendered prompt text."""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageUser

from bedside.protocols import tag_of


def context(messages: list[ChatMessage]) -> dict[str, Any]:
    """The call's render context (what its prompt was rendered from), from its protocol tag."""
    tag = tag_of(messages)
    return tag.context if tag is not None else {}


def last_user_text(messages: list[ChatMessage]) -> str:
    """The latest conversation turn the role was shown (its last user message)."""
    for m in reversed(messages):
        if isinstance(m, ChatMessageUser):
            return m.text
    return ""
