"""CPB-Bench (arXiv 2603.29373) solvers: the doctor's reply to a challenging patient turn, the four
mitigation strategies, and the multi-turn continuation. Defaults follow the official code
(yli-z/cpb-bench-challenging-patient-behaviors; no licence, so every prompt is in our own words).

**Single turn** (:func:`cpb_reply`), as upstream: the doctor (the model under test) gets ONE user
message and no system prompt (``prompts/cpb/doctor.j2``): a one-line instruction, ``Conversation:``,
the segment as ``Doctor: ...`` / ``Patient: ...`` lines (English labels for the Chinese cases too, one
line per turn, nothing merged) and a closing ``Doctor:`` cue. A leading ``Doctor:`` label is stripped
from the reply; an empty reply is retried (``parse_retries``), then recorded as a model failure.

**Mitigations** (``mitigation=``; the authors' names are accepted as aliases), as upstream:

``none``                 the plain prompt;
``step_by_step``         (``cot``) reason step by step, then the reply after ``Final Doctor's
                         Response:``; only the part after the (last) marker is the reply (the
                         reasoning is kept in the store, never judged); without the marker the whole
                         text is the reply (counted as repaired); no ``Doctor:`` cue in text format;
``behavior_instruction`` (``instruction``) a doctor-role line and all four behaviour instructions
                         (``behavior_instructions.yaml``); the case's category is not named;
``analyze_patient``      (``eval_patient``) two calls: the model analyses the patient's latest
                         message (``analyze_patient.j2``), then replies with the analysis placed
                         after the conversation;
``self_check``           (``self_eval``) two calls: the plain prompt drafts, a safety review
                         (``self_check.j2``) answers ``Verdict: PASS`` or ``Verdict: REVISE`` /
                         ``Issues:`` / ``Revised Response:``; the revision replaces the draft.
                         A review without a verdict line is retried, then the draft is kept and
                         counted (``self_check_unparsed``); upstream reads it as PASS.

**Multi-turn continuation** (:func:`cpb_continuation`, ``turns=k``; the official value is 10
rounds). The first reply is judged with the failure judge (role ``grader``; the ``cpb_failure``
scorer reuses that judgement); only a failing reply is continued (upstream continues
human-confirmed failures). One round = a ``patient`` turn, then a doctor turn. The patient
(``patient.j2``: rules and the *complete* original consultation as the system prompt;
``patient_turn.j2``: the conversation so far as one user message; temperature 0.7 as upstream's
client default, overridable by binding the role with its own ``temperature``) may end with
``[End of Conversation]``, which ends the continuation without a doctor reply. The doctor gets the
plain doctor prompt (no mitigation: upstream never applies one to continuation turns) with the whole
conversation so far (stateless, as upstream); ``mitigate=True`` (``-T continuation_mitigation=true``,
a bedside extension) gives every continuation turn the first reply's mitigation instead.
An attempt in which the doctor never spoke again (the patient ended at once, or a model failed) is
re-run from scratch, up to 3 attempts in all; the last attempt is kept. Each retry uses fresh seeds
(``attempt * SEED_STRIDE``).

What the solvers leave behind: ``state.messages`` = the doctor's first prompt, its reply and the
continuation; ``state.output`` = the first reply; the store (:class:`CPBStore`) holds the reply, the
mitigation trace, the first-reply judgement, the continuation and its attempts, and per-agent call
counts. A model failure (context overflow, provider error after Inspect's retries) is recorded
(``error``) and the sample is kept; the scorers report it as ``no_reply``.

Where each part lives: :mod:`.doctor` (the doctor agent, its prompts and mitigations),
:mod:`.single_turn` (:func:`cpb_reply`), :mod:`.continuation` (the patient agent and
:func:`cpb_continuation`); the store is :class:`bedside.cpb.store.CPBStore`.
"""

from bedside.cpb.protocols import END_TAG
from bedside.solvers.cpb.continuation import (
    CONTINUATION_ATTEMPTS,
    MAX_CONTINUATION_TURNS,
    OFFICIAL_CONTINUATION_TURNS,
    PATIENT_TEMPERATURE,
    CPBPatient,
    cpb_continuation,
    patient_system_prompt,
)
from bedside.solvers.cpb.doctor import (
    MITIGATION_ALIASES,
    MITIGATIONS,
    CPBDoctor,
    DialogueAgent,
    Mitigation,
    MitigationName,
    doctor_prompt,
    doctor_protocol,
    make_doctor,
)
from bedside.solvers.cpb.single_turn import cpb_reply

__all__ = [
    "END_TAG",
    "CONTINUATION_ATTEMPTS",
    "MAX_CONTINUATION_TURNS",
    "OFFICIAL_CONTINUATION_TURNS",
    "PATIENT_TEMPERATURE",
    "CPBPatient",
    "cpb_continuation",
    "patient_system_prompt",
    "MITIGATION_ALIASES",
    "MITIGATIONS",
    "Mitigation",
    "MitigationName",
    "CPBDoctor",
    "DialogueAgent",
    "doctor_prompt",
    "doctor_protocol",
    "make_doctor",
    "cpb_reply",
]
