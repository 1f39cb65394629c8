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
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

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


def _top_level_starts(text: str, opener: str) -> list[int]:
    """Positions of ``opener`` that are not inside another JSON value: a bracket-depth scan that
    respects JSON strings inside brackets (quotes in the surrounding prose do not count). A fragment of
    a broken or truncated value (an object nested in it) is never taken for the reply."""
    starts: list[int] = []
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch in "{[":
            if depth == 0 and ch == opener:
                starts.append(i)
            depth += 1
        elif ch in "}]":
            depth = max(0, depth - 1)
        elif ch == '"' and depth > 0:
            in_string = True
    return starts


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _scan(text: str, want: type) -> list[JsonReply]:
    opener = "{" if want is dict else "["
    decoder = json.JSONDecoder(strict=False)  # also accepts raw newlines/tabs inside strings
    found: list[JsonReply] = []
    for start in _top_level_starts(text, opener):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, want):
            found.append(JsonReply(value, repaired=True))
    return found


def extract_json_all(text: str, want: type = dict) -> list[JsonReply]:
    """Every top-level JSON value of type ``want`` in ``text``, in order (a value nested inside
    another, or inside a broken one, is not listed). A reply that is exactly one JSON value gives that
    value, not repaired. Trailing commas (``{"a": 1,}``) are repaired when nothing reads without."""
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
    found = _scan(stripped, want)
    if not found and _TRAILING_COMMA.search(stripped):
        found = _scan(_TRAILING_COMMA.sub(r"\1", stripped), want)
    return found


def json_bool(value: Any, name: str = "value") -> bool:
    """A JSON boolean as models write it: ``true``/``false`` or the strings ``"true"``/``"false"``
    (any case, surrounding spaces). Anything else raises ``ValueError`` (an unreadable reply)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{name!r} must be true or false, got {value!r}")


def as_text(value: Any) -> str:
    """A reply's free-text field: ``None`` is ``""``, text is stripped, a JSON object or list is its JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value).strip()


def _field_json_bool(value: Any, info: ValidationInfo) -> bool:
    return json_bool(value, info.field_name or "value")


#: a reply model's free-text field (:func:`as_text`)
ReplyText = Annotated[str, BeforeValidator(as_text)]
#: a reply model's true/false field read by :func:`json_bool` (anything else: the reply is unreadable)
JsonBool = Annotated[bool, BeforeValidator(_field_json_bool)]


def lenient_bool(value: Any) -> Any:
    """For pydantic ``mode="before"`` validators: normalise ``" TRUE "``-style strings, leave
    everything else to pydantic's own bool parsing."""
    try:
        return json_bool(value)
    except ValueError:
        return value
