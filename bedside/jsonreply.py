"""Reading JSON out of model replies, with light repair.

Models wrap JSON in code fences, add a preamble, put raw line breaks inside JSON strings, or
answer in prose. :func:`extract_json` finds
the first JSON value of the wanted type in the text; ``repaired`` tells whether anything had to
be stripped, so callers can count repairs. It never invents content.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


@dataclass
class JsonReply:
    value: Any
    repaired: bool


def extract_json(text: str, want: type = dict) -> JsonReply | None:
    """The first JSON value of type ``want`` (``dict`` or ``list``) in ``text``, or ``None``."""
    stripped = text.strip()
    try:
        value = json.loads(stripped)
        if isinstance(value, want):
            return JsonReply(value, repaired=False)
    except json.JSONDecodeError:
        pass
    fence = _FENCE.match(stripped)
    if fence:
        try:
            value = json.loads(fence.group(1), strict=False)
            if isinstance(value, want):
                return JsonReply(value, repaired=True)
        except json.JSONDecodeError:
            pass
    opener = "{" if want is dict else "["
    decoder = json.JSONDecoder(strict=False)  # also accepts raw newlines/tabs inside strings
    start = stripped.find(opener)
    while start != -1:
        try:
            value, _ = decoder.raw_decode(stripped, start)
            if isinstance(value, want):
                return JsonReply(value, repaired=True)
        except json.JSONDecodeError:
            pass
        start = stripped.find(opener, start + 1)
    return None


def extract_json_all(text: str, want: type = dict) -> list[JsonReply]:
    """Every top-level JSON value of type ``want`` in ``text``, in order (a value nested inside
    another is not listed). A reply that is exactly one JSON value gives that value, not repaired."""
    stripped = text.strip()
    try:
        value = json.loads(stripped)
        if isinstance(value, want):
            return [JsonReply(value, repaired=False)]
    except json.JSONDecodeError:
        pass
    fence = _FENCE.match(stripped)
    if fence:
        stripped = fence.group(1)
    opener = "{" if want is dict else "["
    decoder = json.JSONDecoder(strict=False)
    found: list[JsonReply] = []
    start = stripped.find(opener)
    while start != -1:
        try:
            value, end = decoder.raw_decode(stripped, start)
        except json.JSONDecodeError:
            start = stripped.find(opener, start + 1)
            continue
        if isinstance(value, want):
            found.append(JsonReply(value, repaired=True))
            start = stripped.find(opener, end)
        else:
            start = stripped.find(opener, start + 1)
    return found


def json_bool(value: Any, name: str = "value") -> bool:
    """A JSON boolean as models write it: ``true``/``false`` or the strings ``"true"``/``"false"``
    (any case, surrounding spaces). Anything else raises ``ValueError`` (an unreadable reply)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{name!r} must be true or false, got {value!r}")


def lenient_bool(value: Any) -> Any:
    """For pydantic ``mode="before"`` validators: normalise ``" TRUE "``-style strings, leave
    everything else to pydantic's own bool parsing."""
    try:
        return json_bool(value)
    except ValueError:
        return value
