"""MedSP1000 evaluator and metrics (paper arXiv 2606.05112, Sections 2.1.3, 4 and 5.4).

The evaluator (role ``grader``, temperature 0, via :func:`bedside.scorers.judge.grader`) reads the
scenario's evaluator packet, the frozen rubric and the full trajectory (every role's turns), and
marks every rubric item ``met`` true/false with a short justification (``prompts/medsp/
evaluator_*.j2``). A reply that is not readable JSON, or that does not judge every item exactly
once, is retried with a fresh sample (:func:`bedside.scorers.judge.ask_judge`); if it stays
unreadable the case is *unscored*: ``completion`` is NaN (Inspect counts it as unscored and leaves
it out of every metric, never as 0), ``judge_unscored`` is 1 and ``items_unscored`` holds the
number of items left unjudged.

Metrics (each with n and a 95 % CI):

- ``completion`` — the paper's primary metric: the case-level rubric completion rate, i.e. the
  fraction of a case's items completed, averaged over cases (mean, t-interval, n cases), and per
  specialty (``by`` ``specialty=<name>``: the mean of per-case rates, as the paper's Section 2.1.3
  defines specialty-level rates);
- ``rubric`` (on the same key) — ``micro``: all items pooled (Σ met / Σ items); ``PC`` … ``PROF``:
  items pooled within each competency (paper 2.1.3: "competency-level rates aggregate rubric items
  within each competency"); ``macro``: the mean of the competency rates (competencies without any
  item are left out; ``macro k`` says how many were averaged). Their CIs treat the case as the
  sampling unit: the pooled rates are ratio estimators, whose standard error is the delta-method
  (linearisation) one, ``se² = Σ_i z_i² / (n (n − 1))`` with ``z_i = (m_i − R·s_i) / s̄`` (for the
  macro, the average of the competencies' ``z``), and the interval is ``R ± t_{0.975, n−1} · se``.
  With equal item counts per case the micro interval equals the t-interval of the per-case rates.
  ``<rate> n`` is the number of cases, ``<rate> items`` the number of items. ``macro
  specialty=<name>`` is the macro rate within one specialty (the paper's Figure 5).

Other keys, each with mean, CI and n: ``judge_unscored`` (plus its ``total``), ``items_unscored``,
``examinee_turns``, ``unsupported_actions``, ``erroneous`` (end reason ``error``) and
``role_fallbacks`` (patient, environment or grader falling back to the model under test).
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

from bedside.jsonreply import extract_json, json_bool
from bedside.prompts import render
from bedside.records.medsp import COMPETENCIES, RubricItem, Scenario
from bedside.scorers.judge import UNSCORED, JudgeResult, ask_judge, grader
from bedside.scorers.metrics import headline, strata, total
from bedside.scorers.rescore import rescorable
from bedside.solvers.encounter import ERROR, Turn
from bedside.solvers.medsp import MedSPStore, trajectory_text

Counts = dict[str, list[int]]  # competency -> [met, scored]


# ---------------------------------------------------------------------------------------------
# the evaluator's reply


def parse_judgement(text: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{"items": [{"id", "met", "justification"}]}`` → id → {met, justification}. Raises
    ``ValueError`` (→ retried) unless every rubric id is judged exactly once and nothing else."""
    found = extract_json(text, dict)
    if found is None:
        raise ValueError("no JSON object in the reply")
    entries = found.value.get("items")
    if not isinstance(entries, list):
        raise ValueError("'items' must be a list")
    wanted = set(ids)
    out: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise ValueError(f"an item entry without a string 'id': {entry!r}"[:200])
        item_id = entry["id"].strip()
        if item_id not in wanted:
            raise ValueError(f"unknown item id {item_id!r}")
        if item_id in out:
            raise ValueError(f"item {item_id} judged twice")
        justification = entry.get("justification", "")
        if not isinstance(justification, str):
            raise ValueError(f"item {item_id}: 'justification' must be a string")
        out[item_id] = {"met": json_bool(entry.get("met"), "met"), "justification": justification.strip()}
    missing = [i for i in ids if i not in out]
    if missing:
        raise ValueError(f"{len(missing)} item(s) not judged: {missing[:10]}")
    return out


