"""CPB-Bench's tools: what the ``bedside`` command needs (:class:`bedside.parts.Tools`)."""

from __future__ import annotations

from bedside.cpb import population, replay_check, study
from bedside.cpb.report import section
from bedside.parts import Tools

TOOLS = Tools(commands=(replay_check,), report=section, populations=population, study=study)
