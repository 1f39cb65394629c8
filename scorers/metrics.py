"""What Inspect shows at the end of a run: each benchmark's headline numbers, then one health block.

Every headline scorer declares its metrics as ``[summary(keys)]``: one block per scorer in Inspect's
terminal summary and in ``inspect view``, with one row per number and readable row names —

    NA           4.200      the mean (the paper's column label, :data:`LABELS`, else the score key)
    NA lower     3.900      the 95 % interval (no rows when there is no interval: n < 2)
    NA upper     4.500
    n            24         scored samples (one ``n`` row when every key of the block has the same n,
                            else ``NA n`` per key); 0, never NaN, when every sample is unscored

The interval follows bedside's one rule, chosen by each key's declared scale
(:mod:`bedside.intervals`). Bookkeeping (system failures, unscored sub-scores, role fallbacks,
repaired or unparsed replies, turns ...) is not a headline number: each scorer still writes it in
its per-sample score value, and the :func:`health` scorer (last in every task) gathers it from the
other scorers of the sample into one block of counts.

Per-stratum numbers (ICD chapter, persona axes, category, dataset, language, specialty) are not
Inspect metrics: ``bedside strata LOG`` and ``bedside report`` compute them from the log with the
same interval rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState

from bedside.intervals import mean_interval, scale_of, wilson

#: the papers' column labels for score keys (DischargeBench Table 1; CPB-Bench false-alarm types)
LABELS = {
    "naturalness": "NA",
    "responsiveness": "RE",
    "clarity": "CL",
    "clinical_relevance": "CR",
    "readability": "RD",
    "tcs": "TCS",
    "comprehension": "Comp",
    "rouge_l": "ROUGE-L",
    "A_false_contradiction_flag": "A",
    "B_unnecessary_fact_correction": "B",
    "C_unprompted_selfdiagnosis_warning": "C",
    "D_unwarranted_compliance_push": "D",
}


def label(key: str) -> str:
    return LABELS.get(key, key)


def key_values(scores: Sequence[SampleScore], key: str) -> list[float]:
    """The scored (non-NaN, numeric) values of ``key`` in dict-valued sample scores."""
    out = []
    for s in scores:
        value = s.score.value
        if isinstance(value, dict):
            v = value.get(key)
            if isinstance(v, int | float) and not isinstance(v, bool) and v == v:
                out.append(float(v))
    return out


def summary_rows(columns: dict[str, tuple[float, tuple[float, float] | None, int]]) -> dict[str, float]:
    """Rows of one block from ``label -> (mean, interval or None, n)`` (module docstring)."""
    out: dict[str, float] = {}
    for name, (mean, interval, _) in columns.items():
        out[name] = mean
        if interval is not None:
            out[f"{name} lower"], out[f"{name} upper"] = interval
    counts = {name: n for name, (_, _, n) in columns.items()}
    if len(set(counts.values())) <= 1:
        out["n"] = next(iter(counts.values()), 0)
    else:
        out.update({f"{name} n": n for name, n in counts.items()})
    return out


@metric(name="summary")
def summary(keys: list[str]) -> Metric:
    """Mean, 95 % interval and n of each of ``keys`` (module docstring)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        columns = {}
        for key in keys:
            values = key_values(scores, key)
            mean = float(np.mean(values)) if values else math.nan  # as Inspect's mean(): same digits
            columns[label(key)] = (mean, mean_interval(values, scale_of(key)), len(values))
        return summary_rows(columns)

    return compute


# --- health: the bookkeeping of every scorer, in one block -----------------------------------

