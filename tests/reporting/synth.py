"""Small EvalLogs built directly (no model call), with known scores, metadata and model events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai.event import ModelEvent
from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.scorer import Score

NAN = float("nan")
TABLE1 = (
    "naturalness",
    "responsiveness",
    "clarity",
    "clinical_relevance",
    "readability",
    "tcs",
    "comprehension",
    "rouge_l",
    "cosine",
)


def event(
    role: str | None,
    model: str,
    input_tokens: int,
    output_tokens: int,
    cache: str | None = None,
    cache_read: int | None = None,
    batch: bool | None = None,
) -> ModelEvent:
    usage = ModelUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens + (cache_read or 0),
        input_tokens_cache_read=cache_read,
    )
    return ModelEvent(
        model=model,
        role=role,
        input=[],
        tools=[],
        tool_choice="none",
        config=GenerateConfig(batch=batch),
        output=ModelOutput(model=model, choices=[], usage=usage),
        cache=cache,
    )


def sample(
    sid: str,
    scores: dict[str, Score],
    metadata: dict[str, Any] | None = None,
    epoch: int = 1,
    events: list | None = None,
) -> EvalSample:
    return EvalSample(
        id=sid, epoch=epoch, input="x", target="", metadata=metadata or {}, scores=scores, events=events or []
    )


def log(task: str, model: str, samples: list[EvalSample], task_args: dict | None = None) -> EvalLog:
    spec = EvalSpec(
        created="2026-01-01T00:00:00+00:00",
        task=task,
        dataset=EvalDataset(name="synthetic"),
        model=model,
        config=EvalConfig(),
        task_args=task_args or {},
    )
    return EvalLog(eval=spec, status="success", samples=samples)


def write(the_log: EvalLog, path: Path) -> str:
    write_eval_log(the_log, str(path))
    return str(path)


def discharge_case(
    sid: str,
    *,
    end: str,
    values: dict[str, float],
    turns: int = 20,
    char_break_turns=(),
    persona: dict[str, str] | None = None,
    chapter: str = "Neoplasms",
    answers: dict[str, bool] | None = None,
    events: list | None = None,
) -> EvalSample:
    """A DischargeBench sample as the scorers write it (``values``: Table 1 keys and q1..q6)."""
    system = end in ("error", "system_failure")
    clean = end == "clean_complete"
    v = {k: (NAN if system else values.get(k, NAN)) for k in (*TABLE1, "q1", "q2", "q3", "q4", "q5", "q6")}
    outcome = Score(
        value={
            "system_failure": float(system),
            "clean_complete": NAN if system else float(clean),
            "erroneous": NAN if system else float(not clean),
            "short_session": float(turns <= 15) if clean else NAN,
            "char_break": float(bool(char_break_turns)) if clean else NAN,
            "turns": float(turns),
            "role_fallbacks": 0.0,
        },
        answer=end,
        metadata={"end_reason": end, "char_break_turns": list(char_break_turns)},
    )
    scores = {
        "encounter_outcome": outcome,
        "conversation_quality": Score(value={k: v[k] for k in TABLE1[:5]} | {"unscored": 0.0}),
        "topic_checklist": Score(value={"tcs": v["tcs"], "unscored": 0.0}, metadata={"answers": answers or {}}),
        "comprehension": Score(value={k: v[k] for k in ("q1", "q2", "q3", "q4", "q5", "q6", "comprehension")}),
        "factual_consistency": Score(value={"rouge_l": v["rouge_l"], "cosine": v["cosine"]}),
    }
    meta = {
        "icd_chapter": chapter,
        "end_reason": end,
        **(
            persona
            or {
                "personality": "anxious",
                "education_level": "high",
                "health_literacy": "low",
                "recall_level": "accurate",
            }
        ),
    }
    return sample(sid, scores, meta, events=events)


def versioned_log(folder: Path, name: str, model: str, versions: dict[str, Any], shift: float) -> str:
    """A DischargeBench log of six clean sessions (``naturalness`` shifted by ``shift``) whose ``data_versions``
    record is ``versions``, written as ``folder/<name>.eval``."""
    from bedside.versions import KEY

    samples = [
        discharge_case(f"c{i}", end="clean_complete", values={"naturalness": 3 + shift + 0.1 * i, "tcs": 0.5})
        for i in range(6)
    ]
    the_log = log("bedside/discharge", model, samples)
    the_log.eval.metadata = {KEY: versions}
    return write(the_log, folder / f"{name}.eval")
