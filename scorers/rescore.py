"""Make bedside's scorers findable by ``inspect score LOG`` (re-scoring an existing log).

Inspect writes a scorer's *unqualified* name into the log (``encounter_outcome``) but registers a
scorer that lives in an installed package under its *qualified* name (``bedside/encounter_outcome``),
and ``inspect score`` looks the logged name up as is. So a log of a package's task cannot be
re-scored without ``--scorer``. :func:`rescorable` registers an alias under the unqualified name
(a thin wrapper; the scorer itself keeps its qualified registration), so that
``inspect score LOG --model-role grader=<model>`` re-runs every scorer of the task.
This uses Inspect's registry internals (through :mod:`bedside.compat`); the scorer tests check it end to end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from inspect_ai.util import RegistryInfo, registry_info

from bedside.compat import registry_add, registry_lookup

F = TypeVar("F", bound=Callable[..., Any])


def rescorable(factory: F) -> F:
    info = registry_info(factory)
    short = info.name.split("/")[-1]
    if short != info.name and registry_lookup("scorer", short) is None:

        @functools.wraps(factory)
        def alias(*args: Any, **kwargs: Any) -> Any:
            return factory(*args, **kwargs)

        registry_add(alias, RegistryInfo(type="scorer", name=short, metadata=info.metadata))
    return factory
