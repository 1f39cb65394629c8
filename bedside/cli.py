"""The ``bedside`` command (also ``python -m bedside``): one entry point, one module per command.

Each module in :data:`COMMANDS` (the shared commands) and in each registered benchmark's ``commands``
(its own, e.g. ``build-cases``: its tools', :mod:`bedside.parts`) exposes ``register(subparsers)``, which adds its
sub-command(s) with ``set_defaults(func=...)``; ``func(args)`` returns the exit code. A command's heavy
imports (pandas, matplotlib) are made inside its functions, so they load only for that command.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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
