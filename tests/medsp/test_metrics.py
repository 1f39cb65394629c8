"""The MedSP evaluator's reply handling and the metrics: micro (pooled items), macro (the paper's: the six
competencies weighted equally), scenario_mean (mean of case ratios, the official analysis script's "macro"
column), on hand-computed fixtures and through eval()."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest
from inspect_ai.scorer import SampleScore, Score

from bedside.medsp.rubric import rubric_rates_from_counts
from bedside.medsp.samples import DEMO_DIR
from bedside.reporting.strata import strata_table
from bedside.scorers.medsp.rubric import micro_rate, rubric_rates
from bedside.tasks.medsp import medsp
from tests.conftest import metrics_of, run, scripted
from tests.medsp.helpers import BACK_PAIN, calls, roles, run_one, score


def counts(**per_comp):
    base = {c: [0, 0] for c in ("PC", "MK", "SBP", "ICS", "PBLI", "PROF")}
    base.update({k: list(v) for k, v in per_comp.items()})
    return base


# case A: PC 2/3, ICS 1/1 (3/4); case B: PC 1/2, MK 0/2 (1/4); case C: ICS 1/2, PROF 1/1 (2/3)
FIXTURE = [counts(PC=(2, 3), ICS=(1, 1)), counts(PC=(1, 2), MK=(0, 2)), counts(ICS=(1, 2), PROF=(1, 1))]


def sample_scores(cases, specialties=None):
    out = []
    for i, c in enumerate(cases):
        met, judged = sum(v[0] for v in c.values()), sum(v[1] for v in c.values())
        per = [v[0] / v[1] for v in c.values() if v[1]]
        value = {"micro": met / judged, "macro": sum(per) / len(per), "scenario_mean": met / judged}
        meta = {"specialty": specialties[i]} if specialties else {}
        out.append(
            SampleScore(
                score=Score(value=value, metadata={"counts": c, "items_judged": judged}),
                sample_id=i,
                sample_metadata=meta,
            )
        )
    return out


def test_the_three_rates_by_hand():
    out = rubric_rates_from_counts(FIXTURE)
    # micro: all items pooled
    assert out["micro"] == pytest.approx(6 / 11) and out["micro n"] == 3 and out["micro items"] == 11
    # scenario_mean (the official script's "macro" column): the mean of the cases' completion ratios
    assert out["scenario_mean"] == pytest.approx((3 / 4 + 1 / 4 + 2 / 3) / 3)
    # macro (the paper's): the mean of the competencies' pooled rates (competencies without items left out)
    assert (
        out["PC"] == pytest.approx(3 / 5) and out["ICS"] == pytest.approx(2 / 3) and out["MK"] == 0 and out["PROF"] == 1
    )
    assert "SBP" not in out and "PBLI" not in out
    assert out["macro"] == pytest.approx((3 / 5 + 2 / 3 + 0 + 1) / 4) and out["macro k"] == 4
    # the three are different numbers
    assert len({round(out[k], 6) for k in ("micro", "scenario_mean", "macro")}) == 3
    # intervals: percentile bootstrap over cases, inside [0, 1] by construction (the delta method's
    # t-interval was [-0.17, 1.26] here and had to be clipped)
    for key in ("micro", "macro", "scenario_mean", "PC", "ICS"):
        assert 0.0 <= out[f"{key} lower"] <= out[key] <= out[f"{key} upper"] <= 1.0, key
    # each resample of micro is a pooled rate of three resampled cases: the bounds are such rates
    assert out["micro lower"] >= 1 / 4 and out["micro upper"] <= 3 / 4


@pytest.mark.eval
def test_the_metric_computes_the_same_rates_from_scores():
    rows = rubric_rates()(sample_scores(FIXTURE))
    out = rubric_rates_from_counts(FIXTURE)
    assert rows["micro"] == pytest.approx(6 / 11) and rows["n"] == 3
    assert rows["macro"] == pytest.approx(out["macro"]) and rows["macro lower"] == pytest.approx(out["macro lower"])
    assert rows["scenario_mean"] == pytest.approx(out["scenario_mean"])
    assert rows["micro lower"] == pytest.approx(out["micro lower"])
    # micro from values weighted by item counts: epoch-averaged case rates pool correctly
    assert micro_rate([0.5, 1.0], [2, 6])["mean"] == pytest.approx((1 + 6) / 8)


def test_intervals_stay_in_the_unit_interval_and_none_below_two_cases():
    cases = [counts(PC=(4, 4)), counts(PC=(4, 4)), counts(PC=(2, 4))]
    out = rubric_rates_from_counts(cases)
    assert out["micro"] == pytest.approx(10 / 12) and out["micro upper"] == 1.0 and out["micro lower"] >= 0.5
    assert out["scenario_mean upper"] == 1.0 and out["macro upper"] == 1.0
    one = rubric_rates_from_counts([counts(PC=(1, 2))])
    assert one["micro"] == 0.5 and math.isnan(one["micro lower"]) and math.isnan(one["micro upper"])
    assert rubric_rates_from_counts([]) == {} and rubric_rates_from_counts([counts()]) == {}
    empty = rubric_rates()([])
    assert empty["n"] == 0 and math.isnan(empty["micro"]) and "micro lower" not in empty


@pytest.mark.eval
def test_macro_is_nan_when_epochs_disagree():
    scores = sample_scores(FIXTURE)
    scores[0].score.value["macro"] = 0.1  # an epoch-averaged value the first epoch's counts do not give
    assert math.isnan(rubric_rates()(scores)["macro"])


@pytest.mark.eval
def test_metrics_of_a_whole_run(tmp_path):
    log = run(medsp(), roles=roles(), log_dir=tmp_path)
    samples = log.samples
    assert len(samples) == 7
    per_case = {s.id: s.scores["medsp_rubric"] for s in samples}
    all_counts = [sc.metadata["counts"] for sc in per_case.values()]
    met = sum(sum(v[0] for v in c.values()) for c in all_counts)
    items = sum(s.metadata["n_items"] for s in samples)
    assert items == 79
    expected = rubric_rates_from_counts(all_counts)
    micro = metrics_of(log, "micro")
    assert micro["mean"] == pytest.approx(met / items) and micro["n"] == 7
    assert micro["ci_lower"] == pytest.approx(expected["micro lower"])
    scenario = metrics_of(log, "scenario_mean")
    assert scenario["mean"] == pytest.approx(sum(sc.value["scenario_mean"] for sc in per_case.values()) / 7)
    assert scenario["mean"] == pytest.approx(expected["scenario_mean"])
    assert 0 <= scenario["ci_lower"] < scenario["mean"] < scenario["ci_upper"] <= 1
    macro = metrics_of(log, "macro")
    assert macro["mean"] == pytest.approx(expected["macro"])
    assert [s.name for s in log.results.scores] == ["medsp_rubric", "health"]
    # Inspect shows headline numbers only: no per-specialty or per-competency metric
    names = [k for s in log.results.scores for k in s.metrics]
    assert not any("specialty" in k or re.search(r"\b(PC|MK|SBP|ICS|PBLI|PROF)\b", k) for k in names)
    # the details the report needs are in the score metadata (and the specialty in the sample metadata)
    sc = per_case["bedside_demo_dka/scenario1"]
    assert sc.metadata["specialty"] == "Critical Care" and set(sc.metadata["counts"]) == {
        "PC",
        "MK",
        "SBP",
        "ICS",
        "PBLI",
        "PROF",
    }
    assert sc.metadata["items_judged"] == 11


@pytest.mark.eval
def test_specialty_rates_are_reported_only_from_five_cases(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEMO_DIR, data)
    src = data / "bedside_demo_back_pain"
    for i in range(2, 6):  # four more Primary care cases: five in all
        case = data / f"bedside_demo_back_pain_{i}"
        shutil.copytree(src, case)
        rubric = json.loads((case / "bedside_demo_back_pain_scenario1.json").read_text())
        (case / "bedside_demo_back_pain_scenario1.json").unlink()
        rubric["case_id"] = case.name
        (case / f"{case.name}_scenario1.json").write_text(json.dumps(rubric))
    log = run(medsp(data=str(data)), roles=roles(), log_dir=tmp_path / "logs")
    assert len(log.samples) == 11
    table = strata_table(log)
    specialty = table[table["stratum"] == "specialty"]
    assert set(specialty["group"]) == {"Primary care"} and set(specialty["n"]) == {5}
    micro = specialty[specialty["key"] == "scenario_mean"].iloc[0]
    assert micro["mean"] == pytest.approx(
        sum(
            s.scores["medsp_rubric"].value["scenario_mean"]
            for s in log.samples
            if s.metadata["specialty"] == "Primary care"
        )
        / 5
    )


@pytest.mark.eval
def test_evaluator_omissions_leave_the_denominator_under_the_official_reading(tmp_path):
    # the official counter counts the keys the evaluator returns: an omitted item is left out at once
    _, sample = run_one(
        tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_missing_item_attempts=3))
    )
    result = score(sample)
    assert result.metadata["judge_replies"] == 1 and result.value["judge_unscored"] == 0
    assert result.metadata["items_judged"] == 10 and result.value["items_unscored"] == 1
    assert sum(i["met"] is None for i in result.metadata["items"]) == 1
    assert any("left out of the denominator" in n for n in result.metadata["evaluator_notes"])
    assert result.value["micro"] == pytest.approx(sum(v[0] for v in result.metadata["counts"].values()) / 10)


@pytest.mark.eval
def test_evaluator_omissions_are_unreadable_retried_then_unscored_under_the_strict_reading(tmp_path):
    strict = {"reading": "strict"}
    # one reply omits an item: retried (never scored on part of the rubric)
    _, sample = run_one(
        tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_missing_item_attempts=2)), **strict
    )
    result = score(sample)
    assert result.metadata["judge_replies"] == 3 and result.value["judge_unscored"] == 0
    assert result.metadata["items_judged"] == 11
    # prose, then JSON
    _, sample = run_one(tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_malformed_attempts=1)))
    assert score(sample).metadata["judge_replies"] == 2 and score(sample).metadata["judge_error"] is None
    # omitted in every try: the case is unscored and counted
    log, sample = run_one(
        tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_missing_item_attempts=3)), **strict
    )
    result = score(sample)
    assert math.isnan(result.value["micro"]) and math.isnan(result.value["scenario_mean"])
    assert result.value["judge_unscored"] == 1 and result.value["items_unscored"] == 11
    assert "items.PLAN" not in result.explanation and "Field required" in result.explanation
    assert result.explanation.startswith("UNSCORED: unreadable judge reply after 3 tries")
    assert all(i["met"] is None for i in result.metadata["items"])
    # every case unscored: n is 0, not NaN
    assert metrics_of(log, "micro")["n"] == 0 and metrics_of(log, "scenario_mean")["n"] == 0
    assert metrics_of(log, "judge_unscored")["total"] == 1 and metrics_of(log, "items_unscored")["total"] == 11
    # the retry budget is a task parameter
    _, sample = run_one(
        tmp_path, BACK_PAIN, role_models=roles(grader=scripted(medsp_evaluator_malformed_attempts=3)), judge_retries=3
    )
    assert score(sample).value["judge_unscored"] == 0 and score(sample).metadata["judge_replies"] == 4


@pytest.mark.eval
def test_the_whole_rubric_in_one_call_by_default_batches_on_request(tmp_path):
    # BACK_PAIN has 11 items: one call by default; batches of 4 -> 3 calls with the same verdicts
    _, whole = run_one(tmp_path / "one", BACK_PAIN)
    _, batched = run_one(tmp_path / "batched", BACK_PAIN, judge_batch_size=4)
    assert len(calls(whole, "medsp.evaluator")) == 1 and score(whole).metadata["judge_replies"] == 1
    assert len(calls(batched, "medsp.evaluator")) == 3
    assert [i["met"] for i in score(batched).metadata["items"]] == [i["met"] for i in score(whole).metadata["items"]]
    listed = [
        re.findall(r"^- \[([A-Z]+\.\d+)\]", e.input[0].text, re.MULTILINE) for e in calls(batched, "medsp.evaluator")
    ]
    assert sorted(len(ids) for ids in listed) == [3, 4, 4]
    # each batch is judged over the same encounter
    assert len({e.input[-1].text for e in calls(batched, "medsp.evaluator")}) == 1
