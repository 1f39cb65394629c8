"""The LLM checker of the simulated patient, its contract: a model bound as the role ``simulator_checker`` reads
the patient's materials and the transcript and names the patient turns that break the script, one of the kinds
of :mod:`bedside.simulator_checks` each, for what the rules cannot decide (a fact in words, a paraphrased role
reversal, a persona drift). The call itself is the ``simulator_check`` scorer's (:mod:`bedside.scorers.simulator`).

It runs only when the role is bound (``--model-role simulator_checker=<model>``): an unbound checker
does not fall back to the model under test (a model would judge the patient it converses with). One call
per transcript at temperature 0 (prompt ``prompts/simulator_checker.j2``); an unreadable reply (not JSON,
a kind that is not one of the four, a turn that is not a checked patient turn) is asked again
``retries`` times, then counted as unparsed and the transcript's flags that the rules did not raise are
unscored (NaN), never 0. Each benchmark declares the call as ``<benchmark>.simulator_checker``
(:func:`checker_protocol`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bedside.protocols import Protocol

ROLE = "simulator_checker"
#: the kinds of :data:`bedside.simulator_checks.KINDS` (a test keeps them equal)
Kind = Literal["unsupported_fact", "persona_break", "role_reversal", "early_end"]


class CheckerFinding(BaseModel):
    model_config = ConfigDict(extra="ignore")

    turn: int
    kind: Kind
    evidence: str = ""


class CheckerReply(BaseModel):
    """The checker's answer: every patient turn that breaks the script (an empty list: none)."""

    model_config = ConfigDict(extra="ignore")

    findings: list[CheckerFinding] = Field(default_factory=list)


def checker_protocol(benchmark: str) -> Protocol:
    """The checker's call in benchmark ``benchmark`` (declared in its protocols module)."""
    return Protocol(f"{benchmark}.{ROLE}", reply=CheckerReply, max_tokens=1024, unreadable="unscored")
