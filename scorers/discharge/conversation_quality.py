"""Conversation Quality (paper Section 2.3.1, Figure 8): one judge call rates naturalness,
responsiveness, clarity and clinical relevance 1-5 with a reason each; Readability is the
Flesch-Kincaid grade level of the educator's turns (no judge)."""

from __future__ import annotations

from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState

from bedside.calls import UNSCORED, ask
from bedside.discharge.mimic.eval_guard import checked_grader
from bedside.discharge.protocols import AXES, JUDGE_QUALITY, quality_form
from bedside.discharge.store import conversation_lines, educator_text
from bedside.intervals import LIKERT, UNBOUNDED
from bedside.panel import panel_metadata
from bedside.prompts import render
from bedside.score_keys import UNSCORED_KEY, ScoreKey, declares
from bedside.scorers.discharge.record import record, system_failure_score
from bedside.scorers.discharge.text_metrics import readability_async
from bedside.scorers.metrics import summary_of
from bedside.scorers.rescore import rescorable

#: the keys it writes: Table 1's Conversation Quality columns (the judge's axes, AXES, then readability)
KEYS = (
    ScoreKey("naturalness", LIKERT, role="headline", label="NA", panel="mean"),
    ScoreKey("responsiveness", LIKERT, role="headline", label="RE", panel="mean"),
    ScoreKey("clarity", LIKERT, role="headline", label="CL", panel="mean"),
    ScoreKey("clinical_relevance", LIKERT, role="headline", label="CR", panel="mean"),
    ScoreKey("readability", UNBOUNDED, role="headline", label="RD"),  # a grade level: no fixed range
    UNSCORED_KEY,
)


@declares(KEYS)
@scorer(metrics=summary_of(KEYS))
def conversation_quality(judge_retries: int = 2) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        rec = record(state)
        if (excluded := system_failure_score(rec, list(AXES) + ["readability"])) is not None:
            return excluded
        educator = educator_text(rec.history)
        fk = await readability_async(educator) if educator.strip() else UNSCORED
        if not rec.history:
            return Score(
                value={**{a: UNSCORED for a in AXES}, "readability": fk, "unscored": float(len(AXES) + 1)},
                explanation="no dialogue to judge",
                metadata={"end_reason": rec.end_reason},
            )
        judge, fallback = checked_grader(state)
        prompt = render("discharge/judge_conversation_quality.j2", conversation=conversation_lines(rec.history))
        result = await ask(judge, prompt, JUDGE_QUALITY.using(form=quality_form()), retries=judge_retries)
        ratings = result.value or {}
        value = {a: float(ratings[a].score) if a in ratings else UNSCORED for a in AXES}
        value["readability"] = fk
        value["unscored"] = float(sum(v != v for v in value.values()))  # NaN != NaN
        explanation = (
            "\n".join(f"{a}: {ratings[a].score} - {ratings[a].reason}" for a in AXES)
            if result.ok
            else f"unscored: {result.error}"
        )
        return Score(
            value=value,
            explanation=explanation,
            metadata={
                "judge_error": result.error,
                "judge_replies": result.replies,
                "grader_fallback": fallback,
                "end_reason": rec.end_reason,
                **panel_metadata(result),
            },
        )

    return score


rescorable(conversation_quality)
