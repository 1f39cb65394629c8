"""Judge-calibrated (prediction-powered) headline estimates: coverage on synthetic data with a known
mean over many seeds, the judge-only interval missing it when the judge is biased, the "too few
annotated cases" message, and the ``bedside agreement`` block."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bedside.cli import main
from bedside.discharge.calibrated import MIN_ANNOTATED, calibrated_table, estimate
from tests.discharge.test_agreement import FIXTURE, LIKERT, judge_log
from tests.reporting.synth import write

TRUE_MEAN = 3.2
BIAS = 0.4


def draw(seed: int, n_cases: int = 400, n_annotated: int = 80):
    """Physician values with mean TRUE_MEAN; a judge that adds BIAS and noise; a random annotated subset."""
    rng = np.random.default_rng(seed)
    truth = TRUE_MEAN + rng.normal(0, 0.8, n_cases)
    judge = truth + BIAS + rng.normal(0, 0.4, n_cases)
    annotated = rng.choice(n_cases, n_annotated, replace=False)
    physician = truth[annotated] + rng.normal(0, 0.3, n_annotated)  # a physician's rating: truth plus noise
    rest = np.setdiff1d(np.arange(n_cases), annotated)
    return physician, judge[annotated], judge[rest]


def test_the_calibrated_interval_covers_the_true_mean_at_the_stated_rate():
    seeds = range(300)
    rows = [estimate(*draw(seed)) for seed in seeds]
    covered = np.mean([r["calibrated_ci_lower"] <= TRUE_MEAN <= r["calibrated_ci_upper"] for r in rows])
    judge_covered = np.mean([r["judge_ci_lower"] <= TRUE_MEAN <= r["judge_ci_upper"] for r in rows])
    assert 0.91 <= covered <= 0.99, covered  # stated 95 %; 300 seeds: ±2.5 points
    assert judge_covered < 0.05, judge_covered  # the biased judge alone misses it
    assert np.mean([r["judge_bias"] for r in rows]) == pytest.approx(BIAS, abs=0.02)
    assert np.mean([r["calibrated"] for r in rows]) == pytest.approx(TRUE_MEAN, abs=0.02)


@pytest.mark.eval
def test_an_accurate_judge_narrows_the_interval_below_the_physicians_alone():
    """The point of the method: the judge on every case makes the interval narrower than the
    annotated cases' own (classical) interval."""
    from scipy import stats

    rng = np.random.default_rng(0)
    truth = rng.normal(3, 1, 300)
    judge = truth + rng.normal(0, 0.2, 300)
    r = estimate(truth[:50], judge[:50], judge[50:])
    classical = stats.t.interval(0.95, 49, loc=truth[:50].mean(), scale=stats.sem(truth[:50]))
    assert r["calibrated_ci_lower"] < r["calibrated"] < r["calibrated_ci_upper"]
    assert r["calibrated_ci_upper"] - r["calibrated_ci_lower"] < 0.6 * (classical[1] - classical[0])


def test_both_intervals_stay_inside_the_metrics_scale():
    """A judge near the top of the 1-5 scale: the t interval and ppi-python's reach past 5 unclipped."""
    from bedside.intervals import LIKERT as LIKERT_SCALE

    judge = np.array([5.0] * 14 + [2.0])  # 15 cases, one low rating: a wide interval around 4.8
    physician = np.array([5, 5, 4, 5, 5, 5, 5, 4, 5, 5, 5, 2.0])  # on the last 12 (annotated) cases
    raw = estimate(physician, judge[3:], judge[:3])
    assert raw["judge_ci_upper"] > 5 and raw["calibrated_ci_upper"] > 5  # what the scale cuts
    cut = estimate(physician, judge[3:], judge[:3], scale=LIKERT_SCALE)
    assert cut["judge_ci_upper"] == cut["calibrated_ci_upper"] == 5.0
    assert cut["judge_ci_lower"] == raw["judge_ci_lower"] and cut["calibrated_ci_lower"] == raw["calibrated_ci_lower"]
    assert cut["judge_mean"] == raw["judge_mean"] and cut["calibrated"] == raw["calibrated"]


def test_too_few_annotated_cases_give_no_interval():
    physician, annotated_judge, judge = draw(0, n_annotated=MIN_ANNOTATED - 1)
    r = estimate(physician, annotated_judge, judge)
    assert np.isnan(r["calibrated"]) and np.isnan(r["calibrated_ci_lower"]) and r["n_annotated"] == MIN_ANNOTATED - 1
    assert not np.isnan(r["judge_mean"]) and not np.isnan(r["judge_bias"])


