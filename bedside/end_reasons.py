"""Why an encounter ended: the end reasons every benchmark shares (:class:`EndReason`).

A benchmark's own end reasons are a ``StrEnum`` in its package (``bedside/<benchmark>/__init__.py``), and
its descriptor declares every end reason its samples can end with. End reasons are strings as the logs
carry them (a ``StrEnum`` member *is* its string): stores, score metadata and ``bedside compare`` read
plain text.

Shared, produced by the orchestrator (:mod:`bedside.solvers.orchestrator`):

- ``clean_complete``: the conversation ended on its own (e.g. the supervisor's ``session_complete``,
  honoured once the minimum-turn guard is met);
- ``hard_stop``: the supervisor stopped the session (a severe failure that stayed after the retries);
- ``max_turns``: the turn budget ran out;
- ``error``: a model call failed or an agent's reply stayed unreadable (a system failure);
- ``system_failure``: the supervisor's verdict stayed unreadable (a system-level failure, excluded from
  the headline n).
"""

from __future__ import annotations

from enum import StrEnum


class EndReason(StrEnum):
    CLEAN_COMPLETE = "clean_complete"
    HARD_STOP = "hard_stop"
    MAX_TURNS = "max_turns"
    ERROR = "error"
    SYSTEM_FAILURE = "system_failure"


#: end reasons that are failures of the system, not of the simulation: excluded from headline n
SYSTEM_FAILURES: frozenset[EndReason] = frozenset({EndReason.ERROR, EndReason.SYSTEM_FAILURE})