def evaluator_messages(scenario: Scenario, items: Sequence[RubricItem], history: Sequence[Turn]) -> list:
    return [
        ChatMessageSystem(content=render("medsp/evaluator_system.j2")),
        ChatMessageUser(
            content=render(
                "medsp/evaluator_user.j2",
                packet=scenario.packet("evaluator").text(),
                items=[i.model_dump() for i in items],
                n_items=len(items),
                trajectory=trajectory_text(history) or "(the encounter produced no turn)",
            )
        ),
    ]


def tally(items: Sequence[RubricItem], judged: dict[str, dict[str, Any]] | None) -> Counts:
    counts: Counts = {c: [0, 0] for c in COMPETENCIES}
    if judged is None:
        return counts
    for item in items:
        counts[item.competency][0] += int(judged[item.id]["met"])
        counts[item.competency][1] += 1
    return counts


# ---------------------------------------------------------------------------------------------
# metrics




def _t(n: int) -> float:
    return float(student_t.ppf(0.975, n - 1))


def ratio_ci(residuals: Sequence[float], estimate: float) -> tuple[float, float]:
    """``estimate ± t · se`` with ``se² = Σ z² / (n (n − 1))`` (delta method, case = unit)."""
    n = len(residuals)
    if n < 2:
        return estimate, estimate
    se = math.sqrt(sum(z * z for z in residuals) / (n * (n - 1)))
    half = _t(n) * se
    return estimate - half, estimate + half


def rubric_rates_from_counts(cases: Sequence[Counts]) -> dict[str, float]:
    """Micro, per-competency and macro rates with CIs, from per-case [met, scored] counts."""
    out: dict[str, float] = {}
    cases = [c for c in cases if sum(v[1] for v in c.values()) > 0]
    n = len(cases)
    if n == 0:
        return out
    # micro
    m = [sum(v[0] for v in c.values()) for c in cases]
    s = [sum(v[1] for v in c.values()) for c in cases]
    micro = sum(m) / sum(s)
    s_bar = sum(s) / n
    lo, hi = ratio_ci([(mi - micro * si) / s_bar for mi, si in zip(m, s)], micro)
    out.update({"micro": micro, "micro lower": lo, "micro upper": hi, "micro n": float(n), "micro items": float(sum(s))})
    # competencies
    present: dict[str, tuple[float, float, list[float]]] = {}  # comp -> (rate, s_bar over all n, residual per case)
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
    # macro: mean of the competency rates; linearised per case over all n cases
    k = len(present)
    macro = sum(rate for rate, _, _ in present.values()) / k
    z = [sum(res[i] / sbar for _, sbar, res in present.values()) / k for i in range(n)]
    lo, hi = ratio_ci(z, macro)
    out.update({"macro": macro, "macro lower": lo, "macro upper": hi, "macro n": float(n), "macro k": float(k)})
    return out


