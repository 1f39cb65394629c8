"""Factual Consistency (paper Section 2.3.1, Figure 12).

The judge answers the six questions twice: from the discharge note (cached, it does not depend on
the model under test) and from the dialogue. ROUGE-L F-measure and the cosine similarity of
all-MiniLM-L6-v2 embeddings are computed for each question's pair of answers and averaged over the
six questions. List answers are joined with "; ". Both metrics run off the event loop.
"""

from __future__ import annotations

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import collect

from bedside.calls import REFERENCE_CACHE, UNSCORED, ask, grader
from bedside.prompts import render
from bedside.protocols.discharge import JUDGE_FACTUAL, read_factual
from bedside.scorers.rescore import rescorable
from bedside.scorers.discharge_record import case, conversation_lines, record, score_metrics, system_failure_score
from bedside.scorers.text_metrics import cosine_async, rouge_l_async

N_QUESTIONS = 6
parse_answers = read_factual  # the protocol's reader (old name)


@scorer(metrics=score_metrics("rouge_l", "cosine"))
def factual_consistency(judge_retries: int = 2, cache_references: bool = True) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        rec, the_case = record(state), case(state)
        if (excluded := system_failure_score(rec, ["rouge_l", "cosine"])) is not None:
            return excluded
        empty = {"rouge_l": UNSCORED, "cosine": UNSCORED, "unscored": 2.0}
        if not rec.history:
            return Score(value=empty, explanation="no dialogue", metadata={"end_reason": rec.end_reason})
        judge, fallback = grader()
        note_side, dialogue_side = await collect(
            ask(judge, render("discharge/judge_factual_consistency.j2", source=the_case.discharge_note),
                JUDGE_FACTUAL, retries=judge_retries, cache=REFERENCE_CACHE if cache_references else False),
            ask(judge, render("discharge/judge_factual_consistency.j2", source="\n".join(conversation_lines(rec.history))),
                JUDGE_FACTUAL, retries=judge_retries),
        )
        meta = {"note_answers": note_side.value, "dialogue_answers": dialogue_side.value,
                "judge_error": note_side.error or dialogue_side.error, "grader_fallback": fallback,
                "end_reason": rec.end_reason}
        if not (note_side.ok and dialogue_side.ok):
            return Score(value=empty, explanation=f"unscored: {meta['judge_error']}", metadata=meta)
        pairs = list(zip(note_side.value, dialogue_side.value))
        rouge = await rouge_l_async(pairs)
        cos = await cosine_async(pairs)
        meta |= {"rouge_l_per_question": rouge, "cosine_per_question": cos}
        return Score(
            value={"rouge_l": sum(rouge) / len(rouge), "cosine": sum(cos) / len(cos), "unscored": 0.0},
            explanation="\n".join(f"q{i + 1}: ROUGE-L {r:.3f}, cosine {c:.3f}" for i, (r, c) in enumerate(zip(rouge, cos))),
            metadata=meta,
        )

    return score


rescorable(factual_consistency)
