"""Topic Checklist Score (paper Section 2.3.1, Eq. 1, Figure 11).

The judge answers yes/no (with a reason) for the 21 questions of ``prompts/discharge/
topic_checklist.yaml``; the score counts only the case's applicable questions (its
``checklist_questions``), parents weighing 1 and sub-questions 0.5:

    TCS_i = sum_{q in Q_i} s_q * 1[yes_q] / sum_{q in Q_i} s_q

``checklist_applicability="all"`` takes Q_i = Q (all 21 questions, a "no" for one the note does not mention, as
Figure 11 and the physicians' instructions of A.6.4 tell the annotator to answer): a lower bound on TCS,
not Eq. 1's text, which excludes the questions that do not apply.
"""

from __future__ import annotations

from typing import Any, Literal

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState

from bedside.calls import UNSCORED, ask
from bedside.discharge.mimic.eval_guard import checked_grader
from bedside.discharge.protocols import checklist_protocol, normalise_id  # noqa: F401
from bedside.discharge.records import topic_checklist_questions
from bedside.discharge.store import conversation_lines
from bedside.intervals import UNIT
from bedside.panel import panel_metadata
from bedside.prompts import render
from bedside.score_keys import UNSCORED_KEY, ScoreKey, declares
from bedside.scorers.discharge.record import case, record, system_failure_score
from bedside.scorers.metrics import summary_of
from bedside.scorers.rescore import rescorable


def answers(metadata: dict[str, Any]) -> dict[str, bool | None]:
    """The judge's yes/no answer to each applicable question of a case (its score's metadata)."""
    return dict(metadata.get("answers") or {})


#: the keys it writes: Table 1's TCS, a share of the judge's answers
KEYS = (ScoreKey("tcs", UNIT, role="headline", label="TCS", panel="majority", items=answers), UNSCORED_KEY)

#: which questions form a case's Q_i: ``rule``: the case's ``checklist_questions`` (bedside's
#: applicability rule); ``all``: all 21
ChecklistApplicability = Literal["rule", "all"]


def tcs(answers: dict[str, bool], applicable: list[str], weights: dict[str, float]) -> float:
    """Eq. 1 for one session."""
    denominator = sum(weights[q] for q in applicable)
    if denominator == 0:
        return UNSCORED
    return sum(weights[q] for q in applicable if answers.get(q)) / denominator


@declares(KEYS)
@scorer(metrics=summary_of(KEYS))
def topic_checklist(judge_retries: int = 2, checklist_applicability: ChecklistApplicability = "rule") -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        rec, the_case = record(state), case(state)
        if (excluded := system_failure_score(rec, ["tcs"])) is not None:
            return excluded
        questions = topic_checklist_questions()
        weights = {q["id"]: float(q["weight"]) for q in questions}
        applicable = (
            list(weights)
            if checklist_applicability == "all"
            else [q for q in the_case.checklist_questions if q in weights]
        )
        if not rec.history or not applicable:
            reason = "no dialogue to judge" if not rec.history else "no applicable checklist question"
            return Score(
                value={"tcs": UNSCORED, "unscored": 1.0}, explanation=reason, metadata={"end_reason": rec.end_reason}
            )
        judge, fallback = checked_grader(state)
        prompt = render(
            "discharge/judge_topic_checklist.j2",
            questions=questions,
            patient_note=the_case.discharge_note,
            conversation=conversation_lines(rec.history),
        )
        protocol = checklist_protocol(
            [q["id"] for q in questions], applicable, {q["id"]: f"[{q['topic']}] {q['text']}" for q in questions}
        )
        result = await ask(judge, prompt, protocol, retries=judge_retries)
        if not result.ok:
            return Score(
                value={"tcs": UNSCORED, "unscored": 1.0},
                explanation=f"unscored: {result.error}",
                metadata={
                    "judge_error": result.error,
                    "judge_replies": result.replies,
                    "grader_fallback": fallback,
                    "end_reason": rec.end_reason,
                    **panel_metadata(result),
                },
            )
        answers = result.require()
        value = tcs({q: a for q, (a, _) in answers.items()}, applicable, weights)
        return Score(
            value={"tcs": value, "unscored": 0.0},
            explanation="\n".join(
                f"{q} ({weights[q]:g}): {'yes' if answers[q][0] else 'no'} - {answers[q][1]}" for q in applicable
            ),
            metadata={
                "answers": {q: answers[q][0] for q in applicable},
                "applicable": applicable,
                "grader_fallback": fallback,
                "end_reason": rec.end_reason,
                **panel_metadata(result),
            },
        )

    return score


rescorable(topic_checklist)
