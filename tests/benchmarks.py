"""What each registered benchmark declares for the shared tests, in its own folder ``tests/<b>/``, so that a
shared test iterates the registry and a new benchmark is picked up, never pinned out:

- ``tests/<b>/golden.py``: ``RUNS``, its golden runs (:mod:`tests.golden.make_golden`);
- ``tests/<b>/tiny.py``: ``TINY``, a tiny run of each of its tasks (:class:`Tiny`: ``tests/test_versions.py``,
  ``tests/test_role_fallbacks.py``);
- ``tests/<b>/corpus.py``: its protocols in the reply corpus (:mod:`tests.corpus.replies`).

A benchmark that declares nothing where a shared test needs it fails that test, which names the file.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Tiny:
    """A tiny run of one task: its task arguments, the files its ``data_versions`` record must hash (by key)
    and the model roles whose fallbacks its scorers count (``role_fallbacks``) when they are left unbound."""

    args: Mapping[str, Any]
    inputs: Mapping[str, Path] = field(default_factory=dict)
    roles: tuple[str, ...] = ()


def declared(module: str) -> dict[str, Any]:
    """Benchmark name -> its ``tests.<b>.<module>`` (imported now), for every registered benchmark; a benchmark
    without that module is left out (the shared test that needs it says so)."""
    from bedside import benchmarks

    found: dict[str, Any] = {}
    for benchmark in benchmarks.all_benchmarks():
        name = f"tests.{benchmark.name}.{module}"
        try:
            found[benchmark.name] = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name not in (name, f"tests.{benchmark.name}"):
                raise
    return found


def tiny_runs() -> dict[str, Callable[[Path], Tiny]]:
    """Task name -> its tiny run (given a temporary folder), over every registered benchmark's ``TINY``."""
    return {task: run for module in declared("tiny").values() for task, run in module.TINY.items()}


def unread_args(function: Callable[..., Any]) -> dict[str, str]:
    """Task arguments that name no readable file: every required parameter and ``data``, if the task has it (a
    check that must come before the task reads its data is seen failing first)."""
    import inspect

    parameters = inspect.signature(inspect.unwrap(function)).parameters
    return {name: "unread" for name, p in parameters.items() if p.default is inspect.Parameter.empty or name == "data"}
