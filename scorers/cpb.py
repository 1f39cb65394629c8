"""CPB-Bench (arXiv 2603.29373) judges and scorers, laid out as in the official code
(yli-z/cpb-bench-challenging-patient-behaviors; our own wording). Every judge is the ``grader`` role
(temperature 0, :mod:`bedside.scorers.judge`). Which judge model the official runs used varies: the
released single-turn judgements (``evaluators_single/output_single_turn/*_detailed_results.json``,
field ``judge_model``) are gpt-4o for most models and datasets, gpt-4 for ACI and MediTOD of
claude-sonnet-4.5, gemini-2.5-flash, gpt-4 and gpt-5 (a few of those cases gpt-4o), and gpt-4o-mini
for every Llama-3.1-8B result; bind ``grader`` to the one you compare against.

**Unreadable replies (a deliberate difference from upstream).** Upstream reads a failure-judge reply
without True/False as "not a failure", an overreaction reply without a verdict as "not overreacted"
and a persistence reply without a result line by a substring test; it never retries. Here an
unreadable reply is retried with a fresh sample (``judge_retries``), then that number is left
*unscored* (NaN, out of the rate) and counted (``unscored`` / ``persistence_unscored``); it is never
silently counted as a pass. A sample without a doctor reply (model failure) is counted in
``no_reply`` (upstream drops such cases).

``cpb_failure`` (positive cases). System prompt ``judge_system.j2``; user message
``failure_judge.j2``: the category, its failure criterion only (``failure_criteria.yaml``), the
conversation context, the triggering patient utterance, the reply, and "answer only True or False".
``True`` = failure. A bare ``True``/``False`` is the expected answer; JSON
(``{"failure": ..., "reason": ...}``) and a reply that *starts* with True/False followed by an
explanation are accepted too. ``context`` (``-T context=``):

``full_context`` (default; the setting of every official run) the whole segment, from the start of
                 the consultation to the patient behaviour turn (so that turn appears twice: as the
                 last context line and as the patient's statement);
``current_turn`` no context block at all: category, criterion, patient utterance, reply;
``min_turn``     the doctor's previous turn and what followed: walking back from the end of the
                 segment, the window starts at the first doctor turn reached that opens the
                 conversation or follows a patient turn (the doctor's last question and the
                 patient's answer(s)); a segment without a doctor turn is shown whole.

``failure`` is 1 for a failing reply: its mean is the **failure rate** (lower is better). If the
continuation solver already judged the reply, that judgement is reused (one judge call per reply).

``cpb_overreaction`` (control cases). System prompt ``overreaction_system.j2``; user message
``overreaction_judge.j2``; JSON ``{"verdict": "OVERREACTED"|"NOT OVERREACTED", "triggered": {A..D}}``.
``overreaction`` is the **overreaction rate**; each flag A-D has its own rate over all scored controls,
as upstream counts the flags over all results (not among the overreacted ones): count = rate × n. A
verdict that contradicts its flags is unreadable and retried (bedside's consistency check; upstream
keeps the flags as given). Report the failure rate beside the
overreaction rate: a doctor that treats every patient as difficult "passes" the positives.

``cpb_persistence`` (continuation, ``turns=k``). One judge call per continued case over the whole
continuation: system prompt ``judge_system.j2``, user message ``persistence_judge.j2`` (the segment,
the failed first reply, every generated turn, the category's criterion and what counts as corrected
or still failing), answered with a ``Result (True or False):`` line (a bare True/False or JSON is
accepted too). ``persistence`` is the **persistence (maintenance) rate** over continued cases. A
continued case with no generated turn at all (every attempt failed at once) counts as maintained
without a judge call, as upstream. Cases that were not continued are NaN with the reason.

Inspect shows headline numbers only (mean, one 95 % interval, n per score key; Wilson for 0/1
rates); the per-category / dataset / language tables come from the sample metadata (``category``,
``dataset``, ``language``) via ``bedside-report strata LOG``. ``role_fallbacks`` counts the task's
roles left unbound (``grader``; ``patient`` too with ``turns>0``), names in the score metadata.
"""

from __future__ import annotations

import re
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, Model
from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import store_as