#: bookkeeping keys gathered by :func:`health`, in display order, with how a sample's values are
#: combined over scorers ("sum": e.g. unscored sub-scores of every scorer; "max": the same fact
#: written by several scorers, e.g. role fallbacks) and how the block shows them over samples
#: ("count": the sum; "mean": the mean, shown as ``<key> (mean)``)
HEALTH: dict[str, tuple[str, str]] = {
    "system_failure": ("max", "count"),
    "erroneous_run": ("max", "count"),
    "no_reply": ("max", "count"),
    "unscored": ("sum", "count"),
    "judge_unscored": ("max", "count"),
    "items_unscored": ("max", "count"),
    "persistence_unscored": ("max", "count"),
    "na_comprehension": ("max", "count"),
    "na_factual": ("max", "count"),
    "role_fallbacks": ("max", "count"),
    "monitor_unparsed": ("max", "count"),
    "patient_repaired": ("max", "count"),
    "discarded_turns": ("max", "count"),
    "soft_corrections": ("max", "count"),
    "char_break": ("max", "count"),
    "short_session": ("max", "count"),
    "continuation_error": ("max", "count"),
    "unsupported_actions": ("max", "count"),
    "scenario_complete": ("max", "count"),
    "continued": ("max", "count"),
    "safety_turns": ("max", "count"),
    "safety_unsafe_turns": ("max", "count"),
    "safety_unscored_turns": ("max", "count"),
    "turns": ("max", "mean"),
    "examinee_turns": ("max", "mean"),
    "doctor_turns": ("max", "mean"),
}
#: score keys whose name differs in the health block (MedSP's ``erroneous`` is a failed run, not
#: DischargeBench's erroneous session; each DischargeBench scorer counts its own not-applicable questions)
HEALTH_RENAME = {
    ("medsp_rubric", "erroneous"): "erroneous_run",
    ("comprehension", "na_questions"): "na_comprehension",  # questions left out as not applicable
    ("factual_consistency", "na_questions"): "na_factual",
}


def gather_health(scores: dict[str, Score]) -> dict[str, float]:
    """One sample's bookkeeping from its other scores (:data:`HEALTH`)."""
    gathered: dict[str, list[float]] = {}
    for name, score in scores.items():
        if name == "health" or not isinstance(score.value, dict):
            continue
        for key, value in score.value.items():
            key = HEALTH_RENAME.get((name, key), key)
            if key in HEALTH and isinstance(value, int | float) and not isinstance(value, bool):
                gathered.setdefault(key, [])
                if value == value:  # NaN (not applicable to this sample) keeps the key, adds nothing
                    gathered[key].append(float(value))
    out = {}
    for key, (combine, _) in HEALTH.items():
        if key in gathered:
            found = gathered[key]
            out[key] = (sum(found) if combine == "sum" else max(found)) if found else math.nan
    return out


@metric(name="health_counts")
def health_counts() -> Metric:
    """``samples`` and, per bookkeeping key present, its count over samples or its mean."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        out: dict[str, float] = {"samples": float(len(scores))}
        for key, (_, shown) in HEALTH.items():
            values = key_values(scores, key)
            if not values:
                continue
            if shown == "count":
                out[key] = sum(values)
            else:
                out[f"{key} (mean)"] = sum(values) / len(values)
        return out

    return compute


@scorer(metrics=[health_counts()])
def health() -> Scorer:
    """Bookkeeping of the sample gathered from the scorers that ran before it (put it last): system
    failures, unscored sub-scores (summed over scorers), role fallbacks, unparsed or repaired
    replies, turns ... (:data:`HEALTH`). Not a paper number: read it to judge whether a run's
    headline numbers can be trusted."""

    async def score(state: TaskState, target: Target) -> Score:
        scores = state.scores or {}
        value = gather_health(scores)
        problems = [
            f"{k} {v:g}"
            for k, v in value.items()
            if HEALTH[k][1] == "count" and v and k not in ("scenario_complete", "continued")
        ]
        fallbacks = sorted({r for s in scores.values() for r in (s.metadata or {}).get("role_fallbacks") or []})
        return Score(
            value=value,
            explanation="; ".join(problems) if problems else "no bookkeeping problem",
            metadata={"role_fallbacks": fallbacks, "from_scorers": [n for n in scores if n != "health"]},
        )

    return score


# --- rates as text for the command-line reports ------------------------------------------------


def rate_text(values: list[float]) -> str:
    """A rate of 0/1 outcomes as text for reports: ``mean [lower, upper] n=k`` (Wilson, the rate rule
    of :mod:`bedside.intervals`; no interval below n = 2)."""
    if not values:
        return "n=0"
    mean = sum(values) / len(values)
    if len(values) < 2:
        return f"{mean:.3f} n={len(values)}"
    lower, upper = wilson(int(sum(values)), len(values))
    return f"{mean:.3f} [{lower:.3f}, {upper:.3f}] n={len(values)}"


from bedside.scorers.rescore import rescorable  # noqa: E402

rescorable(health)
