"""CPB-Bench (arXiv 2603.29373) judges and scorers, laid out as in the official code
(yli-z/cpb-bench-challenging-patient-behaviors; our own wording). Every judge is the ``grader`` role
(temperature 0, :mod:`bedside.calls`). Which judge model the official runs used varies: the
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
``dataset``, ``language``) via ``bedside strata LOG``. ``role_fallbacks`` counts the task's
roles left unbound (``grader``; ``patient`` too with ``turns>0``), names in the score metadata.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import store_as

from bedside.calls import UNSCORED, ask, grader
from bedside.cpb.judges import (  # noqa: F401  (judge prompts re-exported under their old module)
    CONTEXT_MODES,
    DEFAULT_CONTEXT,
    DOCTOR_ROLE,
    JudgeContext,
    _judgement,
    criteria,
    failure_messages,
    judge_context,
    judge_failure,
    judge_system_prompt,
    load_case,
    overreaction_messages,
    patient_turn,
    persistence_messages,
)
from bedside.cpb.protocols import (
    OVERREACTION_JUDGE,
    OVERREACTION_TYPES,
    PERSISTENCE_JUDGE,
    OverreactionReading,
)
from bedside.cpb.records import ControlCase, CPBCase
from bedside.cpb.store import CPBStore
from bedside.end_reasons import EndReason
from bedside.intervals import BINARY, COUNT
from bedside.roles import fallback_roles
from bedside.score_keys import ROLE_FALLBACKS_KEY, UNSCORED_KEY, ScoreKey, declares
from bedside.scorers.metrics import summary_of
from bedside.scorers.rescore import rescorable

#: a sample without a usable doctor reply (model failure)
NO_REPLY_KEY = ScoreKey("no_reply", BINARY, role="health", health="count", lower_is_better=True)


def _no_reply(record: CPBStore, keys: dict[str, float], fallbacks: list[str]) -> Score:
    return Score(
        value={**keys, "unscored": 0.0, "no_reply": 1.0, "role_fallbacks": float(len(fallbacks))},
        answer="",
        explanation=f"no doctor reply: {record.error}",
        metadata={"error": record.error, "role_fallbacks": fallbacks, "mitigation": record.mitigation},
    )


def _panel_apart(judgement: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The judgement without a panel's records, and the records for the score's own metadata (``{}`` for one
    judge)."""
    rest = {k: v for k, v in judgement.items() if k != "panel"}
    return rest, ({"panel": judgement["panel"]} if "panel" in judgement else {})


# ---------------------------------------------------------------------------------------------
# scorers


#: the keys cpb_failure writes: the failure rate (lower is better), then its bookkeeping (health block)
FAILURE_KEYS = (
    ScoreKey("failure", BINARY, role="headline", lower_is_better=True, panel="majority"),
    NO_REPLY_KEY,
    UNSCORED_KEY,
    ROLE_FALLBACKS_KEY,
)


@declares(FAILURE_KEYS)
@scorer(metrics=summary_of(FAILURE_KEYS))
def cpb_failure(judge_retries: int = 2, context: JudgeContext = DEFAULT_CONTEXT, turns: int = 0) -> Scorer:
    """Failure rate on the positive cases (module docstring). The roles whose fallback is counted: the
    grader, and the continuation's patient with ``turns``."""
    if context not in CONTEXT_MODES:
        raise ValueError(f"context={context!r}: use one of {list(CONTEXT_MODES)}")
    task_roles = ("grader", "patient") if turns else ("grader",)

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
        judgement, panel = _panel_apart(judgement)
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
                f"unscored: {judgement['error']}"
                if failure is None
                else f"{'FAILURE' if failure else 'no failure'} ({case.behavior_category})"
                + (f": {reason}" if reason else "")
            ),
            metadata={"judgement": judgement, "role_fallbacks": fallbacks, "mitigation": record.mitigation, **panel},
        )

    return score


#: the keys cpb_overreaction writes: the overreaction rate, each false-alarm type's rate (the paper's types
#: A-D, the judge's JSON fields), then its bookkeeping (health block); every rate is lower-is-better
OVERREACTION_KEYS = (
    ScoreKey("overreaction", BINARY, role="headline", lower_is_better=True, panel="majority"),
    *(
        ScoreKey(t, BINARY, role="summary", label=t.partition("_")[0], lower_is_better=True, panel="majority")
        for t in OVERREACTION_TYPES
    ),
    NO_REPLY_KEY,
    UNSCORED_KEY,
    ROLE_FALLBACKS_KEY,
)


