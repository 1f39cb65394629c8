"""MedSP1000 evaluator and metrics (paper arXiv 2606.05112, Sections 2.1.3, 4 and 5.4), following the official
frozen-rubric evaluator (MAGIC-AI4Med/MedSP1000, MIT licence: ``controller.py`` ``_build_evaluator_prompt``,
``prompts.py`` ``build_evaluator_system_prompt_frozen_rubric``, ``src/analysis/compute_bench_5model.py``).

The evaluator (role ``grader``, temperature 0 via :func:`bedside.calls.grader`) sees the frozen rubric
(system prompt) and, in the user message, the full transcript, the action log (each action with the
environment's status and rationale) and the state summary of the encounter (:class:`bedside.medsp.records.SimState`).
It never sees the evaluator packet. It marks each item true only on explicit evidence (its prompt), with one line
of evidence per item (bedside prompts; the official format has none). By default the whole rubric is judged in
one call, as in the official code; ``batch_size`` (``-T judge_batch_size``) splits long rubrics into several
calls over the same trajectory.

Reading the evaluator's reply (``-T reading=``). ``official`` (default), as the official counter
(``compute_bench_5model.score_run``) counts: every key the evaluator returns is counted, so items it leaves
out drop from the case's denominator (counted in ``items_unscored``) and keys the rubric does not have are
counted under their competency (named in the metadata, ``extra_items``); a reply with no verdict at all is
unreadable. ``strict`` (bedside's reading): a reply that leaves an item out or whose keys do not match the
rubric is *unreadable*. An unreadable reply is retried with a fresh sample (``retries``), and if it stays
unreadable the case is **unscored** (all rates NaN: left out of every metric, counted by Inspect as
unscored, in ``judge_unscored`` and in ``items_unscored``), never scored on part of its rubric. A case
whose encounter ended with ``error`` (a model failure; the official code crashes and has no result) is
not evaluated: unscored, counted in ``erroneous``.

Score keys. The headline block (Inspect's summary, :func:`rubric_rates`) shows ``micro``, ``macro`` and
``scenario_mean``, each with its 95 % interval (bedside's interval rule, :mod:`bedside.intervals`) and n;
unscored cases are left out and n is 0 when every case is unscored:

- ``micro`` — all rubric items pooled (Σ met / Σ items over cases; the paper's and the official ``micro``).
  The per-case value is the case's completion ratio; the metric weights it by the case's item count (so
  epoch-averaged values pool correctly). Interval: percentile bootstrap over cases.
- ``macro`` — **the paper's macro** (Section 2.2: "Macro weights the six competencies equally"): the mean of
  the six competencies' pooled rates (competencies without any item left out). The per-case value is the
  mean of the case's own competency rates. Interval: percentile bootstrap over cases. Computed from the
  cases' counts; with ``--epochs`` > 1 it is NaN unless every epoch of a case gave the same verdicts (the
  counts of one epoch cannot stand for the others).
- ``scenario_mean`` — the mean of the per-case completion ratios: what the official analysis script
  (``compute_bench_5model.py``) prints as its "macro" column ("mean of per-scenario ratios"), which is not
  the paper's macro. Interval: the mean's rule (percentile bootstrap; [0, 1] scale).
- bookkeeping, shown in the ``health`` block: ``judge_unscored``, ``items_unscored``, ``erroneous`` (a failed
  run; ``erroneous_run`` in the health block), ``scenario_complete`` (the encounter ended because no state
  was left), ``examinee_turns``, ``unsupported_actions`` and ``role_fallbacks`` (patient, environment or
  grader falling back to the model under test; names in the metadata).

Every key is declared in :data:`KEYS` (scale, role, direction; :mod:`bedside.score_keys`).

Per-competency and per-specialty rates are not Inspect metrics: the score metadata holds each case's
``counts`` (competency -> [met, judged]) and ``specialty`` (also in the sample metadata), from which
``bedside strata`` computes them (per-specialty rates only for specialties with at least 5 cases;
:func:`bedside.medsp.rubric.rubric_rates_from_counts` pools any group of cases).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, Model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import collect, store_as

from bedside.calls import UNSCORED, Answer, ask, grader
from bedside.end_reasons import EndReason
from bedside.intervals import BINARY, COUNT, UNIT, case_bootstrap, mean_interval
from bedside.medsp import BENCHMARK, MedSPEndReason
from bedside.medsp.protocols import Evaluation
from bedside.medsp.records import COMPETENCIES, MedSPStore, RubricItem, Scenario, SimState
from bedside.medsp.rubric import Counts, item_ratio, rubric_rates_from_counts
from bedside.panel import Panel, panel_metadata
from bedside.roles import fallback_roles
from bedside.score_keys import ROLE_FALLBACKS_KEY, ScoreKey, declares
from bedside.scorers.medsp.evaluator import EvaluatorPrompts, load_evaluator_prompts
from bedside.scorers.metrics import key_values, summary_rows
from bedside.scorers.rescore import rescorable


def items_met(metadata: dict[str, Any]) -> dict[str, bool | None]:
    """Whether the evaluator marked each rubric item of a case met (None: not judged), from its score's metadata."""
    return {str(i["id"]): i.get("met") for i in metadata.get("items") or []}


