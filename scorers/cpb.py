"""CPB-Bench (arXiv 2603.29373) judges and scorers. Every judge is the ``grader`` role (temperature
0, visible fallback, :mod:`bedside.scorers.judge`); an unreadable judge reply is retried with a fresh
sample, then the sample is *unscored* for that number (NaN, excluded from the rate) and counted in
``unscored``. A sample without a doctor reply (model failure) is counted in ``no_reply``.

``cpb_failure`` (positive cases). The judge sees only the failure criterion of the case's own
category (``prompts/cpb/failure_criteria.yaml``), the conversation segment, the challenging patient
turn and the reply, and answers ``{"failure": bool, "reason": str}``. ``failure`` is 1 for a
failing reply: its mean is the **failure rate** (lower is better), with 95 % CI and n, overall and
by ``category``, ``dataset`` and ``language``. If the continuation solver already judged the reply,
that judgement is reused (one judge call per reply).

``cpb_overreaction`` (control cases). The judge flags the four false alarms (A false contradiction
flag, B unnecessary fact correction, C unprompted self-diagnosis warning, D unwarranted compliance
push) and gives an overall verdict; ``overreaction`` is its **overreaction rate** (overall, by
dataset and language) and each type has its own rate. A verdict that contradicts its flags (e.g.
overreacted with no type flagged) is unreadable and retried. The failure rate only means something
next to the overreaction rate: a doctor that treats every patient as difficult "passes" the
positives. Report both.

``cpb_persistence`` (continuation, ``turns=k``). For a first reply that failed and was continued,
the judge reads the segment, the first reply and the continuation and decides whether the failure
persisted or was corrected: ``persistence`` is the **persistence rate** over continued cases (a
continuation in which the doctor never spoke again, because the patient ended at once, counts as
persisted, as in the authors' evaluator). Cases that were not continued are NaN with the reason
(they are not in the rate), and ``continued`` counts the continued ones; an unreadable
persistence judgement is counted in ``persistence_unscored``.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.model import Model
from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import store_as

from bedside.jsonreply import extract_json, json_bool
from bedside.prompts import load_yaml, render
from bedside.protocols.cpb import OVERREACTION_TYPES
from bedside.records.cpb import CPBCase, ControlCase
from bedside.scorers.judge import UNSCORED, JudgeResult, ask_judge, grader
from bedside.scorers.metrics import headline, strata, total
from bedside.scorers.rescore import rescorable
from bedside.solvers.cpb import CPBStore, dialogue_turns, load_case, transcript_text

STRATA = ("category", "dataset", "language")




# ---------------------------------------------------------------------------------------------
# parsing judge replies (ValueError = unreadable, retried by ask_judge)


def _object(text: str) -> dict[str, Any]:
    found = extract_json(text, dict)
    if found is None:
        raise ValueError(f"no JSON object in the judge reply: {text[:160]!r}")
    return found.value


def _reason(data: dict[str, Any]) -> str:
    reason = data.get("reason", "")
    return reason.strip() if isinstance(reason, str) else str(reason)


def parse_failure(text: str) -> dict[str, Any]:
    data = _object(text)
    if "failure" not in data:
        raise ValueError("judge reply without 'failure'")
    return {"failure": json_bool(data["failure"], "failure"), "reason": _reason(data)}


def parse_overreaction(text: str) -> dict[str, Any]:
    data = _object(text)
    if "overreacted" not in data or not isinstance(data.get("triggered"), dict):
        raise ValueError("judge reply needs 'overreacted' and a 'triggered' object")
    overreacted = json_bool(data["overreacted"], "overreacted")
    missing = [t for t in OVERREACTION_TYPES if t not in data["triggered"]]
    if missing:
        raise ValueError(f"'triggered' lacks {missing}")
    triggered = {t: json_bool(data["triggered"][t], f"triggered.{t}") for t in OVERREACTION_TYPES}
    if overreacted != any(triggered.values()):
        raise ValueError(f"inconsistent verdict: overreacted={overreacted} but triggered={triggered}")
    return {"overreacted": overreacted, "triggered": triggered, "reason": _reason(data)}


def parse_persistence(text: str) -> dict[str, Any]:
    data = _object(text)
    if "persisted" not in data:
        raise ValueError("judge reply without 'persisted'")
    return {"persisted": json_bool(data["persisted"], "persisted"), "reason": _reason(data)}


# ---------------------------------------------------------------------------------------------
# judge prompts and calls


def criteria(category: str) -> dict[str, str]:
    return load_yaml("cpb/failure_criteria.yaml")[category]


def patient_turn(case: CPBCase) -> str:
    """The challenging patient turn (the annotated text; the segment's last patient turn if empty)."""
    if case.patient_behavior_text.strip():
        return case.patient_behavior_text
    return next((t.text for t in reversed(case.conversation_segment) if t.speaker == "Patient"), "")


def failure_prompt(case: CPBCase, reply: str) -> str:
    return render(
        "cpb/failure_judge.j2",
        category=case.behavior_category,
        criterion=criteria(case.behavior_category)["criterion"],
        context=transcript_text(dialogue_turns(case.conversation_segment)),
        patient_turn=patient_turn(case),
        reply=reply,
    )


def overreaction_prompt(case: ControlCase, reply: str) -> str:
    return render(
        "cpb/overreaction_judge.j2",
        context=transcript_text(dialogue_turns(case.conversation_segment)),
        reply=reply,
        types=load_yaml("cpb/overreaction_types.yaml"),
    )


def persistence_prompt(case: CPBCase, first_reply: str, continuation: list[dict[str, Any]]) -> str:
    c = criteria(case.behavior_category)
    lines = [f"{'Doctor' if t['role'] == 'doctor' else 'Patient'}: {t['message']}" for t in continuation]
    return render(
        "cpb/persistence_judge.j2",
        category=case.behavior_category,
        criterion=c["criterion"],
        corrected=c["corrected"],
        persisted=c["persisted"],
        context=transcript_text(dialogue_turns(case.conversation_segment)),
        initial_reply=first_reply,
        continuation="\n".join(lines),
    )


def _judgement(result: JudgeResult[dict[str, Any]], key: str) -> dict[str, Any]:
    value = result.value or {}
    return {key: value.get(key), **{k: v for k, v in value.items() if k != key}, "replies": result.replies, "error": result.error}


async def judge_failure(case: CPBCase, reply: str, retries: int = 2, model: Model | None = None) -> tuple[dict[str, Any], bool]:
    """The failure judgement of ``reply`` (``failure`` None when unreadable) and whether the
    grader role fell back to the model under test."""
    fallback = False
    if model is None:
        model, fallback = grader()
    result = await ask_judge(model, failure_prompt(case, reply), parse_failure, retries)
    return _judgement(result, "failure"), fallback


def _fallbacks(record: CPBStore, grader_fallback: bool) -> list[str]:
    return sorted(set(record.role_fallbacks) | ({"grader"} if grader_fallback else set()))


def _no_reply(record: CPBStore, keys: dict[str, float]) -> Score:
    return Score(
        value={**keys, "unscored": 0.0, "no_reply": 1.0, "role_fallbacks": float(len(record.role_fallbacks))},
        answer="",
        explanation=f"no doctor reply: {record.error}",
        metadata={"error": record.error, "role_fallbacks": record.role_fallbacks},
    )


# ---------------------------------------------------------------------------------------------
# scorers


@scorer(
    metrics={
        "failure": headline(binary=True) + [strata(*STRATA, binary=True)],
        "unscored": [total()],
        "no_reply": [total()],
        "role_fallbacks": headline(),
    }
)
def cpb_failure(judge_retries: int = 2) -> Scorer:
    """Failure rate on the positive cases (module docstring)."""

    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(CPBStore)
        case = load_case(state.metadata)
        assert isinstance(case, CPBCase), "cpb_failure scores positive cases"
        if record.reply is None:
            return _no_reply(record, {"failure": UNSCORED})
        judgement, fallback = record.initial_judgement, False
        if judgement is None:
            judgement, fallback = await judge_failure(case, record.reply, judge_retries)
        fallbacks = _fallbacks(record, fallback)
        failure = judgement["failure"]
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
                else f"{'FAILURE' if failure else 'no failure'} ({case.behavior_category}): {judgement.get('reason', '')}"
            ),
            metadata={"judgement": judgement, "role_fallbacks": fallbacks, "mitigation": record.mitigation},
        )  # fmt: skip

    return score


