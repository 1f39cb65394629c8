"""CPB-Bench's continuation patient for the checks of the simulator's own errors
(:mod:`bedside.simulator_checks`, the ``simulator_check`` scorer).

Only the multi-turn continuation (``-T turns=N``) has a simulated patient; a single-turn sample's patient turns
are the data's, so it has nothing to check (its keys are NaN).

- its materials: the complete original consultation (the continuation patient's prompt shows it whole, the turns
  after the cut included);
- the conversation: the original segment, the doctor's first reply and the continuation; only the continuation's
  patient turns are checked;
- persona: the original patient's writing system (a continuation in English of a Chinese consultation breaks
  it; rule 7 of the patient prompt: "including their language"); the report's strata are the behaviour category
  and the language;
- early end: the patient ended the continuation in its first turn although the original patient speaks at least
  twice more after the cut (rule 5: end "only when all of the original patient's concerns have been dealt with"),
  or said farewell in the continuation before its last two turns (:func:`bedside.simulator_checks.early_farewell`).
"""

from __future__ import annotations

from typing import Any

from inspect_ai.util import store_as

from bedside.cpb import CPBEndReason
from bedside.cpb.judges import DOCTOR_ROLE, PATIENT_ROLE, dialogue_turns, load_case, transcript_text
from bedside.cpb.records import CPBCase
from bedside.cpb.store import CPBStore
from bedside.simulator_checks import PatientTranscript, SpokenTurn, early_farewell, writing_system


def patient_transcript(metadata: dict[str, Any]) -> PatientTranscript | None:
    """The continuation patient of the sample being scored; None without a continuation (module docstring)."""
    case = load_case(metadata)
    record = store_as(CPBStore)
    if not isinstance(case, CPBCase) or not record.continuation or record.reply is None:
        return None
    segment = dialogue_turns(case.conversation_segment)
    turns = [SpokenTurn(t.index, t.role, t.message) for t in segment]
    turns.append(SpokenTurn(len(turns), DOCTOR_ROLE, record.reply))
    first = len(turns)
    turns += [SpokenTurn(first + i, t.role, t.message) for i, t in enumerate(record.continuation)]
    original = [t.text for t in case.complete_conversation if t.speaker == "Patient"]
    after = [t.speaker for t in case.complete_conversation[len(case.conversation_segment) :]]
    # the original patient's turns after the cut, consecutive lines of the patient counted once
    later = sum(s == "Patient" and (i == 0 or after[i - 1] != "Patient") for i, s in enumerate(after))
    spoken = [t for t in turns[first:] if t.role == PATIENT_ROLE]
    early = early_farewell(turns, PATIENT_ROLE, first)
    if record.continuation_end_reason == CPBEndReason.PATIENT_ENDED and len(spoken) == 1 and later >= 2:
        early = (spoken[0].index, f"ended in its first turn; the original patient speaks {later} more times")
    return PatientTranscript(
        script={"original_consultation": transcript_text(dialogue_turns(case.complete_conversation))},
        turns=tuple(turns),
        patient_role=PATIENT_ROLE,
        checked_from=first,
        persona={"category": case.behavior_category, "language": case.language},
        writing_system=writing_system(" ".join(original)),
        early_end=early,
    )