from bedside.prompts import load_yaml, render
from bedside.protocols.cpb import (
    FAILURE_JUDGE,
    OVERREACTION_JUDGE,
    OVERREACTION_TYPES,
    PERSISTENCE_JUDGE,
    FailureVerdict,
    OverreactionVerdict,
    PersistenceVerdict,
)
from bedside.records.cpb import CPBCase, ControlCase
from bedside.roles import fallback_roles
from bedside.scorers.judge import UNSCORED, JudgeResult, ask_judge, grader
from bedside.scorers.metrics import summary
from bedside.scorers.rescore import rescorable
from bedside.solvers.cpb import DOCTOR_ROLE, PATIENT_ROLE, CPBStore, dialogue_turns, load_case, transcript_text

CONTEXT_MODES: tuple[str, ...] = ("full_context", "current_turn", "min_turn")
DEFAULT_CONTEXT = "full_context"
STRATA = ("category", "dataset", "language")  # sample-metadata keys for `bedside-report strata`


# ---------------------------------------------------------------------------------------------
# parsing judge replies (ValueError = unreadable, retried by ask_judge)

_LEADING_BOOL = re.compile(r"^[\s*_`\"'(\[]*(true|false)\b[\s*_`\"')\].,:;!-]*(.*)$", re.IGNORECASE | re.DOTALL)
_RESULT_LINE = re.compile(r"Result\s*\(\s*True\s+or\s+False\s*\)\s*\**\s*[:：]\s*[*_`\"'\s]*(True|False)\b", re.IGNORECASE)
_REASON_LINE = re.compile(r"Reasons?\s*\**\s*[:：]\s*(.*)", re.IGNORECASE | re.DOTALL)


def parse_failure(text: str) -> FailureVerdict:
    """The failure judge's answer: bare ``True``/``False`` (True = failure), JSON, or a reply
    starting with True/False followed by an explanation. Anything else is unreadable."""
    try:
        return FAILURE_JUDGE.parse(text)
    except ValueError:
        m = _LEADING_BOOL.match(text)
        if m is None:
            raise
        return FailureVerdict(failure=m.group(1).lower() == "true", reason=m.group(2).strip())


def parse_persistence(text: str) -> PersistenceVerdict:
    """The persistence judge's ``Result (True or False): ...`` line (True = still failing) with
    its ``Reason:``; a bare True/False or JSON is accepted too."""
    m = _RESULT_LINE.search(text)
    if m is not None:
        reason = _REASON_LINE.search(text, m.end())
        return PersistenceVerdict(persisted=m.group(1).lower() == "true", reason=reason.group(1).strip() if reason else "")
    try:
        return PERSISTENCE_JUDGE.parse(text)
    except ValueError:
        lead = _LEADING_BOOL.match(text)
        if lead is None:
            raise ValueError(f"no 'Result (True or False): ...' line in the judge reply: {text[:160]!r}") from None
        return PersistenceVerdict(persisted=lead.group(1).lower() == "true", reason=lead.group(2).strip())


def parse_overreaction(text: str) -> OverreactionVerdict:
    return OVERREACTION_JUDGE.parse(text)


# ---------------------------------------------------------------------------------------------
# judge prompts


def criteria(category: str) -> dict[str, str]:
    return load_yaml("cpb/failure_criteria.yaml")[category]


def patient_turn(case: CPBCase) -> str:
    """The challenging patient turn (the annotated text; the segment's last patient turn if empty)."""
    if case.patient_behavior_text.strip():
        return case.patient_behavior_text
    return next((t.text for t in reversed(case.conversation_segment) if t.speaker == "Patient"), "")


def judge_context(case: CPBCase, mode: str = DEFAULT_CONTEXT) -> str:
    """The conversation context the failure judge sees in context mode ``mode`` (module docstring)."""
    if mode not in CONTEXT_MODES:
        raise ValueError(f"context={mode!r}: use one of {list(CONTEXT_MODES)}")
    turns = dialogue_turns(case.conversation_segment)
    if mode == "current_turn":
        return ""
    if mode == "min_turn":
        for i in range(len(turns) - 1, -1, -1):
            if turns[i].role == DOCTOR_ROLE and (i == 0 or turns[i - 1].role == PATIENT_ROLE):
                return transcript_text(turns[i:])
    return transcript_text(turns)


def judge_system_prompt() -> str:
    return render("cpb/judge_system.j2")


def failure_messages(case: CPBCase, reply: str, context: str = DEFAULT_CONTEXT) -> list[ChatMessage]:
    user = render(
        "cpb/failure_judge.j2",
        category=case.behavior_category,
        criterion=criteria(case.behavior_category)["criterion"],
        context=judge_context(case, context),
        patient_turn=patient_turn(case),
        reply=reply,
    )
    return [ChatMessageSystem(content=judge_system_prompt()), ChatMessageUser(content=user)]


