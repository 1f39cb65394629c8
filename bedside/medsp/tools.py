"""MedSP1000's tools: what the ``bedside`` command needs (:class:`bedside.cli.Tools`)."""

from __future__ import annotations

from bedside.cli import Tools
from bedside.medsp import study
from bedside.medsp.report import section
from bedside.reporting.simulator import ALL_OR_CLEAN

#: ``--population simulator_clean``: the samples whose standardized patient the simulator checks
#: (``-T simulator_check=true``) found no error in
TOOLS = Tools(report=section, populations=ALL_OR_CLEAN, study=study)
