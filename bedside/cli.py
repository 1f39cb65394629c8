"""The ``bedside`` command (also ``python -m bedside``): one entry point, one module per command.

Each module in :data:`COMMANDS` (the shared commands) and in each registered benchmark's ``commands``
(its own, e.g. ``build-cases``: its tools', :mod:`bedside.parts`) exposes ``register(subparsers)``, which adds its
sub-command(s) (:func:`add_command`: its help, its module's docstring, ``func``); ``func(args)`` returns the
exit code. ``bedside --help`` imports every command's module: an import that would add much to it is made
inside the function that needs it (``tests/test_layout.py``'s ``FUNCTION_IMPORTS`` lists them).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from bedside import parts

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
    for module in (*(importlib.import_module(name) for name in COMMANDS), *parts.commands()):
        module.register(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
