"""The ``bedside`` command (also ``python -m bedside``): one entry point, one module per command, and what it
takes from each benchmark.

Each module in :data:`COMMANDS` (the shared commands) and in each registered benchmark's tools' ``commands``
(its own, e.g. ``build-cases``) exposes ``register(subparsers)``, which adds its sub-command(s)
(:func:`add_command`: its help, its module's docstring, ``func``); ``func(args)`` returns the exit code. Input a
command cannot use stops it with one line, ``bedside <command>: <what is wrong>``, and exit code 2: the command
raises :class:`BadInput` (where it checks, or from the narrow block it reads the input in: :func:`bad_input`),
and :func:`main` prints it. ``bedside --help`` imports every command's module: an import that would add much to
it is made inside the function that needs it (``tests/test_layout.py``'s ``FUNCTION_IMPORTS`` lists them).

What the command needs of a benchmark's code is its :class:`Tools`, ``TOOLS`` of ``bedside/<name>/tools.py``
(optional: :func:`tools_of`): its own sub-commands, its report section, populations, judge-calibrated estimates,
the check of ``rescore``, its judge's agreement with people, its part of a clinician study. ``TOOLS`` lists its
objects with plain imports, so that a reader (and "go to definition") goes from a field to the code, and mypy
checks each against the interface it is used through (the protocols below: a module is checked as an object
with those attributes). The file is imported (:meth:`bedside.benchmark.Benchmark.code`) when a command first
asks for one of its objects: an eval never imports it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bedside import benchmarks

if TYPE_CHECKING:
    import pandas as pd
    from inspect_ai.log import EvalSample, EvalSampleSummary
    from inspect_ai.model import Model

    from bedside.benchmark import Benchmark
    from bedside.reporting.section import Section
    from bedside.study.items import StudyModule

#: modules that register the shared sub-commands, in the order of ``bedside --help`` (each benchmark's
#: own follow, in registry order)
COMMANDS: tuple[str, ...] = (
    "bedside.reporting.build",  # report
    "bedside.reporting.strata",  # strata
    "bedside.reporting.compare",  # compare
    "bedside.reporting.rescore",  # rescore
    "bedside.reporting.agreement",  # agreement
    "bedside.reporting.estimate",  # estimate
    "bedside.scale.command",  # scale
    "bedside.study.command",  # study
)


#: what a command's positional ``LOG`` arguments take
LOGS_HELP = "eval logs, or folders of logs (a sharded run: one run)"


class BadInput(Exception):
    """Input command ``command`` cannot use (a sub-command's name, e.g. ``study build``): :func:`main` prints
    ``bedside <command>: <message>``, the one line, and exits 2."""

    def __init__(self, command: str, message: object) -> None:
        super().__init__(f"bedside {command}: {message}")


@contextmanager
def bad_input(command: str, *errors: type[Exception]) -> Iterator[None]:
    """An error of ``errors`` raised in the ``with`` block is bad input of ``command`` (:class:`BadInput`, its
    message the error's); any other error, and any raised outside the block, stays what it is."""
    try:
        yield
    except errors as error:
        raise BadInput(command, error) from error


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    summary: str,
    doc: str | None,
    run: Callable[[argparse.Namespace], int] | None = None,
) -> argparse.ArgumentParser:
    """Sub-command ``name``: ``summary`` in the list of ``bedside --help``, ``doc`` as written above the options
    of its own ``--help`` (a command there is a documented command: tests/test_documented_commands.py runs it),
    and ``run(args)`` (the exit code; None for a group of sub-commands)."""
    parser = sub.add_parser(name, help=summary, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if run is not None:
        parser.set_defaults(func=run)
    return parser


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="bedside", description="bedside: reports and tools for bedside eval logs and data"
    )
    sub = top.add_subparsers(dest="command", required=True)
    own = (m for b in benchmarks.all_benchmarks() for m in tools_of(b).commands)
    for module in (*(importlib.import_module(name) for name in COMMANDS), *own):
        module.register(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BadInput as bad:
        print(bad)
        return 2


# --- a benchmark's tools: what the command needs of it ------------------------------------------------


class CommandModule(Protocol):
    """A module that adds ``bedside`` sub-commands: each with ``set_defaults(func=...)``."""

    def register(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


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
    """A check ``bedside rescore`` runs on each of the benchmark's runs before any call: reads the run's
    ``samples`` (each without its transcript, one at a time) and raises ``ValueError`` (one line, naming
    ``role``) when their data may not go to ``model``, the model re-judging them in that role (e.g. patient data
    under a data-use agreement). Returns what it records in each sample it lets through (None: nothing), done
    to each sample as it is read to be judged (the benchmark's scorers may look there: ``inspect score`` runs
    them without this check)."""

    def __call__(
        self, samples: Iterable[EvalSample], role: str, model: Model, zero_retention: bool
    ) -> Callable[[EvalSample], None] | None: ...


@dataclass(frozen=True)
class Tools:
    """A benchmark's code that the ``bedside`` command needs (a benchmark without ``tools.py``: these defaults,
    none).

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