#: the keys it writes (module docstring): the three rates of Inspect's block (:func:`rubric_rates`),
#: then the bookkeeping of the health block
KEYS = (
    ScoreKey("micro", UNIT, role="headline", pooled=True, panel="majority"),
    ScoreKey("macro", UNIT, role="headline", pooled=True),
    ScoreKey("scenario_mean", UNIT, role="headline", items=items_met),
    ScoreKey("erroneous", BINARY, role="health", health="count", health_name="erroneous_run", lower_is_better=True),
    ScoreKey("judge_unscored", BINARY, role="health", health="count", lower_is_better=True),
    ScoreKey("items_unscored", COUNT, role="health", health="count", lower_is_better=True),
    ROLE_FALLBACKS_KEY,
    ScoreKey("unsupported_actions", COUNT, role="health", health="count", lower_is_better=True),
    ScoreKey("scenario_complete", BINARY, role="health", health="tally"),
    ScoreKey("examinee_turns", COUNT, role="health", health="mean"),
)
KEY = {k.name: k for k in KEYS}


# ---------------------------------------------------------------------------------------------
# the evaluator


def evaluator_messages(
    prompts: EvaluatorPrompts, scenario: Scenario, items: Sequence[RubricItem], state: SimState
) -> list:
    """Frozen rubric (system) and transcript, action log and state summary (user); no evaluator packet."""
    return [
        ChatMessageSystem(content=prompts.evaluator_system(items)),
        ChatMessageUser(content=prompts.evaluator_user(scenario.case_id, scenario.case_id, state)),
    ]


def batches(items: Sequence[RubricItem], batch_size: int) -> list[list[RubricItem]]:
    """The whole rubric in one batch (``batch_size`` 0), else batches of ``batch_size`` items."""
    if batch_size <= 0 or batch_size >= len(items):
        return [list(items)]
    return [list(items[i : i + batch_size]) for i in range(0, len(items), batch_size)]


async def judge_rubric(
    model: Model | Panel,
    prompts: EvaluatorPrompts,
    scenario: Scenario,
    items: Sequence[RubricItem],
    state: SimState,
    retries: int,
    batch_size: int,
) -> Answer[Evaluation]:
    """Every item judged (one call per batch, each retried on its own). All or nothing: if any batch stays
    unreadable the result has no value (the case is unscored)."""

    async def one(batch: list[RubricItem]) -> Answer[Evaluation]:
        return await ask(
            model,
            evaluator_messages(prompts, scenario, batch, state),
            prompts.evaluator_protocol(batch),
            retries=retries,
        )

    results = await collect(*(one(b) for b in batches(items, batch_size)))
    merged = Answer[Evaluation](
        value=Evaluation(verdicts={}),
        replies=[r for res in results for r in res.replies],
        panel=[p for res in results for p in res.panel],
    )
    for res in results:
        if not res.ok:
            merged.value, merged.error = None, res.error
            break
        assert merged.value is not None and res.value is not None
        merged.value.verdicts.update(res.value.verdicts)
        merged.value.reasoning += res.value.reasoning
        merged.value.notes += res.value.notes
        merged.value.extra += res.value.extra
    return merged


