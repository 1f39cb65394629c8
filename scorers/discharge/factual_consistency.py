"""Factual Consistency (paper Section 2.3.1, Figure 12).

The judge answers the six questions twice: from the discharge note (cached, it does not depend on
the model under test) and from the dialogue. ROUGE-L F-measure and the cosine similarity of
all-MiniLM-L6-v2 embeddings are computed for each question's pair of answers (paired by position: the
note's q1 with the dialogue's q1, ...) and averaged over the questions. List answers are joined with
"; ". Both metrics run off the event loop.

"Not applicable" (bedside's rule; the paper is silent): a question whose note-side answer (the
reference) is not applicable (:func:`bedside.scorers.discharge.record.is_not_applicable`) is left
out of both means and counted in ``na_questions``; two matching "not applicable" answers would
otherwise score 1.0 on both metrics for a topic the note never mentions. A dialogue-side "not
applicable" against an applicable reference stays in (the dialogue missed what the note says). If
every reference is not applicable, both scores are NaN (nothing to compare).

A person grading (``bedside/human`` without ``steps=true``; :func:`bedside.calls.asks_steps`) is not asked the
two extractions (12 free-text answers that no physician rating study uses): both scores are NaN, with the
reason in the explanation, and nothing is counted unscored.
"""

from __future__ import annotations

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import collect

from bedside.calls import REFERENCE_CACHE, UNSCORED, ask, asks_steps
from bedside.discharge.mimic.eval_guard import checked_grader
from bedside.discharge.protocols import JUDGE_FACTUAL, factual_form
from bedside.discharge.store import conversation_lines
from bedside.intervals import COSINE, COUNT, UNIT
from bedside.prompts import render
from bedside.score_keys import UNSCORED_KEY, ScoreKey, declares
from bedside.scorers.discharge.record import case, is_not_applicable, record, system_failure_score
from bedside.scorers.discharge.text_metrics import cosine_async, rouge_l_async
from bedside.scorers.metrics import summary_of
from bedside.scorers.rescore import rescorable

#: why a session graded by a person has no factual consistency (:func:`bedside.calls.asks_steps`)
NOT_ASKED = (
    "not scored: the grader is a person, who is not asked the judge's two extractions of six answers each "
    "(give bedside/human steps=true to ask them)"
)
#: the keys it writes: Table 1's Factual Consistency columns, the unscored count and the questions
#: left out as not applicable
KEYS = (
    ScoreKey("rouge_l", UNIT, role="headline", label="ROUGE-L"),
    ScoreKey("cosine", COSINE, role="headline"),
    UNSCORED_KEY,
    ScoreKey("na_questions", COUNT, role="health", health="count", health_name="na_factual"),
)


@declares(KEYS)
@scorer(metrics=summary_of(KEYS))
def factual_consistency(judge_retries: int = 2, cache_references: bool = True) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        rec, the_case = record(state), case(state)
        if (excluded := system_failure_score(rec, ["rouge_l", "cosine"])) is not None:
            excluded.value["na_questions"] = UNSCORED  # type: ignore[index]
            return excluded
        empty = {"rouge_l": UNSCORED, "cosine": UNSCORED, "unscored": 2.0, "na_questions": UNSCORED}
        if not rec.history:
            return Score(value=empty, explanation="no dialogue", metadata={"end_reason": rec.end_reason})
        judge, fallback = checked_grader(state)
        if not asks_steps(judge):  # a person rates; the two extractions are asked of them only with steps=true
            return Score(
                value={**empty, "unscored": 0.0},
                explanation=NOT_ASKED,
                metadata={"not_asked": NOT_ASKED, "grader_fallback": fallback, "end_reason": rec.end_reason},
            )
        protocol = JUDGE_FACTUAL.using(form=factual_form())
        note_side, dialogue_side = await collect(
            ask(
                judge,
                render("discharge/judge_factual_consistency.j2", source=the_case.discharge_note),
                protocol,
                retries=judge_retries,
                cache=REFERENCE_CACHE if cache_references else False,
            ),
            ask(
                judge,
                render("discharge/judge_factual_consistency.j2", source="\n".join(conversation_lines(rec.history))),
                protocol,
                retries=judge_retries,
            ),
        )
        meta = {
            "note_answers": note_side.value,
            "dialogue_answers": dialogue_side.value,
            "judge_error": note_side.error or dialogue_side.error,
            "grader_fallback": fallback,
            "end_reason": rec.end_reason,
        }
        if not (note_side.ok and dialogue_side.ok):
            return Score(value=empty, explanation=f"unscored: {meta['judge_error']}", metadata=meta)
        all_pairs = list(zip(note_side.require(), dialogue_side.require()))
        applicable = [i for i, (reference, _) in enumerate(all_pairs) if not is_not_applicable(reference)]
        pairs = [all_pairs[i] for i in applicable]
        rouge = await rouge_l_async(pairs)
        cos = await cosine_async(pairs)
        per_rouge: list[float | None] = [None] * len(all_pairs)
        per_cos: list[float | None] = [None] * len(all_pairs)
        for i, r, c in zip(applicable, rouge, cos):
            per_rouge[i], per_cos[i] = r, c
        not_applicable = [f"q{i + 1}" for i in range(len(all_pairs)) if i not in applicable]
        meta |= {"rouge_l_per_question": per_rouge, "cosine_per_question": per_cos, "not_applicable": not_applicable}
        return Score(
            value={
                "rouge_l": sum(rouge) / len(rouge) if rouge else UNSCORED,
                "cosine": sum(cos) / len(cos) if cos else UNSCORED,
                "unscored": 0.0,
                "na_questions": float(len(not_applicable)),
            },
            explanation="\n".join(
                f"q{i + 1}: ROUGE-L {r:.3f}, cosine {c:.3f}"
                if r is not None
                else f"q{i + 1}: not applicable in the note: left out"
                for i, (r, c) in enumerate(zip(per_rouge, per_cos))
            ),
            metadata=meta,
        )

    return score


rescorable(factual_consistency)
