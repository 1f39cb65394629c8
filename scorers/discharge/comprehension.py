"""Comprehension Score (paper Section 2.3.1, Figures 9-10, Appendix A.6.4).

1. Reference answers: the judge extracts each of the six answers from the discharge note
   (Figure 10). These calls depend only on the note, so they are cached (``REFERENCE_CACHE``):
   a second educator evaluated on the same cases re-uses them.
2. The patient's post-education answers were collected by the solver (Figure 9).
3. The judge grades every answer against its reference: correct 1, partially correct 0.5,
   incorrect 0 (the physicians' rubric of A.6.4; "I don't know" is incorrect).

The six items are graded in one judge call; if that reply stays unreadable after its retries, each
item is graded in a call of its own (so one bad item does not lose the other five).

Score = mean over the six questions (the paper's definition), with one rule the paper does not
state (bedside's choice; bedside/discharge/README.md): a question whose **reference is "not applicable"**
(the note does not say) is not graded and is left out of the mean (its ``q<i>`` is NaN), counted in
``na_questions`` — otherwise the patient's "I don't know" would be graded incorrect for something the
educator could not teach. A person grading (``bedside/human`` without ``steps=true``;
:func:`bedside.calls.asks_steps`) is not asked to extract the six references: they grade each answer against
the discharge note itself, as the paper's physicians did (A.6.4), and every answered question counts (no
reference says "not applicable"; ``references_extracted`` is false in the metadata). An item whose reference,
answer or grade could not be obtained (a model failure, not a patient who did not know) is unscored and counted,
not scored 0; the session's
comprehension score is then unscored too (a mean over fewer questions would not be comparable),
while the graded items keep their per-question scores. If every reference is not applicable the
score is NaN (nothing to measure).

``comprehension_divisor="all_six"`` is the paper's literal reading instead: every answer is graded against its
reference, a "not applicable" one too (the judge decides whether the patient's answer matches "the note
does not say"), and the mean is over all six; ``na_questions`` still counts those references.
"""

from __future__ import annotations

from typing import Literal

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import collect

from bedside.calls import REFERENCE_CACHE, UNSCORED, Answer, ask, asks_steps
from bedside.discharge.mimic.eval_guard import checked_grader
from bedside.discharge.protocols import JUDGE_REFERENCE, LABELS, grade_protocol  # noqa: F401
from bedside.discharge.store import comprehension_questions
from bedside.intervals import COUNT, UNIT
from bedside.panel import panel_metadata
from bedside.prompts import render
from bedside.score_keys import UNSCORED_KEY, ScoreKey, declares
from bedside.scorers.discharge.record import case, is_not_applicable, record, system_failure_score
from bedside.scorers.metrics import summary_of
from bedside.scorers.rescore import rescorable

#: the six questions' ids (prompts/discharge/comprehension_questions.yaml)
QUESTION_IDS = tuple(q["id"] for q in comprehension_questions())
#: the keys it writes: Table 1's Comprehension (the paper's "Comprehension Score"), each question's
#: grade (bedside strata / report), the unscored items and the questions left out as not applicable
KEYS = (
    ScoreKey("comprehension", UNIT, role="headline", label="Comprehension", panel="mean"),
    *(ScoreKey(q, UNIT) for q in QUESTION_IDS),
    UNSCORED_KEY,
    ScoreKey("na_questions", COUNT, role="health", health="count", health_name="na_comprehension"),
)

#: how a question whose reference is "not applicable" counts: ``applicable``: left out of the mean
#: (bedside's choice); ``all_six``: graded against that reference like any other (the paper's words)
ComprehensionDivisor = Literal["applicable", "all_six"]


def comprehension_score(
    item_scores: dict[str, float], not_applicable: set[str] | frozenset[str] = frozenset()
) -> float:
    """Mean over the questions with an applicable reference; NaN (unscored) unless every one of
    them was graded, or when none is applicable."""
    values = [v for k, v in item_scores.items() if k not in not_applicable]
    if not values or any(v != v for v in values):
        return UNSCORED
    return sum(values) / len(values)


