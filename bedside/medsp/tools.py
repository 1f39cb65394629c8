"""MedSP1000's tools: what the ``bedside`` command needs (:class:`bedside.parts.Tools`)."""

from __future__ import annotations

from bedside.medsp import population, study
from bedside.medsp.report import section
from bedside.parts import Tools

TOOLS = Tools(report=section, populations=population, study=study)
