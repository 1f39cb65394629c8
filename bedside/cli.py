"""The ``bedside`` command (also ``python -m bedside``): one entry point, one module per command.

Each module in :data:`COMMANDS` exposes ``register(subparsers)``, which adds its sub-command(s) with
``set_defaults(func=...)``; ``func(args)`` returns the exit code. Modules are imported only when
listed here, so a command's heavy imports (pandas, matplotlib) load only for that command.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: modules that register sub-commands, in the order of ``bedside --help``
COMMANDS: tuple[str, ...] = (
    "bedside.report",  # strata, audit, delta
    "bedside.reporting.build",  # report
    "bedside.reporting.agreement",  # agreement
    "bedside.reporting.compare",  # compare
    "bedside.reporting.annotate",  # annotate export
    "bedside.reporting.rescore",  # rescore
    "bedside.mimic.build",  # build-cases
    "bedside.replay_check",  # replay-check
    "bedside.safety_report",  # safety
)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="bedside", description="bedside: reports and tools for bedside eval logs and data")
    sub = top.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