@declares(OVERREACTION_KEYS, tasks=("cpb_control",))
@scorer(metrics=summary_of(OVERREACTION_KEYS))
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
        result = await ask(
            model,
            overreaction_messages(case, record.reply),
            OVERREACTION_JUDGE,
            retries=judge_retries,
        )
        verdict: OverreactionReading | None = result.value
        judgement = _judgement(
            result,
            "overreacted",
            None
            if verdict is None
            else {
                "overreacted": verdict.overreacted,
                "verdict": verdict.verdict,
                "triggered": verdict.triggered.model_dump(),
            },
        )
        judgement, panel = _panel_apart(judgement)
        if verdict is None:
            values = {"overreaction": UNSCORED, **{t: UNSCORED for t in OVERREACTION_TYPES}}
            explanation = f"unscored: {result.error}"
        else:
            flags = verdict.triggered.model_dump()
            values = {"overreaction": float(verdict.overreacted), **{t: float(flags[t]) for t in OVERREACTION_TYPES}}
            named = [t for t in OVERREACTION_TYPES if flags[t]]
            explanation = f"{verdict.verdict}" + (f" ({', '.join(named)})" if named else "")
        return Score(
            value={
                **values,
                "unscored": float(verdict is None),
                "no_reply": 0.0,
                "role_fallbacks": float(len(fallbacks)),
            },
            answer=record.reply,
            explanation=explanation,
            metadata={"judgement": judgement, "role_fallbacks": fallbacks, "mitigation": record.mitigation, **panel},
        )

    return score


#: the keys cpb_persistence writes: the persistence rate over continued cases, then its bookkeeping
PERSISTENCE_KEYS = (
    ScoreKey("persistence", BINARY, role="headline", lower_is_better=True, panel="majority"),
    ScoreKey("persistence_unscored", BINARY, role="health", health="count", lower_is_better=True),
    ScoreKey("continuation_error", BINARY, role="health", health="count", lower_is_better=True),
    ScoreKey("continued", BINARY, role="health", health="tally"),
    ScoreKey("doctor_turns", COUNT, role="health", health="mean"),
)


@declares(PERSISTENCE_KEYS, when=lambda arguments: arguments["turns"] > 0)  # the multi-turn continuation
@scorer(metrics=summary_of(PERSISTENCE_KEYS))
def cpb_persistence(judge_retries: int = 2) -> Scorer:
    """Persistence (maintenance) rate of failures over the multi-turn continuation (module docstring)."""

    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(CPBStore)
        case = load_case(state.metadata)
        assert isinstance(case, CPBCase), "cpb_persistence scores positive cases"
        errored = float(record.continuation_end_reason == EndReason.ERROR)
        if record.continuation_skipped or record.continuation_end_reason is None:
            reason = record.continuation_skipped or "the continuation did not run"
            return Score(
                value={
                    "persistence": UNSCORED,
                    "continued": 0.0,
                    "doctor_turns": UNSCORED,
                    "persistence_unscored": 0.0,
                    "continuation_error": 0.0,
                },
                explanation=f"not continued: {reason}",
                metadata={"skipped": reason},
            )
        doctor_turns = [t for t in record.continuation if t.role == DOCTOR_ROLE]
        base = {"continued": 1.0, "doctor_turns": float(len(doctor_turns)), "continuation_error": errored}
        meta = {"end_reason": record.continuation_end_reason, "attempts": record.continuation_attempts}
        if not record.continuation:
            return Score(
                value={"persistence": 1.0, **base, "persistence_unscored": 0.0},
                explanation=(
                    f"maintained: no continuation was generated in {len(record.continuation_attempts)} attempt(s) "
                    f"(end reason {record.continuation_end_reason}; {record.continuation_error or 'no error'})"
                ),
                metadata=meta,
            )
        model, _ = grader()
        assert record.reply is not None
        result = await ask(
            model,
            persistence_messages(case, record.reply, record.continuation),
            PERSISTENCE_JUDGE,
            retries=judge_retries,
        )
        judgement, panel = _panel_apart(
            _judgement(result, "persisted", result.value.model_dump() if result.value else None)
        )
        persisted = judgement["persisted"]
        reason = judgement.get("reason") or ""
        return Score(
            value={
                "persistence": UNSCORED if persisted is None else float(persisted),
                **base,
                "persistence_unscored": float(persisted is None),
            },
            explanation=(
                f"unscored: {result.error}"
                if persisted is None
                else f"{'PERSISTED' if persisted else 'corrected'} after {len(doctor_turns)} doctor turn(s)"
                + (f": {reason}" if reason else "")
            ),
            metadata={"judgement": judgement, **meta, **panel},
        )

    return score


rescorable(cpb_failure)
rescorable(cpb_overreaction)
rescorable(cpb_persistence)
