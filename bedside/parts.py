"""What an eval's model calls need of a benchmark's code: :class:`Parts`, ``PARTS`` of
``bedside/<name>/parts.py`` (the reply protocols, the scripted roles ``bedside/scripted`` plays, its own model
engines, its simulated patient). What the ``bedside`` command needs of it is its tools
(:class:`bedside.cli.Tools`).

``PARTS`` lists its objects with plain imports, so that a reader (and "go to definition") goes from a field to
the code, and mypy checks each against the interface it is used through (the protocols below: a module is
checked as an object with those attributes). The file is imported (:meth:`bedside.benchmark.Benchmark.code`)
when a tool first asks for one of its objects (:func:`parts_of` and every registered benchmark's
:func:`scripts`, :func:`engines`, :func:`all_protocols`): nothing reads a benchmark's facts, score keys or
tasks through this module. It sits above the registry (it names the reply protocols' type); nothing the
registry imports imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from bedside import benchmarks

if TYPE_CHECKING:
    from inspect_ai.model import ChatMessage, GenerateConfig

    from bedside.benchmark import Benchmark
    from bedside.protocols import Protocol as ReplyProtocol
    from bedside.simulator_checks import PatientTranscript


class ScriptModule(Protocol):
    """A module of scripted roles for ``bedside/scripted`` (:mod:`bedside.providers.scripts`): its ``Options``
    (a dataclass of behaviour switches), ``HANDLERS`` (protocol name -> reply) and ``SITUATIONS`` (protocol
    name -> what the role reads about its call)."""

    __name__: str

    @property
    def Options(self) -> type[Any]: ...  # noqa: N802 (the module's class)

    @property
    def HANDLERS(self) -> Mapping[str, Callable[..., str]]: ...  # noqa: N802

    @property
    def SITUATIONS(self) -> Mapping[str, Callable[[Any], dict[str, Any]]]: ...  # noqa: N802


class SimulatorModule(Protocol):
    """A benchmark's simulated patient for the checks of the simulator's own errors (:mod:`bedside.simulator_checks`,
    the ``simulator_check`` scorer): ``patient_transcript(metadata)`` of the sample being scored (None: no
    simulated patient in it)."""

    def patient_transcript(self, metadata: dict[str, Any]) -> PatientTranscript | None: ...


class Engine(Protocol):
    """A ``bedside/<name>`` model engine of :mod:`bedside.providers.api`: a reply per call, from no server."""

    context_window: int

    def identity(self) -> str: ...

    def reply(self, messages: list[ChatMessage], config: GenerateConfig) -> str: ...


@dataclass(frozen=True)
class Parts:
    """A benchmark's code that an eval's model calls need.

    - ``protocols``: the reply protocols of its model calls (:func:`all_protocols`);
    - ``scripts``: its scripted roles (:class:`ScriptModule`), which ``bedside/scripted`` plays;
    - ``engines``: its own ``bedside/<name>`` model engines, name -> the engine's class (:class:`Engine`);
    - ``simulator``: its simulated patient as the simulator checks read it (:class:`SimulatorModule`); None: it
      has none.
    """

    protocols: tuple[ReplyProtocol, ...]
    scripts: tuple[ScriptModule, ...]
    engines: Mapping[str, Callable[..., Engine]] = field(default_factory=dict)
    simulator: SimulatorModule | None = None


def parts_of(benchmark: Benchmark) -> Parts:
    """``PARTS`` of ``bedside/<name>/parts.py`` (imported now)."""
    found = benchmark.code(f"bedside.{benchmark.name}.parts").PARTS
    if not isinstance(found, Parts):
        raise TypeError(f"benchmark {benchmark.name!r}: bedside/{benchmark.name}/parts.py's PARTS is no Parts")
    return found


def scripts() -> tuple[ScriptModule, ...]:
    """Every registered benchmark's scripted roles (:mod:`bedside.providers.scripted`)."""
    return tuple(m for b in benchmarks.all_benchmarks() for m in parts_of(b).scripts)


def engines() -> dict[str, Callable[..., Engine]]:
    """Every registered benchmark's own ``bedside/<name>`` model engines: name -> the engine's class."""
    found: dict[str, Callable[..., Engine]] = {}
    for benchmark in benchmarks.all_benchmarks():
        for name, engine in parts_of(benchmark).engines.items():
            if name in found:
                raise ValueError(f"bedside/{name} is declared by two benchmarks")
            found[name] = engine
    return found


def protocols_of(benchmark: Benchmark) -> tuple[ReplyProtocol, ...]:
    """A benchmark's reply protocols: its parts' and those its scorers declare with them (a judge's)."""
    return (*parts_of(benchmark).protocols, *benchmark.scorer_protocols)


def all_protocols() -> tuple[ReplyProtocol, ...]:
    """Every registered benchmark's reply protocols (a name declared twice is an error)."""
    return _protocols(benchmarks.names())


@lru_cache(maxsize=8)
def _protocols(registered: tuple[str, ...]) -> tuple[ReplyProtocol, ...]:
    found = tuple(p for name in registered for p in protocols_of(benchmarks.get(name)))
    names = [p.name for p in found]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise RuntimeError(f"protocol names declared twice: {sorted(duplicated)}")
    return found


def protocol(name: str) -> ReplyProtocol:
    """The registered reply protocol named ``name`` (``<benchmark>.<role>``)."""
    for p in all_protocols():
        if p.name == name:
            return p
    raise KeyError(f"no bedside protocol named {name!r}")