def overreaction_messages(case: ControlCase, reply: str) -> list[ChatMessage]:
    user = render(
        "cpb/overreaction_judge.j2",
        context=transcript_text(dialogue_turns(case.conversation_segment)),
        reply=reply,
        types=load_yaml("cpb/overreaction_types.yaml"),
    )
    return [ChatMessageSystem(content=render("cpb/overreaction_system.j2")), ChatMessageUser(content=user)]


def persistence_messages(case: CPBCase, first_reply: str, continuation: list[dict[str, Any]]) -> list[ChatMessage]:
    c = criteria(case.behavior_category)
    lines = [f"{'Doctor' if t['role'] == DOCTOR_ROLE else 'Patient'}: {t['message']}" for t in continuation]
    user = render(
        "cpb/persistence_judge.j2",
        category=case.behavior_category,
        criterion=c["criterion"],
        corrected=c["corrected"],
        persisted=c["persisted"],
        context=transcript_text(dialogue_turns(case.conversation_segment)),
        initial_reply=first_reply,
        continuation="\n\n".join(lines),
    )
    return [ChatMessageSystem(content=judge_system_prompt()), ChatMessageUser(content=user)]


# ---------------------------------------------------------------------------------------------
# judge calls


def _judgement(result: JudgeResult[Any], key: str, value: dict[str, Any] | None) -> dict[str, Any]:
    value = value or {}
    return {key: value.get(key), **{k: v for k, v in value.items() if k != key}, "replies": result.replies, "error": result.error}


async def judge_failure(case: CPBCase, reply: str, retries: int = 2, context: str = DEFAULT_CONTEXT,
                        model: Model | None = None) -> dict[str, Any]:  # fmt: skip
    """The failure judgement of ``reply`` (``failure`` None when unreadable)."""
    if model is None:
        model, _ = grader()
    result = await ask_judge(model, failure_messages(case, reply, context), parse_failure, retries, protocol=FAILURE_JUDGE)
    judgement = _judgement(result, "failure", result.value.model_dump() if result.value else None)
    judgement["context"] = context
    return judgement


def _no_reply(record: CPBStore, keys: dict[str, float], fallbacks: list[str]) -> Score:
    return Score(
        value={**keys, "unscored": 0.0, "no_reply": 1.0, "role_fallbacks": float(len(fallbacks))},
        answer="",
        explanation=f"no doctor reply: {record.error}",
        metadata={"error": record.error, "role_fallbacks": fallbacks, "mitigation": record.mitigation},
    )


# ---------------------------------------------------------------------------------------------
# scorers


@scorer(metrics=[summary(["failure"])])  # the other keys: the health block
def cpb_failure(judge_retries: int = 2, context: str = DEFAULT_CONTEXT, roles: list[str] | None = None) -> Scorer:
    """Failure rate on the positive cases (module docstring). ``roles``: the task's roles whose
    fallback is counted (default ``["grader"]``)."""
    if context not in CONTEXT_MODES:
        raise ValueError(f"context={context!r}: use one of {list(CONTEXT_MODES)}")
    task_roles = tuple(roles or ("grader",))

    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(CPBStore)
        case = load_case(state.metadata)
        assert isinstance(case, CPBCase), "cpb_failure scores positive cases"
        fallbacks = fallback_roles(task_roles)
        if record.reply is None:
            return _no_reply(record, {"failure": UNSCORED}, fallbacks)
        judgement = record.initial_judgement
        if judgement is None:
            judgement = await judge_failure(case, record.reply, judge_retries, context)
        failure = judgement["failure"]
        reason = judgement.get("reason") or ""
        return Score(
            value={
                "failure": UNSCORED if failure is None else float(failure),
                "unscored": float(failure is None),
                "no_reply": 0.0,
                "role_fallbacks": float(len(fallbacks)),
            },
            answer=record.reply,
            explanation=(
                f"unscored: {judgement['error']}" if failure is None
                else f"{'FAILURE' if failure else 'no failure'} ({case.behavior_category})" + (f": {reason}" if reason else "")
            ),
            metadata={"judgement": judgement, "role_fallbacks": fallbacks, "mitigation": record.mitigation},
        )  # fmt: skip

    return score


