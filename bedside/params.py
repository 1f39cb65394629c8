"""Validation of task parameters (``-T name=value``), run first thing in every task function.

``inspect eval -T`` values arrive YAML-parsed: ``-T max_turns=5`` is the int 5, but
``-T max_turns=abc`` is the string ``'abc'``, ``-T max_turns=3.5`` a float and
``-T max_turns=true`` a bool. The helpers here turn such values into the declared type or raise
:class:`BadParameter` with a one-line message naming the parameter, before any data is read or any
model is called.

:class:`BadParameter` (like the loaders' data errors, via :class:`SetupError`) subclasses Inspect's
``PrerequisiteError``, which the ``inspect eval`` CLI prints as a plain message (no Python
traceback, exit status 1); it is also a ``ValueError`` for callers that catch that. (Inspect prints
such messages through its rich console, so with ``--display none`` it prints nothing; the exit
status is still 1.)
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from bedside.compat import PrerequisiteError

TRUE_WORDS = ("true", "yes", "1")
FALSE_WORDS = ("false", "no", "0")


class SetupError(PrerequisiteError, ValueError):
    """An error in what the user asked for (a parameter, a data file), found while the task is
    built. ``inspect eval`` prints a ``PrerequisiteError`` as a plain message, without a Python
    traceback (it renders ``.message`` as rich markup, so that copy is escaped; ``str()`` and
    ``args`` hold the plain text)."""

    def __init__(self, message: str) -> None:
        super().__init__(escape(message))
        self.args = (message,)

    def __str__(self) -> str:
        return str(self.args[0])


class BadParameter(SetupError):
    """A task parameter with an unusable value; the message is one line naming the parameter."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"Bad parameter {name!r}: {problem}")
        self.name = name
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.problem))


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` on one line, shortened to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check(cond: bool, name: str, msg: str) -> None:
    """Raise :class:`BadParameter` naming ``name`` with ``msg`` unless ``cond`` holds."""
    if not cond:
        raise BadParameter(name, msg)


def int_param(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int within ``[minimum, maximum]``.

    Accepts ints, strings holding an integer (``"5"``, ``" -2 "``) and floats with an integral
    value (``5.0``); rejects bools (``-T max_turns=true``), other floats (``3.5``), other strings
    and ``None``.
    """
    if isinstance(value, bool):
        raise BadParameter(name, f"expected a whole number, got {name}={shown(value)}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _is_int_text(value):
        number = int(value.strip())
    else:
        raise BadParameter(name, f"expected a whole number, got {name}={shown(value)}")
    if minimum is not None and number < minimum:
        raise BadParameter(name, f"must be at least {minimum}, got {name}={number}")
    if maximum is not None and number > maximum:
        raise BadParameter(name, f"must be at most {maximum}, got {name}={number}")
    return number


def _is_int_text(text: str) -> bool:
    digits = text.strip()
    digits = digits[1:] if digits[:1] in ("+", "-") else digits
    return digits.isascii() and digits.isdigit()


def bool_param(name: str, value: Any) -> bool:
    """``value`` as a bool: a bool, the ints 0/1, or one of the strings true/false/yes/no/1/0
    (any case, surrounding spaces ignored)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise BadParameter(name, f"expected true/false/yes/no/1/0, got {name}={shown(value)}")
