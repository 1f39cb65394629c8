"""Evaluator reply handling and the MedSP metrics, on hand-computed fixtures and through ``eval()``."""

from __future__ import annotations

import math

import pytest
from inspect_ai.scorer import SampleScore, Score, ci

from bedside.scorers.medsp import parse_judgement, rubric_rates, rubric_rates_from_counts
from bedside.tasks.medsp import medsp
from tests.conftest import run, scripted
from tests.medsp.helpers import BACK_PAIN, roles, run_one, score

T_975_DF2 = 4.302652729911275  # Student t, 97.5 % quantile, 2 degrees of freedom


def metric(eval_score, name: str) -> float:
    """A metric of an EvalScore by its unqualified name (the log may prefix the package)."""
    [value] = [m.value for m in eval_score.metrics.values() if m.name.rsplit("/", 1)[-1] == name]
    return value


def counts(**per_comp):
    base = {c: [0, 0] for c in ("PC", "MK", "SBP", "ICS", "PBLI", "PROF")}
    base.update({k: list(v) for k, v in per_comp.items()})
    return base


# case A: PC 2/3, ICS 1/1 (3/4); case B: PC 1/2, MK 0/2 (1/4); case C: ICS 1/2, PROF 1/1 (2/3)
FIXTURE = [counts(PC=(2, 3), ICS=(1, 1)), counts(PC=(1, 2), MK=(0, 2)), counts(ICS=(1, 2), PROF=(1, 1))]


def test_micro_macro_and_competency_rates_by_hand():
    out = rubric_rates_from_counts(FIXTURE)
    assert out["micro"] == pytest.approx(6 / 11) and out["micro n"] == 3 and out["micro items"] == 11
    assert out["PC"] == pytest.approx(3 / 5) and out["PC n"] == 2 and out["PC items"] == 5
    assert out["ICS"] == pytest.approx(2 / 3) and out["MK"] == 0 and out["PROF"] == 1
    assert "SBP" not in out and "PBLI" not in out  # no item anywhere: not a rate
    assert out["macro"] == pytest.approx((3 / 5 + 2 / 3 + 0 + 1) / 4) and out["macro k"] == 4
    # micro CI by hand: residuals (m - R s) / s_bar = 27/121, -39/121, 12/121
    se = math.sqrt((27**2 + 39**2 + 12**2) / 121**2 / (3 * 2))
    assert out["micro lower"] == pytest.approx(6 / 11 - T_975_DF2 * se)
    assert out["micro upper"] == pytest.approx(6 / 11 + T_975_DF2 * se)
    # PC over its 2 cases: residuals (2 - 0.6*3)/2.5 = 0.08 and (1 - 0.6*2)/2.5 = -0.08, t(0.975, 1)
    se_pc = math.sqrt((0.08**2 + 0.08**2) / 2)
    assert out["PC upper"] - out["PC"] == pytest.approx(12.706204736174707 * se_pc)
    # the case-level completion rate (paper's primary metric) differs from micro: mean of 3/4, 1/4, 2/3
    assert (3 / 4 + 1 / 4 + 2 / 3) / 3 != pytest.approx(out["micro"])


def test_macro_ci_by_hand():
    out = rubric_rates_from_counts(FIXTURE)
    rates = {"PC": 3 / 5, "ICS": 2 / 3, "MK": 0.0, "PROF": 1.0}
    s_bar = {"PC": 5 / 3, "ICS": 3 / 3, "MK": 2 / 3, "PROF": 1 / 3}
    z = []
    for case in FIXTURE:
        z.append(sum((case[c][0] - rates[c] * case[c][1]) / s_bar[c] for c in rates) / 4)
    se = math.sqrt(sum(v * v for v in z) / (3 * 2))
    assert out["macro upper"] == pytest.approx(out["macro"] + T_975_DF2 * se)


def test_micro_ci_equals_the_t_interval_of_case_rates_when_case_sizes_are_equal():
    cases = [counts(PC=(3, 4)), counts(PC=(1, 2), ICS=(0, 2)), counts(MK=(4, 4)), counts(ICS=(2, 4))]
    out = rubric_rates_from_counts(cases)
    rates = [SampleScore(score=Score(value=v), sample_id=i) for i, v in enumerate([0.75, 0.25, 1.0, 0.5])]
    interval = ci(0.95)(rates)
    assert out["micro"] == pytest.approx(0.625)
    assert out["micro lower"] == pytest.approx(interval["lower"]) and out["micro upper"] == pytest.approx(interval["upper"])


def test_single_case_and_empty_inputs():
    out = rubric_rates_from_counts([counts(PC=(1, 2))])
    assert out["micro"] == out["micro lower"] == out["micro upper"] == 0.5
    assert rubric_rates_from_counts([]) == {} and rubric_rates_from_counts([counts()]) == {}


def test_rubric_metric_reads_the_counts_of_each_score_and_groups_by_specialty():
    specialties = ["Surgery", "Surgery", "Pediatrics"]
    scores = [
        SampleScore(score=Score(value=0.0, metadata={"counts": c}), sample_id=i, sample_metadata={"specialty": sp})
        for i, (c, sp) in enumerate(zip(FIXTURE, specialties))
    ]
    out = rubric_rates()(scores)
    assert {k: v for k, v in out.items() if "specialty=" not in k} == rubric_rates_from_counts(FIXTURE)
    # Surgery = cases A and B: PC 3/5, ICS 1/1, MK 0/2 -> macro (0.6 + 1 + 0) / 3; Pediatrics = case C: (1/2 + 1) / 2
    assert out["macro specialty=Surgery"] == pytest.approx((0.6 + 1 + 0) / 3) and out["macro specialty=Surgery n"] == 2
    assert out["macro specialty=Pediatrics"] == pytest.approx(0.75) and out["macro specialty=Pediatrics n"] == 1
    assert out["macro specialty=Pediatrics lower"] == out["macro specialty=Pediatrics upper"] == 0.75