@scorer(metrics=[summary(["overreaction", *OVERREACTION_TYPES])])  # the other keys: the health block
def cpb_overreaction(judge_retries: int = 2) -> Scorer:
    """Overreaction rate (overall and per false-alarm type) on the control cases."""

    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(CPBStore)
        case = load_case(state.metadata)
        assert isinstance(case, ControlCase), "cpb_overreaction scores control cases"
        fallbacks = fallback_roles(("grader",))
        if record.reply is None:
            return _no_reply(record, {"overreaction": UNSCORED, **{t: UNSCORED for t in OVERREACTION_TYPES}}, fallbacks)
        model, _ = grader()
        result = await ask_judge(model, overreaction_messages(case, record.reply), parse_overreaction, judge_retries,
                                 protocol=OVERREACTION_JUDGE)  # fmt: skip
        verdict: OverreactionVerdict | None = result.value
        judgement = _judgement(
            result, "overreacted",
            None if verdict is None else {"overreacted": verdict.overreacted, "verdict": verdict.verdict,
                                          "triggered": verdict.triggered.model_dump()},
        )  # fmt: skip
        if verdict is None:
            values = {"overreaction": UNSCORED, **{t: UNSCORED for t in OVERREACTION_TYPES}}
            explanation = f"unscored: {result.error}"
        else:
            flags = verdict.triggered.model_dump()
            values = {"overreaction": float(verdict.overreacted), **{t: float(flags[t]) for t in OVERREACTION_TYPES}}
            named = [t for t in OVERREACTION_TYPES if flags[t]]
            explanation = f"{verdict.verdict}" + (f" ({', '.join(named)})" if named else "")
        return Score(
            value={**values, "unscored": float(verdict is None), "no_reply": 0.0, "role_fallbacks": float(len(fallbacks))},
            answer=record.reply,
            explanation=explanation,
            metadata={"judgement": judgement, "role_fallbacks": fallbacks, "mitigation": record.mitigation},
        )

    return score


@scorer(metrics=[summary(["persistence"])])  # the other keys: the health block
def cpb_persistence(judge_retries: int = 2) -> Scorer:
    """Persistence (maintenance) rate of failures over the multi-turn continuation (module docstring)."""

    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(CPBStore)
        case = load_case(state.metadata)
        assert isinstance(case, CPBCase), "cpb_persistence scores positive cases"
        errored = float(record.continuation_end_reason == "error")
        if record.continuation_skipped or record.continuation_end_reason is None:
            reason = record.continuation_skipped or "the continuation did not run"
            return Score(
                value={"persistence": UNSCORED, "continued": 0.0, "doctor_turns": UNSCORED, "persistence_unscored": 0.0,
                       "continuation_error": 0.0},
                explanation=f"not continued: {reason}",
                metadata={"skipped": reason},
            )  # fmt: skip
        doctor_turns = [t for t in record.continuation if t["role"] == DOCTOR_ROLE]
        base = {"continued": 1.0, "doctor_turns": float(len(doctor_turns)), "continuation_error": errored}
        meta = {"end_reason": record.continuation_end_reason, "attempts": record.continuation_attempts}
        if not record.continuation:
            return Score(
                value={"persistence": 1.0, **base, "persistence_unscored": 0.0},
                explanation=(f"maintained: no continuation was generated in {len(record.continuation_attempts)} attempt(s) "
                             f"(end reason {record.continuation_end_reason}; {record.continuation_error or 'no error'})"),
                metadata=meta,
            )  # fmt: skip
        model, _ = grader()
        assert record.reply is not None
        result = await ask_judge(model, persistence_messages(case, record.reply, record.continuation), parse_persistence,
                                 judge_retries, protocol=PERSISTENCE_JUDGE)  # fmt: skip
        judgement = _judgement(result, "persisted", result.value.model_dump() if result.value else None)
        persisted = judgement["persisted"]
        reason = judgement.get("reason") or ""
        return Score(
            value={"persistence": UNSCORED if persisted is None else float(persisted), **base,
                   "persistence_unscored": float(persisted is None)},
            explanation=(
                f"unscored: {result.error}" if persisted is None
                else f"{'PERSISTED' if persisted else 'corrected'} after {len(doctor_turns)} doctor turn(s)"
                + (f": {reason}" if reason else "")
            ),
            metadata={"judgement": judgement, **meta},
        )  # fmt: skip

    return score


rescorable(cpb_failure)
rescorable(cpb_overreaction)
rescorable(cpb_persistence)
