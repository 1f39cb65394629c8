"""``bedside agreement``: bedside's automatic judgements against people's.

- ``bedside agreement LOG... --people LOG_OR_DIR...`` (every benchmark with a simulated patient): the simulator
  checker against people's realism rating of the same transcripts, per patient turn
  (:mod:`bedside.reporting.simulator_agreement`);
- ``bedside agreement LOG... --annotations FILE.csv``: the LLM judge against people's ratings of the judged
  items, for a benchmark that takes them (its tools' ``agreement``, :class:`bedside.cli.Tools`).

``--csv FILE`` also writes the table to a CSV file.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bedside import benchmarks
from bedside.cli import BadInput, add_command, bad_input, tools_of
from bedside.reporting import simulator_agreement
from bedside.reporting.load import benchmark_of, expand, read_header

if TYPE_CHECKING:
    from bedside.cli import AgreementModule


def judge_agreements() -> dict[str, AgreementModule]:
    """benchmark name -> its judge-vs-people comparison module (``--annotations``), for the benchmarks that have one."""
    return {b.name: m for b in benchmarks.all_benchmarks() if (m := tools_of(b).agreement) is not None}


def run(args: argparse.Namespace) -> int:
    if args.people:
        return simulator_agreement.run(args)
    comparisons = judge_agreements()
    if len(comparisons) != 1:
        with bad_input("agreement", FileNotFoundError, ValueError):
            first = expand(args.logs)[0]
            name = benchmark_of(read_header(first))
        if name not in comparisons:
            raise BadInput(
                "agreement", f"{first}: benchmark {name} takes no --annotations (those do: {sorted(comparisons)})"
            )
        comparisons = {name: comparisons[name]}
    [module] = comparisons.values()
    return int(module.run(args))


def register(sub: argparse._SubParsersAction) -> None:
    """The ``agreement`` sub-command (module docstring)."""
    modules = judge_agreements()
    parser = add_command(
        sub,
        "agreement",
        "agreement with people: the LLM judge vs physicians (--annotations), the simulator checker vs "
        "people's realism rating (--people); kappa with n and intervals",
        "\n\n".join([__doc__ or "", simulator_agreement.__doc__ or "", *(m.__doc__ or "" for m in modules.values())]),
        run,
    )
    parser.add_argument("logs", nargs="+", metavar="LOG", help="eval logs (or directories) holding the judged cases")
    sources = parser.add_mutually_exclusive_group(required=True)
    sources.add_argument("--annotations", metavar="FILE.csv", help="physician annotations of the judged items")
    simulator_agreement.add_arguments(parser, sources)
    for module in modules.values():
        module.add_arguments(parser)
    parser.add_argument("--csv", metavar="FILE", help="also write the table to this CSV file")