@pytest.mark.eval
def test_the_agreement_command_prints_judge_only_bias_and_calibrated(tmp_path, capsys):
    from bedside.discharge.ratings import read_annotations
    from bedside.reporting.load import load

    path = write(judge_log(), tmp_path / "judge.eval")
    assert main(["agreement", "--annotations", str(FIXTURE), path]) == 0
    out = capsys.readouterr().out
    assert "judge-calibrated headline estimates" in out and "judge bias" in out
    assert "too few annotated cases" in out  # the fixture annotates 6 cases
    from bedside.discharge.ratings import judge_values

    table = calibrated_table(read_annotations(str(FIXTURE)), judge_values(load([path])))
    nat = table.set_index("metric").loc["naturalness"]
    annotations = pd.read_csv(FIXTURE, comment="#")
    rated = annotations[annotations["item"] == "naturalness"]
    physicians = pd.to_numeric(rated["value"]).groupby(rated["case_id"]).mean()
    judge = pd.Series({"case-1": 4, "case-2": 5, "case-3": 3, "case-4": 2, "case-5": 4, "case-6": 5}, dtype=float)
    assert nat["n_judged"] == 6 and nat["n_annotated"] == len(physicians)
    assert nat["judge_mean"] == pytest.approx(judge.mean())
    assert nat["judge_bias"] == pytest.approx((judge[physicians.index] - physicians).mean())
    assert set(table["metric"]) == {*LIKERT, "tcs"}  # the synthetic log has no per-case comprehension key
    # the t interval of these six ratings reaches past 5 (mean 3.83 + 2.57 * 0.48): cut to the Likert scale
    from scipy import stats

    assert judge.mean() + stats.t.ppf(0.975, 5) * stats.sem(judge) > 5
    assert nat["judge_ci_upper"] == 5.0 and 1.0 < nat["judge_ci_lower"] < nat["judge_mean"]
    assert (table["judge_ci_upper"] <= table["metric"].map(lambda m: 1.0 if m == "tcs" else 5.0)).all()


def test_a_judge_that_gives_every_case_one_score_gives_the_classical_estimate():
    """Power tuning divides cov(physician, judge) by var(judge): 0 / 0 for a constant judge (ppi-python then
    returns NaN). Such a judge adds nothing, and the estimate is the physicians' own mean with the classical
    interval (ppi-python's lam=1 with a constant judge; its classical_mean_ci), and says so."""
    from ppi_py import classical_mean_ci, ppi_mean_ci

    physician = np.array([2 + i % 4 for i in range(12)], dtype=float)
    judge = np.full(24, 4.0)
    with np.errstate(all="ignore"):
        assert np.isnan(ppi_mean_ci(physician, judge[:12], judge[12:], alpha=0.05)[0]).all()  # what ppi-python gives
    r = estimate(physician, judge[:12], judge[12:])
    low, high = classical_mean_ci(physician, alpha=0.05)
    assert r["calibrated"] == pytest.approx(physician.mean())
    assert (r["calibrated_ci_lower"], r["calibrated_ci_upper"]) == pytest.approx((float(low), float(high)))
    assert "the judge gave every case 4" in r["note"] and "classical" in r["note"]
    varied = estimate(physician, judge[:12] + np.arange(12) % 2, judge[12:])  # a judge with any spread: tuned
    assert varied["note"] == "" and not np.isnan(varied["calibrated"])


def test_the_point_estimate_is_cut_to_the_scale_as_its_interval_is():
    """A judge two points under the physicians on the annotated cases and at 5 on the rest: the corrected
    mean lands above 5 (the raw estimator), the shown one at the top of the scale, inside its own interval."""
    from bedside.intervals import LIKERT as LIKERT_SCALE

    physician = np.array([5, 5, 4, 5, 5, 4, 5, 5, 5, 4, 5, 5.0])
    judge = physician - 2
    raw = estimate(physician, judge, np.full(30, 5.0))
    assert raw["calibrated"] > 5
    cut = estimate(physician, judge, np.full(30, 5.0), scale=LIKERT_SCALE)
    assert cut["calibrated"] == 5.0 and cut["calibrated_ci_lower"] <= cut["calibrated"] <= cut["calibrated_ci_upper"]


def test_the_agreement_command_gives_a_number_and_a_note_for_a_constant_judge(tmp_path, capsys):
    """The scripted judge gives every case the same score on 3 of 4 Likert axes: no `nan`, the note instead."""
    from inspect_ai.scorer import Score

    from tests.reporting.synth import log, sample

    samples = [
        sample(f"c{i}", {"conversation_quality": Score(value={"naturalness": 4.0, "clarity": float(1 + i % 5)})})
        for i in range(24)
    ]
    path = write(log("bedside/discharge", "prov/a", samples), tmp_path / "judge.eval")
    rows = ["case_id,annotator,item,value"]
    rows += [f"c{i},phys_a,naturalness,{2 + i % 4}" for i in range(12)]
    rows += [f"c{i},phys_a,clarity,{1 + (i + 1) % 5}" for i in range(12)]
    (tmp_path / "a.csv").write_text("\n".join(rows) + "\n")
    assert main(["agreement", "--annotations", str(tmp_path / "a.csv"), path]) == 0
    out = capsys.readouterr().out
    calibrated = [line for line in out.splitlines() if "calibrated" in line and "prov/a" in line]
    assert len(calibrated) == 2 and "nan" not in " ".join(calibrated)
    [naturalness] = [line for line in calibrated if "naturalness" in line]
    physicians = np.array([2 + i % 4 for i in range(12)], dtype=float)
    assert f"calibrated {physicians.mean():.3f} [" in naturalness and "the judge gave every case 4" in naturalness


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1.7", "outside its scale, 0 to 1"),
        ("-0.2", "outside its scale, 0 to 1"),
        ("50", "outside its scale, 0 to 1"),
        ("inf", "not a finite number"),
    ],
)
def test_the_agreement_command_rejects_an_off_scale_numeric_rating(tmp_path, capsys, value, message):
    path = write(judge_log(), tmp_path / "judge.eval")
    bad = tmp_path / "bad.csv"
    bad.write_text(f"case_id,annotator,item,value\ncase-1,phys_a,tcs,0.5\ncase-2,phys_a,tcs,{value}\n")
    assert main(["agreement", "--annotations", str(bad), path]) == 2
    assert f"{bad}, line 3, field 'value' (case case-2, item tcs): tcs: {value} " in capsys.readouterr().out
