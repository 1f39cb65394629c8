"""MedSP1000 evaluator and metrics (paper arXiv 2606.05112, Sections 2.1.3, 4 and 5.4), following the official
frozen-rubric evaluator (MAGIC-AI4Med/MedSP1000, MIT licence: ``controller.py`` ``_build_evaluator_prompt``,
``prompts.py`` ``build_evaluator_system_prompt_frozen_rubric``, ``src/analysis/compute_bench_5model.py``).

The evaluator (role ``grader``, temperature 0 via :func:`bedside.scorers.judge.grader`) sees the frozen rubric
(system prompt) and, in the user message, the full transcript, the action log (each action with the
environment's status and rationale) and the state summary of the encounter (:class:`bedside.solvers.medsp.SimState`).
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
unscored, in ``judge_unscored`` and in ``items_unscored``), never scored on part of its rubric. A case whose encounter ended with ``error`` (a model failure; the official code crashes and has no
result) is not evaluated: unscored, counted in ``erroneous``.

Score keys (Inspect shows for each its mean, one 95 % interval within [0, 1] and n; unscored cases are left out
and n is 0 when every case is unscored):

- ``micro`` — all rubric items pooled (Σ met / Σ items over cases; the official ``micro``). The per-case value
  is the case's completion ratio; the metric weights it by the case's item count (so epoch-averaged values
  pool correctly). Interval: delta method of the ratio estimator with the case as unit, t quantile, clipped.
- ``macro_scenario`` — the mean of the per-case completion ratios (the official ``macro``; the paper's
  case-level completion rate). Interval: t, clipped (Wilson when every case rate is 0 or 1).
- ``macro_competency`` — the mean of the six competencies' pooled rates (competencies without any item left
  out; bedside's, not an official number). The per-case value is the mean of the case's own competency rates.
  Interval: delta method, clipped. Computed from the cases' counts; with ``--epochs`` > 1 it is NaN unless
  every epoch of a case gave the same verdicts (the counts of one epoch cannot stand for the others).
- ``judge_unscored``, ``items_unscored`` (with their ``total``), ``erroneous``, ``scenario_complete`` (the
  encounter ended because no state was left), ``examinee_turns``, ``unsupported_actions`` and
  ``role_fallbacks`` (patient, environment or grader falling back to the model under test; names in the
  metadata).

Per-competency and per-specialty rates are not Inspect metrics: the score metadata holds each case's
``counts`` (competency -> [met, judged]) and ``specialty`` (also in the sample metadata), from which
``bedside-report strata`` computes them (per-specialty rates only for specialties with at least 5 cases;
:func:`rubric_rates_from_counts` pools any group of cases).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from inspect_ai.model import ChatMessageSystem, ChatMessageUser, Model
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import collect, store_as
from scipy.stats import t as student_t

from bedside.records.medsp import COMPETENCIES, RubricItem, Scenario
from bedside.roles import fallback_roles
from bedside.calls import UNSCORED, Answer, ask, grader
from bedside.scorers.metrics import headline, total
from bedside.scorers.rescore import rescorable
from bedside.solvers.encounter import ERROR
from bedside.solvers.medsp import SCENARIO_COMPLETE, Evaluation, MedSPStore, PromptSet, SimState, load_prompt_set

Counts = dict[str, list[int]]  # competency -> [met, judged]
ROLES = ("patient", "environment", "grader")


# ---------------------------------------------------------------------------------------------
# the evaluator


def evaluator_messages(prompts: PromptSet, scenario: Scenario, items: Sequence[RubricItem], state: SimState) -> list:
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
    model: Model, prompts: PromptSet, scenario: Scenario, items: Sequence[RubricItem], state: SimState, retries: int, batch_size: int
) -> Answer[Evaluation]:
    """Every item judged (one call per batch, each retried on its own). All or nothing: if any batch stays
    unreadable the result has no value (the case is unscored)."""

    async def one(batch: list[RubricItem]) -> Answer[Evaluation]:
        return await ask(model, evaluator_messages(prompts, scenario, batch, state), prompts.evaluator_protocol(batch), retries=retries)

    results = await collect(*(one(b) for b in batches(items, batch_size)))
    merged = Answer[Evaluation](value=Evaluation(verdicts={}), replies=[r for res in results for r in res.replies])
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


def _t(n: int) -> float:
    return float(student_t.ppf(0.975, n - 1))


def ratio_ci(residuals: Sequence[float], estimate: float) -> tuple[float, float]:
    """``estimate ± t · se`` with ``se² = Σ z² / (n (n − 1))`` (delta method, case = unit), clipped to
    [0, 1]; NaN bounds below two cases."""
    n = len(residuals)
    if n < 2:
        return math.nan, math.nan
    se = math.sqrt(sum(z * z for z in residuals) / (n * (n - 1)))
    half = _t(n) * se
    return max(0.0, estimate - half), min(1.0, estimate + half)


def micro_rate(rates: Sequence[float], sizes: Sequence[float]) -> dict[str, float]:
    """Pooled item rate from case rates and item counts: Σ s r / Σ s, delta-method interval."""
    pairs = [(r, s) for r, s in zip(rates, sizes) if s > 0 and r == r]
    n = len(pairs)
    if n == 0:
        return {"mean": math.nan, "lower": math.nan, "upper": math.nan, "n": 0}
    total_items = sum(s for _, s in pairs)
    rate = sum(r * s for r, s in pairs) / total_items
    s_bar = total_items / n
    lo, hi = ratio_ci([s * (r - rate) / s_bar for r, s in pairs], rate)
    return {"mean": rate, "lower": lo, "upper": hi, "n": n}


def rubric_rates_from_counts(cases: Sequence[Counts]) -> dict[str, float]:
    """Pooled rates of a group of cases from their counts: ``micro``, each competency (``PC`` ... with
    ``<c> n`` cases holding it and ``<c> items``), ``macro_competency`` (with ``macro_competency k``
    competencies averaged) and ``macro_scenario`` (mean of case ratios), each with ``lower``/``upper``
    (95 %, clipped) — for reports over any stratum (e.g. a specialty)."""
    out: dict[str, float] = {}
    cases = [c for c in cases if sum(v[1] for v in c.values()) > 0]
    n = len(cases)
    if n == 0:
        return out
    m = [sum(v[0] for v in c.values()) for c in cases]
    s = [sum(v[1] for v in c.values()) for c in cases]
    micro = micro_rate([mi / si for mi, si in zip(m, s)], s)
    out.update({"micro": micro["mean"], "micro lower": micro["lower"], "micro upper": micro["upper"],
                "micro n": float(n), "micro items": float(sum(s))})  # fmt: skip
    ratios = [mi / si for mi, si in zip(m, s)]
    mean_ratio = sum(ratios) / n
    if n >= 2:
        sd = math.sqrt(sum((r - mean_ratio) ** 2 for r in ratios) / (n - 1))
        half = _t(n) * sd / math.sqrt(n)
        lo, hi = max(0.0, mean_ratio - half), min(1.0, mean_ratio + half)
    else:
        lo = hi = math.nan
    out.update({"macro_scenario": mean_ratio, "macro_scenario lower": lo, "macro_scenario upper": hi, "macro_scenario n": float(n)})
    present: dict[str, tuple[float, float, list[float]]] = {}
    for comp in COMPETENCIES:
        mc = [c[comp][0] for c in cases]
        sc = [c[comp][1] for c in cases]
        if sum(sc) == 0:
            continue
        rate = sum(mc) / sum(sc)
        holders = [i for i, x in enumerate(sc) if x > 0]
        sc_bar = sum(sc) / len(holders)
        lo, hi = ratio_ci([(mc[i] - rate * sc[i]) / sc_bar for i in holders], rate)
        out.update({comp: rate, f"{comp} lower": lo, f"{comp} upper": hi, f"{comp} n": float(len(holders)), f"{comp} items": float(sum(sc))})
        present[comp] = (rate, sum(sc) / n, [(mc[i] - rate * sc[i]) for i in range(n)])
    k = len(present)
    macro = sum(rate for rate, _, _ in present.values()) / k
    z = [sum(res[i] / sbar for _, sbar, res in present.values()) / k for i in range(n)]
    lo, hi = ratio_ci(z, macro)
    out.update({"macro_competency": macro, "macro_competency lower": lo, "macro_competency upper": hi,
                "macro_competency n": float(n), "macro_competency k": float(k)})  # fmt: skip
    return out


@metric(name="pooled")
def pooled(kind: str = "micro") -> Metric:
    """``mean`` (the pooled rate), 95 % ``lower``/``upper`` and ``n`` (cases) of ``micro`` or
    ``macro_competency`` (module docstring)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        empty = {"mean": math.nan, "lower": math.nan, "upper": math.nan, "n": 0}
        if kind == "micro":
            sizes = [float((s.score.metadata or {}).get("items_judged", 0)) for s in scores]
            return micro_rate([s.score.as_float() for s in scores], sizes)
        counts = [(s.score.metadata or {}).get("counts") for s in scores]
        if not scores or any(c is None for c in counts):
            return {**empty, "n": len(scores)}
        # with epochs, the metadata holds one epoch's counts: usable only if it matches the reduced value
        if any(abs(case_rates(c)[1] - s.score.as_float()) > 1e-9 for c, s in zip(counts, scores)):
            return {**empty, "n": len(scores)}
        rates = rubric_rates_from_counts(counts)  # type: ignore[arg-type]
        return {"mean": rates["macro_competency"], "lower": rates["macro_competency lower"],
                "upper": rates["macro_competency upper"], "n": len(scores)}  # fmt: skip

    return compute


