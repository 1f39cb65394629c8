"""CPB-Bench's tools: what the ``bedside`` command needs (:class:`bedside.cli.Tools`)."""

from __future__ import annotations

from bedside.cli import Tools
from bedside.cpb import replay_check, study
from bedside.cpb.report import section
from bedside.reporting.simulator import ALL_OR_CLEAN

#: ``--population simulator_clean``: the samples whose continuation patient the simulator checks
#: (``-T simulator_check=true``) found no error in (a single-turn sample has none to check: left out)
TOOLS = Tools(commands=(replay_check,), report=section, populations=ALL_OR_CLEAN, study=study)