def test_parse_judgement_is_strict_about_the_item_set():
    ids = ["PC.1", "ICS.1"]
    ok = parse_judgement('```json\n{"items": [{"id": "PC.1", "met": true, "justification": "T1"},'
                         ' {"id": "ICS.1", "met": "false", "justification": "no"}]}\n```', ids)
    assert ok == {"PC.1": {"met": True, "justification": "T1"}, "ICS.1": {"met": False, "justification": "no"}}
    bad = {
        "not judged: ['ICS.1']": '{"items": [{"id": "PC.1", "met": true, "justification": ""}]}',
        "unknown item id 'PC.9'": '{"items": [{"id": "PC.9", "met": true, "justification": ""}]}',
        "judged twice": '{"items": [{"id": "PC.1", "met": true, "justification": ""}, {"id": "PC.1", "met": true, "justification": ""}]}',
        "'met' must be true or false": '{"items": [{"id": "PC.1", "met": "maybe", "justification": ""}]}',
        "no JSON object": "All items are met.",
        "'items' must be a list": '{"items": {"PC.1": true}}',
    }
    for message, text in bad.items():
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
            parse_judgement(text, ids)


def test_unreadable_evaluator_reply_is_retried(tmp_path):
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_malformed_attempts=1)))
    result = score(sample)
    assert result.metadata["judge_replies"] == 2 and result.metadata["judge_error"] is None
    assert result.value["judge_unscored"] == 0 and 0 < result.value["completion"] < 1
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_missing_item_attempts=2)))
    assert score(sample).metadata["judge_replies"] == 3 and score(sample).value["judge_unscored"] == 0


def test_long_rubrics_are_judged_in_batches(tmp_path):
    # BACK_PAIN has 11 items: batches of 4 -> 3 evaluator calls, the same verdicts as one call
    _, whole = run_one(tmp_path / "one", BACK_PAIN)
    _, batched = run_one(tmp_path / "batched", BACK_PAIN, judge_batch_size=4)
    assert score(whole).metadata["judge_replies"] == 1 and score(batched).metadata["judge_replies"] == 3
    assert [i["met"] for i in score(batched).metadata["items"]] == [i["met"] for i in score(whole).metadata["items"]]
    assert score(batched).value["completion"] == score(whole).value["completion"]
    evaluator_prompts = [e.input[-1].text for e in batched.events if e.event == "model" and e.role == "grader"]
    import re

    listed = [re.findall(r"^- \[([A-Z]+\.\d+)\]", p, re.MULTILINE) for p in evaluator_prompts]
    assert sorted(len(ids) for ids in listed) == [3, 4, 4]
    assert sorted(i for ids in listed for i in ids) == sorted(i["id"] for i in score(whole).metadata["items"])


def test_evaluator_that_stays_unreadable_leaves_the_case_unscored_and_counted(tmp_path):
    log, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_malformed_attempts=3)))
    result = score(sample)
    assert math.isnan(result.value["completion"])  # never 0
    assert result.value["judge_unscored"] == 1 and result.value["items_unscored"] == 11
    assert result.explanation.startswith("UNSCORED: unreadable judge reply after 3 tries")
    assert all(i["met"] is None for i in result.metadata["items"])
    by_name = {s.name: s for s in log.results.scores}
    assert by_name["completion"].scored_samples == 0 and by_name["completion"].unscored_samples == 1
    assert metric(by_name["judge_unscored"], "total") == 1
    assert metric(by_name["items_unscored"], "total") == 11
    # the retry budget is a task parameter
    _, sample = run_one(
        tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_malformed_attempts=3)), judge_retries=3
    )
    assert score(sample).value["judge_unscored"] == 0 and score(sample).metadata["judge_replies"] == 4


def test_metrics_of_a_whole_run_match_the_per_case_judgements(tmp_path):
    log = run(medsp(), roles=roles(), log_dir=tmp_path)
    samples = log.samples
    assert len(samples) == 7
    completion = {s.id: s.scores["medsp_rubric"].value["completion"] for s in samples}
    metrics = {s.name: s for s in log.results.scores}["completion"].metrics
    assert metrics["mean"].value == pytest.approx(sum(completion.values()) / 7)
    assert metric({s.name: s for s in log.results.scores}["completion"], "n") == 7
    assert metrics["ci_lower"].value < metrics["mean"].value < metrics["ci_upper"].value
    met = sum(sum(v[0] for v in s.scores["medsp_rubric"].metadata["counts"].values()) for s in samples)
    items = sum(s.metadata["n_items"] for s in samples)
    rubric = {m.name: m.value for k, m in metrics.items() if k.rsplit("/", 1)[-1].startswith("rubric_")}
    assert rubric["micro"] == pytest.approx(met / items) and rubric["micro items"] == items == 79
    assert rubric["macro k"] == 6 and rubric["PBLI items"] == 3 and rubric["PBLI n"] == 3
    by = {m.name: m.value for k, m in metrics.items() if "specialty=" in m.name}
    dka = [completion["bedside_demo_dka/scenario1"], completion["bedside_demo_dka/scenario2"]]
    assert by["specialty=Critical Care"] == pytest.approx(sum(dka) / 2) and by["specialty=Critical Care n"] == 2
    assert by["specialty=Primary care n"] == 1 and "specialty=Critical Care lower" in by
