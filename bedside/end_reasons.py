"""Why an encounter ended: one enum for every benchmark (issue 19).

The values are the strings the logs have always carried (``EndReason`` is a ``StrEnum``: a member
*is* its string, so stores, score metadata and ``bedside compare`` read the same text as before).

Shared by every multi-turn encounter:

- ``clean_complete``: the conversation ended on its own (DischargeBench: the monitor's
  ``session_complete``, honoured once the minimum-turn guard is met);
- ``hard_stop``: the supervisor stopped the session (DischargeBench Algorithm 1, a severe FAIL that
  stayed after the retries);
- ``max_turns``: the turn budget ran out;
- ``error``: a model call failed or an agent's reply stayed unreadable (a system failure);
- ``system_failure``: the supervisor's verdict stayed unreadable (DischargeBench Section 3.4 counts
  JSON-decoding errors as system-level failures).

Per benchmark: MedSP1000's ``scenario_complete`` (the examinee finished the case) and
``environment_end`` (the environment controller ended the encounter); CPB-Bench's ``patient_ended``
(the continuation patient said ``[End of Conversation]``); the safety probe's ``probe_transcript``
(a replayed transcript, no live encounter).
"""

from __future__ import annotations

from enum import StrEnum


class EndReason(StrEnum):
    CLEAN_COMPLETE = "clean_complete"
    HARD_STOP = "hard_stop"
    MAX_TURNS = "max_turns"
    ERROR = "error"
    SYSTEM_FAILURE = "system_failure"
    # MedSP1000
    SCENARIO_COMPLETE = "scenario_complete"
    ENVIRONMENT_END = "environment_end"
    # CPB-Bench continuation
    PATIENT_ENDED = "patient_ended"
    # DischargeBench safety probe (replayed transcripts)
    PROBE_TRANSCRIPT = "probe_transcript"


#: end reasons that are failures of the system, not of the simulation: excluded from headline n
SYSTEM_FAILURES: frozenset[EndReason] = frozenset({EndReason.ERROR, EndReason.SYSTEM_FAILURE})
