"""Make bedside's scorers findable by ``inspect score LOG`` (re-scoring an existing log).

Inspect writes a scorer's *unqualified* name into the log (``encounter_outcome``) but registers a
scorer that lives in an installed package under its *qualified* name (``bedside/encounter_outcome``),
and ``inspect score`` looks the logged name up as is. So a log of a package's task cannot be
re-scored without ``--scorer``. :func:`rescorable` registers an alias under the unqualified name
(a thin wrapper; the scorer itself keeps its qualified registration), so that
``inspect score LOG --model-role grader=<model>`` re-runs every scorer of the task.
This uses Inspect's registry internals (through :mod:`bedside.compat`); the scorer tests check it end to end.

A log records each scorer's arguments by name. A log whose scorer was run with a parameter the scorer no
longer takes (bedside renames parameters without aliases before 1.0) is refused in one line naming the
scorer, the parameters it was run with that it does not take, and those it takes (:func:`check_options`), as
``inspect score`` prints a set-up error: no traceback. ``bedside rescore`` names the log file too.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from inspect_ai.util import RegistryInfo, registry_info

from bedside.compat import PrerequisiteError, registry_add, registry_lookup

F = TypeVar("F", bound=Callable[..., Any])


def rescorable(factory: F) -> F:
    info = registry_info(factory)
    short = info.name.split("/")[-1]
    if short != info.name and registry_lookup("scorer", short) is None:

        @functools.wraps(factory)
        def alias(*args: Any, **kwargs: Any) -> Any:
            check_options(short, factory, kwargs)
            return factory(*args, **kwargs)

        registry_add(alias, RegistryInfo(type="scorer", name=short, metadata=info.metadata))
    return factory


def check_options(name: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Refuse a log's scorer ``name`` run with ``options`` that ``factory`` does not take (module docstring):
    Inspect's ``PrerequisiteError``, printed without a traceback (not a ``ValueError``: Inspect would take that
    for a scorer it cannot find and look for it in the task's file)."""
    accepted = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return
    unknown = [option for option in options if option not in accepted]
    if unknown:
        raise PrerequisiteError(
            f"this log's scorer {name} was run with {', '.join(unknown)}, which this bedside's {name} does not take "
            f"(it takes {', '.join(accepted) or 'nothing'}; renamed parameters keep no alias before 1.0): run the "
            "eval again with this bedside, or re-score the log with the bedside version that wrote it"
        )