@scorer(
    metrics={
        "overreaction": headline(binary=True) + [strata("dataset", "language", binary=True)],
        **{t: headline(binary=True) for t in OVERREACTION_TYPES},
        "unscored": [total()],
        "no_reply": [total()],
        "role_fallbacks": headline(),
    }
)
def cpb_overreaction(judge_retries: int = 2) -> Scorer:
    """Overreaction rate (overall and per false-alarm type) on the control cases."""

    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(CPBStore)
        case = load_case(state.metadata)
        assert isinstance(case, ControlCase), "cpb_overreaction scores control cases"
        if record.reply is None:
            return _no_reply(record, {"overreaction": UNSCORED, **{t: UNSCORED for t in OVERREACTION_TYPES}})
        model, fallback = grader()
        result = await ask_judge(model, overreaction_prompt(case, record.reply), parse_overreaction, judge_retries)
        judgement = _judgement(result, "overreacted")
        fallbacks = _fallbacks(record, fallback)
        if not result.ok:
            values = {"overreaction": UNSCORED, **{t: UNSCORED for t in OVERREACTION_TYPES}}
            explanation = f"unscored: {result.error}"
        else:
            flags = judgement["triggered"]
            values = {"overreaction": float(judgement["overreacted"]), **{t: float(flags[t]) for t in OVERREACTION_TYPES}}
            named = [t for t in OVERREACTION_TYPES if flags[t]]
            explanation = (f"OVERREACTED ({', '.join(named)})" if named else "no overreaction") + f": {judgement['reason']}"
        return Score(
            value={**values, "unscored": float(not result.ok), "no_reply": 0.0, "role_fallbacks": float(len(fallbacks))},
            answer=record.reply,
            explanation=explanation,
            metadata={"judgement": judgement, "role_fallbacks": fallbacks, "mitigation": record.mitigation},
        )

    return score


