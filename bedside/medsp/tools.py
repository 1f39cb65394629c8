"""MedSP1000's tools: what the ``bedside`` command needs (:class:`bedside.parts.Tools`)."""

from __future__ import annotations

from bedside.medsp import study
from bedside.medsp.report import section
from bedside.parts import Tools
from bedside.reporting.simulator import ALL_OR_CLEAN

#: ``--population simulator_clean``: the samples whose standardized patient the simulator checks
#: (``-T simulator_check=true``) found no error in
TOOLS = Tools(report=section, populations=ALL_OR_CLEAN, study=study)