# ---------------------------------------------------------------------------------------------
# the scorer


@scorer(
    metrics={
        "micro": [pooled("micro")],
        "macro_scenario": headline(binary=True),
        "macro_competency": [pooled("macro_competency")],
        "judge_unscored": headline(binary=True) + [total()],
        "items_unscored": headline() + [total()],
        "erroneous": headline(binary=True),
        "scenario_complete": headline(binary=True),
        "examinee_turns": headline(),
        "unsupported_actions": headline(),
        "role_fallbacks": headline(),
    }
)
def medsp_rubric(retries: int = 2, batch_size: int = 0, prompts: str | None = None) -> Scorer:
    """Judge every rubric item over the encounter (module docstring): the whole rubric in one evaluator
    call by default (``batch_size`` 0), with the bedside prompts or, with ``prompts=PATH``, the official
    frozen-rubric prompts from a clone of the official repository."""
    prompt_set = load_prompt_set(prompts)

    async def score(state: TaskState, target: Target) -> Score:
        scenario = Scenario.model_validate(state.metadata["scenario_record"])
        record = store_as(MedSPStore)
        sim = SimState.from_dict(record.sim_state) if record.sim_state else SimState()
        items = scenario.rubric.items()
        fallbacks = fallback_roles(ROLES)

        result: Answer[Evaluation]
        if record.end_reason == ERROR:
            result = Answer(value=None, error=f"not evaluated: the encounter ended with an error ({record.error})")
        elif not items:  # the dataset leaves such scenarios out; nothing to ask
            result = Answer(value=None, error="the rubric has no item")
        else:
            model, _ = grader()
            result = await judge_rubric(model, prompt_set, scenario, items, sim, retries, batch_size)
        verdicts = result.value.verdicts if result.value is not None else None
        extra = result.value.extra if result.value is not None else []
        counts = tally(items, verdicts, extra)
        met = sum(v[0] for v in counts.values())
        judged = sum(v[1] for v in counts.values())
        ratio, competency_mean = case_rates(counts)
        judgements = [{**item.model_dump(), **((verdicts or {}).get(item.id) or {"met": None, "evidence": None})} for item in items]
        if verdicts is None:
            explanation = f"UNSCORED: {result.error or 'no rubric item to judge'}"
        else:
            per_comp = ", ".join(f"{c} {v[0]}/{v[1]}" for c, v in counts.items() if v[1])
            explanation = f"{met}/{judged} rubric items completed ({per_comp})"
        explanation += f"; end reason {record.end_reason}" + (f" ({record.error})" if record.error else "")
        explanation += f"; {record.examinee_turns} examinee turns; final state {sim.progress_index}:{sim.current_phase_id}"
        if fallbacks:
            explanation += f"; roles falling back to the model under test: {fallbacks}"
        return Score(
            value={
                "micro": ratio,
                "macro_scenario": ratio,
                "macro_competency": competency_mean,
                "judge_unscored": float(verdicts is None and record.end_reason != ERROR and bool(items)),
                "items_unscored": float(sum(1 for i in items if verdicts is None or i.id not in verdicts)),
                "erroneous": float(record.end_reason == ERROR),
                "scenario_complete": float(record.end_reason == SCENARIO_COMPLETE),
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
                "final_state": {"progress_index": sim.progress_index, "state_label": sim.current_phase_id,
                                "phase_history": sim.phase_history},  # fmt: skip
                "action_statuses": record.action_statuses,
                "prompts": prompt_set.name,
                "role_fallbacks": fallbacks,
            },
        )

    return score


rescorable(medsp_rubric)