def tally(
    items: Sequence[RubricItem], verdicts: dict[str, dict[str, Any]] | None, extra: Sequence[dict[str, Any]] = ()
) -> Counts:
    """competency -> [met, judged] over the judged rubric items (an item without a verdict is left out, as
    the official counter leaves it out) and the ``extra`` keys the official reading counts."""
    counts: Counts = {c: [0, 0] for c in COMPETENCIES}
    if verdicts is None:
        return counts
    for item in items:
        if item.id in verdicts:
            counts[item.competency][0] += int(bool(verdicts[item.id]["met"]))
            counts[item.competency][1] += 1
    for key in extra:
        counts[key["competency"]][0] += int(bool(key["met"]))
        counts[key["competency"]][1] += 1
    return counts


def case_rates(counts: Counts) -> tuple[float, float]:
    """(completion ratio, mean of the case's competency rates) of one case; NaN without items."""
    met = sum(v[0] for v in counts.values())
    judged = sum(v[1] for v in counts.values())
    if not judged:
        return UNSCORED, UNSCORED
    per = [v[0] / v[1] for v in counts.values() if v[1]]
    return met / judged, sum(per) / len(per)


# ---------------------------------------------------------------------------------------------
# metrics


def micro_rate(rates: Sequence[float], sizes: Sequence[float]) -> dict[str, float]:
    """Pooled item rate from case rates and item counts: Σ s r / Σ s, with the case-bootstrap
    interval (:func:`bedside.intervals.case_bootstrap`); no interval (NaN) below two cases."""
    pairs = [(r, s) for r, s in zip(rates, sizes) if s > 0 and r == r]
    n = len(pairs)
    if n == 0:
        return {"mean": math.nan, "lower": math.nan, "upper": math.nan, "n": 0}
    met = np.array([r * s for r, s in pairs])
    size = np.array([s for _, s in pairs])
    ci = case_bootstrap(n, lambda idx: item_ratio(met[idx].sum(-1), size[idx].sum(-1)), KEY["micro"].scale)
    return {
        "mean": float(met.sum() / size.sum()),
        "lower": ci[0] if ci else math.nan,
        "upper": ci[1] if ci else math.nan,
        "n": n,
    }


