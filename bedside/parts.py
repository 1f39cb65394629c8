"""What the shared code calls in a benchmark's code, in two manifests by when it is needed:

- :class:`Parts`, ``PARTS`` of ``bedside/<name>/parts.py``: what an eval's model calls need (the reply
  protocols, the scripted roles ``bedside/scripted`` plays, its own model engines, its simulated patient);
- :class:`Tools`, ``TOOLS`` of ``bedside/<name>/tools.py`` (optional): what the ``bedside`` command needs (its
  own sub-commands, its report section, populations, judge-calibrated estimates, the check of ``rescore``, its
  judge's agreement with people).

Each lists its objects with plain imports, so that a reader (and "go to definition") goes from a field to
the code, and mypy checks each against the interface it is used through (the protocols below: a module is
checked as an object with those attributes). Each file is imported (:meth:`bedside.benchmark.Benchmark.code`)
when a tool first asks for one of its objects (:func:`parts_of`, :func:`tools_of` and every registered
benchmark's :func:`scripts`, :func:`engines`, :func:`all_protocols`, :func:`commands`): an eval (the scripted
model too) never imports a report, and nothing reads its facts, score keys or tasks through this module.
It sits above the registry and reporting (it names their types); nothing they import imports it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from bedside import benchmarks

if TYPE_CHECKING:
    import pandas as pd
    from inspect_ai.log import EvalLog, EvalSample, EvalSampleSummary
    from inspect_ai.model import ChatMessage, GenerateConfig, Model

    from bedside.benchmark import Benchmark
    from bedside.protocols import Protocol as ReplyProtocol
    from bedside.reporting.section import Section
    from bedside.simulator_checks import PatientTranscript
    from bedside.study.items import StudyModule


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


class CommandModule(Protocol):
    """A module that adds ``bedside`` sub-commands (:mod:`bedside.cli`): each with ``set_defaults(func=...)``."""

    def register(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


class Engine(Protocol):
    """A ``bedside/<name>`` model engine of :mod:`bedside.providers.api`: a reply per call, from no server."""

    context_window: int

    def identity(self) -> str: ...

    def reply(self, messages: list[ChatMessage], config: GenerateConfig) -> str: ...


class PopulationModule(Protocol):
    """The sample populations a benchmark's reports may average (``--population``): ``POPULATIONS``, its
    default first, and ``in_population(sample, name)``."""

    @property
    def POPULATIONS(self) -> Sequence[str]: ...  # noqa: N802

    def in_population(self, sample: EvalSample | EvalSampleSummary, population: str) -> bool: ...


class CalibratedModule(Protocol):
    """Judge-calibrated estimates from physician annotations (``bedside report --annotations``)."""

    def read_annotations(self, path: str) -> pd.DataFrame: ...

    def section(self, page: Any, benchmark: Any, logs: list[Any], annotations: pd.DataFrame, csv: Any) -> None: ...


class AgreementModule(Protocol):
    """A benchmark's LLM judge against people's ratings (``bedside agreement LOG... --annotations FILE``,
    :mod:`bedside.reporting.agreement`): its options (``add_arguments``) and ``run(args)`` (the exit code); its
    docstring is the command's help for it."""

    __doc__: str | None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class RescoreGuard(Protocol):
    """A check ``bedside rescore`` runs on each of the benchmark's logs before any call: raises ``ValueError``
    (one line, naming ``role``) when the log's data may not go to ``model``, the model re-judging it in that
    role (e.g. patient data under a data-use agreement).
    What it lets through it may record in the log's samples, which are then judged (the benchmark's scorers
    may look there: ``inspect score`` runs them without this check)."""

    def __call__(self, log: EvalLog, role: str, model: Model, zero_retention: bool) -> None: ...


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


@dataclass(frozen=True)
class Tools:
    """A benchmark's code that the ``bedside`` command needs (a benchmark without ``tools.py`` has none).

    - ``commands``: its own ``bedside`` sub-commands (:class:`CommandModule`);
    - ``report``: its section of ``bedside report``; None: the generic one (its headline keys per stratum);
    - ``populations``: the sample populations its reports may average; None: every sample;
    - ``calibrated``: its judge-calibrated estimates (``bedside report --annotations``); None: it takes none;
    - ``rescore_guard``: the check ``bedside rescore`` runs on its logs before any call; None: no check;
    - ``agreement``: its LLM judge against people's ratings (``bedside agreement --annotations``); None: it takes
      none;
    - ``study``: its part of a blinded clinician study (``bedside study``: the items raters answer, its samples as
      transcripts; :class:`bedside.study.items.StudyModule`); None: no study of its runs.
    """

    commands: tuple[CommandModule, ...] = ()
    report: Section | None = None
    populations: PopulationModule | None = None
    calibrated: CalibratedModule | None = None
    rescore_guard: RescoreGuard | None = None
    agreement: AgreementModule | None = None
    study: StudyModule | None = None


def parts_of(benchmark: Benchmark) -> Parts:
    """``PARTS`` of ``bedside/<name>/parts.py`` (imported now)."""
    found = benchmark.code(f"bedside.{benchmark.name}.parts").PARTS
    if not isinstance(found, Parts):
        raise TypeError(f"benchmark {benchmark.name!r}: bedside/{benchmark.name}/parts.py's PARTS is no Parts")
    return found


def tools_of(benchmark: Benchmark) -> Tools:
    """``TOOLS`` of ``bedside/<name>/tools.py`` (imported now); no such file: none (:class:`Tools`' defaults)."""
    module = f"bedside.{benchmark.name}.tools"
    try:
        found = benchmark.code(module).TOOLS
    except ModuleNotFoundError as missing:
        if missing.name != module:
            raise
        return Tools()
    if not isinstance(found, Tools):
        raise TypeError(f"benchmark {benchmark.name!r}: bedside/{benchmark.name}/tools.py's TOOLS is no Tools")
    return found


def scripts() -> tuple[ScriptModule, ...]:
    """Every registered benchmark's scripted roles (:mod:`bedside.providers.scripted`)."""
    return tuple(m for b in benchmarks.all_benchmarks() for m in parts_of(b).scripts)


def commands() -> tuple[CommandModule, ...]:
    """Every registered benchmark's own ``bedside`` sub-command modules (:mod:`bedside.cli`)."""
    return tuple(m for b in benchmarks.all_benchmarks() for m in tools_of(b).commands)


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