@metric(name="rubric")
def rubric_rates(group_by: str = "specialty") -> Metric:
    """Pooled rubric completion rates (module docstring), read from each score's ``counts``; plus
    the macro rate per value of the ``group_by`` sample-metadata key (``macro specialty=<name>``
    with its ``lower``/``upper``/``n``: the paper's Figure 5 reports per-specialty macro rates)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        out = rubric_rates_from_counts([(s.score.metadata or {}).get("counts", {}) for s in scores])
        groups: dict[str, list[Counts]] = {}
        for s in scores:
            key = str((s.sample_metadata or {}).get(group_by, "<missing>"))
            groups.setdefault(key, []).append((s.score.metadata or {}).get("counts", {}))
        for key in sorted(groups):
            rates = rubric_rates_from_counts(groups[key])
            if "macro" in rates:
                label = f"macro {group_by}={key}"
                out.update({label: rates["macro"], f"{label} lower": rates["macro lower"],
                            f"{label} upper": rates["macro upper"], f"{label} n": rates["macro n"]})  # fmt: skip
        return out

    return compute


async def judge_in_batches(
    model: Model, scenario: Scenario, items: Sequence[RubricItem], history: Sequence[Turn], retries: int, batch_size: int
) -> JudgeResult[dict[str, dict[str, Any]]]:
    """All items judged, ``batch_size`` per call (each call retried on its own). The case stays
    all-or-nothing: if any batch stays unreadable the result has no value (the case is unscored),
    since a completion rate over part of the rubric would not be comparable."""
    batches = [list(items[i : i + max(1, batch_size)]) for i in range(0, len(items), max(1, batch_size))]

    async def one(batch: list[RubricItem]) -> JudgeResult[dict[str, dict[str, Any]]]:
        ids = [i.id for i in batch]
        return await ask_judge(model, evaluator_messages(scenario, batch, history), lambda text: parse_judgement(text, ids), retries=retries)

    results = await collect(*(one(b) for b in batches))
    merged = JudgeResult[dict[str, dict[str, Any]]](value={}, replies=[r for res in results for r in res.replies])
    for res in results:
        if not res.ok:
            merged.value, merged.error = None, res.error
            break
        merged.value.update(res.value)  # type: ignore[union-attr]
    return merged


# ---------------------------------------------------------------------------------------------
# the scorer


@scorer(
    metrics={
        "completion": headline() + [strata("specialty"), rubric_rates()],
        "judge_unscored": headline() + [total()],
        "items_unscored": headline() + [total()],
        "*": headline(),
    }
)
def medsp_rubric(retries: int = 2, batch_size: int = 40) -> Scorer:
    """Judge every rubric item over the full trajectory (module docstring); rubrics longer than
    ``batch_size`` items are judged in several calls (each sees the whole trajectory), so a long
    rubric (the release has up to ~130 items) does not depend on one very long reply."""

    async def score(state: TaskState, target: Target) -> Score:
        scenario = Scenario.model_validate(state.metadata["scenario_record"])
        record = store_as(MedSPStore)
        history = [Turn.model_validate(t) for t in record.history]
        items = scenario.rubric.items()
        model, fallback = grader()
        fallbacks = [*record.role_fallbacks, *(["grader"] if fallback else [])]

        if items:
            result = await judge_in_batches(model, scenario, items, history, retries, batch_size)
        else:  # the dataset leaves such scenarios out; nothing to ask
            result = JudgeResult(value=None, error="the rubric has no item")
        judged = result.value
        counts = tally(items, judged)
        met = sum(v[0] for v in counts.values())
        scored = sum(v[1] for v in counts.values())
        completion = met / scored if scored else UNSCORED
        unscored = len(items) - scored
        judgements = [
            {**item.model_dump(), **(judged[item.id] if judged else {"met": None, "justification": None})} for item in items
        ]
        if judged is None:
            explanation = f"UNSCORED: {result.error or 'no rubric item to judge'}"
        else:
            per_comp = ", ".join(f"{c} {v[0]}/{v[1]}" for c, v in counts.items() if v[1])
            explanation = f"{met}/{scored} rubric items completed ({per_comp})"
        explanation += f"; end reason {record.end_reason}" + (f" ({record.error})" if record.error else "")
        explanation += f"; {record.examinee_turns} examinee turns"
        if fallbacks:
            explanation += f"; roles falling back to the model under test: {fallbacks}"
        return Score(
            value={
                "completion": completion,
                "judge_unscored": float(judged is None),
                "items_unscored": float(unscored),
                "examinee_turns": float(record.examinee_turns),
                "unsupported_actions": float(record.unsupported_actions),
                "erroneous": float(record.end_reason == ERROR),
                "role_fallbacks": float(len(fallbacks)),
            },
            answer=record.end_reason,
            explanation=explanation,
            metadata={
                "counts": counts,
                "items": judgements,
                "judge_error": result.error,
                "judge_replies": len(result.replies),
                "end_reason": record.end_reason,
                "role_fallbacks": fallbacks,
            },
        )

    return score


rescorable(medsp_rubric)