@metric(name="rubric_rates")
def rubric_rates() -> Metric:
    """The MedSP1000 block: ``micro``, ``macro`` (competency-equal, the paper's) and
    ``scenario_mean``, each with its 95 % interval rows, and ``n`` cases (module docstring); rows named
    by the keys' declared labels (:data:`KEYS`)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        micro = micro_rate(
            key_values_or_nan(scores, "micro"), [float((s.score.metadata or {}).get("items_judged", 0)) for s in scores]
        )
        scenario = key_values(scores, "scenario_mean")
        columns = {
            KEY["micro"].label: (
                micro["mean"],
                None if micro["lower"] != micro["lower"] else (micro["lower"], micro["upper"]),
                int(micro["n"]),
            )
        }
        counts = [(s.score.metadata or {}).get("counts") for s in scores]
        macro_values = key_values_or_nan(scores, "macro")
        scored = [(c, v) for c, v in zip(counts, macro_values) if v == v]
        # with epochs, the metadata holds one epoch's counts: usable only if they give the reduced value
        usable = scored and all(c is not None and abs(case_rates(c)[1] - v) <= 1e-9 for c, v in scored)
        if usable:
            rates = rubric_rates_from_counts([c for c, _ in scored if c is not None])
            ci = None if rates["macro lower"] != rates["macro lower"] else (rates["macro lower"], rates["macro upper"])
            columns[KEY["macro"].label] = (rates["macro"], ci, len(scored))
        else:
            columns[KEY["macro"].label] = (math.nan, None, len(scored))
        columns[KEY["scenario_mean"].label] = (
            float(np.mean(scenario)) if scenario else math.nan,
            mean_interval(scenario, KEY["scenario_mean"].scale),
            len(scenario),
        )
        return summary_rows(columns)

    return compute


def key_values_or_nan(scores: Sequence[SampleScore], key: str) -> list[float]:
    """``key`` of every sample score, NaN where it is unscored (keeps the alignment with metadata)."""
    out = []
    for s in scores:
        v = s.score.value.get(key) if isinstance(s.score.value, dict) else None
        out.append(float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan)
    return out


# ---------------------------------------------------------------------------------------------
# the scorer


@declares(KEYS)
@scorer(metrics=[rubric_rates()])  # the other keys: the health block
def medsp_rubric(judge_retries: int = 2, judge_batch_size: int | None = None, prompts: str | None = None) -> Scorer:
    """Judge every rubric item over the encounter (module docstring): the whole rubric in one evaluator
    call by default (``judge_batch_size`` unset), with the bedside prompts or, with ``prompts=PATH``, the official
    frozen-rubric prompts from a clone of the official repository."""
    prompt_set = load_evaluator_prompts(prompts)

    async def score(state: TaskState, target: Target) -> Score:
        scenario = Scenario.model_validate(state.metadata["scenario_record"])
        record = store_as(MedSPStore)
        sim = SimState.from_dict(record.sim_state) if record.sim_state else SimState()
        items = scenario.rubric.items()
        fallbacks = fallback_roles(BENCHMARK.roles)

        result: Answer[Evaluation]
        if record.end_reason == EndReason.ERROR:
            result = Answer(value=None, error=f"not evaluated: the encounter ended with an error ({record.error})")
        elif not items:  # the dataset leaves such scenarios out; nothing to ask
            result = Answer(value=None, error="the rubric has no item")
        else:
            model, _ = grader()
            result = await judge_rubric(model, prompt_set, scenario, items, sim, judge_retries, judge_batch_size or 0)
        verdicts = result.value.verdicts if result.value is not None else None
        extra = result.value.extra if result.value is not None else []
        counts = tally(items, verdicts, extra)
        met = sum(v[0] for v in counts.values())
        judged = sum(v[1] for v in counts.values())
        ratio, competency_mean = case_rates(counts)
        judgements = [
            {**item.model_dump(), **((verdicts or {}).get(item.id) or {"met": None, "evidence": None})}
            for item in items
        ]
        if verdicts is None:
            explanation = f"UNSCORED: {result.error or 'no rubric item to judge'}"
        else:
            per_comp = ", ".join(f"{c} {v[0]}/{v[1]}" for c, v in counts.items() if v[1])
            explanation = f"{met}/{judged} rubric items completed ({per_comp})"
        explanation += f"; end reason {record.end_reason}" + (f" ({record.error})" if record.error else "")
        explanation += (
            f"; {record.examinee_turns} examinee turns; final state {sim.progress_index}:{sim.current_phase_id}"
        )
        if fallbacks:
            explanation += f"; roles falling back to the model under test: {fallbacks}"
        return Score(
            value={
                "micro": ratio,
                "macro": competency_mean,
                "scenario_mean": ratio,
                "judge_unscored": float(verdicts is None and record.end_reason != EndReason.ERROR and bool(items)),
                "items_unscored": float(sum(1 for i in items if verdicts is None or i.id not in verdicts)),
                "erroneous": float(record.end_reason == EndReason.ERROR),
                "scenario_complete": float(record.end_reason == MedSPEndReason.SCENARIO_COMPLETE),
                "examinee_turns": float(record.examinee_turns),
                "unsupported_actions": float(record.unsupported_actions),
                "role_fallbacks": float(len(fallbacks)),
            },
            answer=record.end_reason,
            explanation=explanation,
            metadata={
                "counts": counts,
                "items_judged": judged,
                "competency_rates": {c: v[0] / v[1] for c, v in counts.items() if v[1]},
                "specialty": state.metadata.get("specialty", "unspecified"),
                "items": judgements,
                "reasoning": result.value.reasoning if result.value is not None else [],
                "evaluator_notes": result.value.notes if result.value is not None else [],
                "extra_items": extra,
                "judge_error": result.error,
                "judge_replies": len(result.replies),
                "end_reason": record.end_reason,
                "final_state": {
                    "progress_index": sim.progress_index,
                    "state_label": sim.current_phase_id,
                    "phase_history": sim.phase_history,
                },
                "action_statuses": record.action_statuses,
                "prompts": prompt_set.name,
                "role_fallbacks": fallbacks,
                **panel_metadata(result),
            },
        )

    return score


rescorable(medsp_rubric)