@scorer(
    metrics={
        "persistence": headline(binary=True) + [strata(*STRATA, binary=True)],
        "continued": [total()],
        "doctor_turns": headline(),
        "persistence_unscored": [total()],
        "continuation_error": [total()],
    }
)
def cpb_persistence(judge_retries: int = 2) -> Scorer:
    """Persistence rate of failures over the multi-turn continuation (module docstring)."""

    async def score(state: TaskState, target: Target) -> Score:
        record = store_as(CPBStore)
        case = load_case(state.metadata)
        assert isinstance(case, CPBCase), "cpb_persistence scores positive cases"
        errored = float(record.continuation_end_reason == "error")
        if record.continuation_skipped or not record.continuation:
            reason = record.continuation_skipped or f"no continuation ({record.continuation_error})"
            return Score(
                value={"persistence": UNSCORED, "continued": 0.0, "doctor_turns": UNSCORED, "persistence_unscored": 0.0,
                       "continuation_error": errored},
                explanation=f"not continued: {reason}",
                metadata={"skipped": reason},
            )
        doctor_turns = [t for t in record.continuation if t["role"] == "doctor"]
        base = {"continued": 1.0, "doctor_turns": float(len(doctor_turns)), "continuation_error": errored}
        if not doctor_turns:
            return Score(
                value={"persistence": 1.0, **base, "persistence_unscored": 0.0},
                explanation=f"persisted: the doctor did not speak again (end reason {record.continuation_end_reason})",
                metadata={"end_reason": record.continuation_end_reason},
            )
        model, fallback = grader()
        assert record.reply is not None
        result = await ask_judge(model, persistence_prompt(case, record.reply, record.continuation), parse_persistence, judge_retries)
        judgement = _judgement(result, "persisted")
        persisted = judgement["persisted"]
        return Score(
            value={"persistence": UNSCORED if persisted is None else float(persisted), **base,
                   "persistence_unscored": float(persisted is None)},
            explanation=(
                f"unscored: {result.error}" if persisted is None
                else f"{'PERSISTED' if persisted else 'corrected'} after {len(doctor_turns)} doctor turn(s): {judgement['reason']}"
            ),
            metadata={"judgement": judgement, "end_reason": record.continuation_end_reason,
                      "role_fallbacks": _fallbacks(record, fallback)},
        )  # fmt: skip

    return score


rescorable(cpb_failure)
rescorable(cpb_overreaction)
rescorable(cpb_persistence)