@declares(KEYS)
@scorer(metrics=summary_of(KEYS))  # per-question means: bedside strata / report
def comprehension(
    judge_retries: int = 2, cache_references: bool = True, comprehension_divisor: ComprehensionDivisor = "applicable"
) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        rec, the_case = record(state), case(state)
        if (excluded := system_failure_score(rec, ["comprehension", *QUESTION_IDS])) is not None:
            excluded.value["na_questions"] = UNSCORED  # type: ignore[index]
            return excluded
        questions = comprehension_questions()
        empty = {"comprehension": UNSCORED, **{q["id"]: UNSCORED for q in questions}}
        if not rec.history or not rec.comprehension:
            return Score(
                value={**empty, "unscored": float(len(questions)), "na_questions": UNSCORED},
                explanation="no dialogue / no answers",
                metadata={"end_reason": rec.end_reason},
            )
        judge, fallback = checked_grader(state)
        # a person grades against the note itself, without extracting the references first (asks_steps)
        extracted = asks_steps(judge)
        references = await collect(
            *(
                ask(
                    judge,
                    render(
                        "discharge/judge_comprehension_reference.j2",
                        discharge_note=the_case.discharge_note,
                        question=q["text"],
                    ),
                    JUDGE_REFERENCE,
                    retries=judge_retries,
                    cache=REFERENCE_CACHE if cache_references else False,
                )
                for q in questions
                if extracted
            )
        ) or [Answer(value=None) for _ in questions]
        answers = {a["id"]: a.get("answer") for a in rec.comprehension}
        na_references = {q["id"] for q, ref in zip(questions, references) if ref.ok and is_not_applicable(ref.value)}
        not_applicable = na_references if comprehension_divisor == "applicable" else set()  # the questions left out
        items = [
            {"id": q["id"], "question": q["text"], "reference": ref.value, "answer": answers.get(q["id"])}
            for q, ref in zip(questions, references)
            if (ref.ok or not extracted) and answers.get(q["id"]) and q["id"] not in not_applicable
        ]
        problems = {
            q["id"]: (ref.error or "no patient answer (model failure)")
            for q, ref in zip(questions, references)
            if not ((ref.ok or not extracted) and answers.get(q["id"])) and q["id"] not in not_applicable
        }
        source = {} if extracted else {"discharge_note": the_case.discharge_note}
        grades: dict[str, tuple[float, str]] = {}
        grade_error, grading, graded = None, "batched", []
        if items:
            ids = [i["id"] for i in items]
            criteria = {
                i["id"]: f"Question: {i['question']}\n"
                + (
                    f"Reference answer (from the discharge note): {i['reference']}\n"
                    if extracted
                    else "Reference: the discharge note (beside)\n"
                )
                + f"Patient's answer: {i['answer']}"
                for i in items
            }
            result = await ask(
                judge,
                render("discharge/judge_comprehension_grade.j2", items=items, **source),
                grade_protocol(ids, criteria),
                retries=judge_retries,
            )
            graded.append(result)
            if result.ok:
                grades = result.require()
            else:  # one item per call, so that one unreadable item does not lose the others
                grade_error, grading = result.error, "per_item"
                singles = await collect(
                    *(
                        ask(
                            judge,
                            render("discharge/judge_comprehension_grade.j2", items=[item], **source),
                            grade_protocol([item["id"]], {item["id"]: criteria[item["id"]]}),
                            retries=judge_retries,
                        )
                        for item in items
                    )
                )
                graded += singles
                for item, single in zip(items, singles):
                    if single.ok:
                        grades[item["id"]] = single.require()[item["id"]]
                    else:
                        problems[item["id"]] = f"grading: {single.error}"
        items_value = {q["id"]: grades[q["id"]][0] if q["id"] in grades else UNSCORED for q in questions}
        value = {
            "comprehension": comprehension_score(items_value, not_applicable),
            **items_value,
            "unscored": float(sum(v != v for k, v in items_value.items() if k not in not_applicable)),
            "na_questions": float(len(na_references)),
        }

        def line(qid: str) -> str:
            if qid in not_applicable:
                return f"{qid}: not applicable (the note does not say): left out"
            if qid in grades:
                return f"{qid}: {grades[qid][0]:g} - {grades[qid][1]}"
            return f"{qid}: unscored ({problems.get(qid)})"

        return Score(
            value=value,
            explanation="\n".join(line(q["id"]) for q in questions),
            metadata={
                "references": {q["id"]: r.value for q, r in zip(questions, references)},
                "references_extracted": extracted,
                "not_applicable": sorted(na_references),
                "divisor": comprehension_divisor,
                "answers": answers,
                "problems": problems,
                "grade_error": grade_error,
                "grading": grading,
                "grader_fallback": fallback,
                "end_reason": rec.end_reason,
                **panel_metadata(*graded),
            },
        )

    return score


rescorable(comprehension)
