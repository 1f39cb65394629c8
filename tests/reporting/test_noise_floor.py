"""The noise floor against known truth: the minimum detectable difference (MDD) is the difference a paired
t-test detects with the stated power; on logs whose noise is put in (each verdict flipped with a known
probability, Likert values with a known spread) the MDD, the within-case SD, the flip share and pass^k that
``compare``, the leaderboard and ``report`` give match what the noise implies; ``estimate --detect`` recovers
the variance components of a simulated pilot and plans a run that reaches the stated power.

Every tolerance is derived from the sampling error of the statistic (its standard error, SE, stated beside
each assertion; bounds at 4 SE), not tuned to the seed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from inspect_ai.scorer import Score
from scipy import stats

from bedside.cli import main
from bedside.intervals import BINARY, UNIT
from bedside.reporting import detectable, epochs
from bedside.reporting.compare import compare
from bedside.reporting.load import load, scores_frame
from bedside.reporting.sweep import groups, indistinguishable, leaderboard
from tests.reporting.synth import log, sample, write

P = 0.15  # the chance that a verdict is flipped in one epoch (or one run)


def flipped(truth: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """Each verdict of ``truth`` flipped with probability ``p``, independently."""
    return np.logical_xor(truth, rng.random(truth.shape) < p).astype(float)


def failure_log(path, failures: np.ndarray, model: str = "prov/a") -> str:
    """A CPB-Bench log: ``failures`` is (cases × epochs) of 0/1."""
    samples = [
        sample(f"c{i}", {"cpb_failure": Score(value={"failure": float(v)})}, epoch=e + 1)
        for i, row in enumerate(failures)
        for e, v in enumerate(row)
    ]
    return write(log("bedside/cpb", model, samples), path)


def checklist_log(path, answers: np.ndarray, model: str = "prov/a") -> str:
    """A DischargeBench log whose judge answered questions Q1.. of each case: ``answers`` is (cases × epochs ×
    questions) of 0/1; tcs is their share."""
    samples = []
    for i, case in enumerate(answers):
        for e, given in enumerate(case):
            metadata = {"answers": {f"Q{q + 1}": bool(a) for q, a in enumerate(given)}}
            score = Score(value={"tcs": float(given.mean()), "unscored": 0.0}, metadata=metadata)
            samples.append(sample(f"c{i}", {"topic_checklist": score}, epoch=e + 1))
    return write(log("bedside/discharge", model, samples), path)


# --- the MDD is what a paired t-test detects with the stated power --------------------------------


@pytest.mark.parametrize("n", [5, 12, 40, 400])
def test_the_mdd_has_the_stated_power_by_the_noncentral_t(n):
    """Independent of statsmodels: the power of the two-sided one-sample t-test at a true mean of MDD
    (SD 1) from scipy's noncentral t distribution."""
    delta = detectable.mdd(1.0, n, power=0.8, alpha=0.05)
    critical = stats.t.ppf(0.975, n - 1)
    power = stats.nct.sf(critical, n - 1, delta * math.sqrt(n)) + stats.nct.cdf(-critical, n - 1, delta * math.sqrt(n))
    assert power == pytest.approx(0.8, abs=1e-6)
    if n == 400:  # the large-n form (z_0.975 + z_0.8) / sqrt(n) = 2.80 / sqrt(n)
        assert delta == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / math.sqrt(n), rel=0.01)


def test_a_true_difference_of_one_mdd_is_detected_at_the_stated_rate():
    """4,000 simulated paired comparisons of 12 cases whose true difference is the MDD: a t-test rejects in
    80 % of them (SE sqrt(0.8 * 0.2 / 4000) = 0.0063)."""
    rng = np.random.default_rng(0)
    delta = detectable.mdd(1.0, 12)
    differences = rng.normal(delta, 1.0, size=(4000, 12))
    rejected = stats.ttest_1samp(differences, 0.0, axis=1).pvalue < 0.05
    assert abs(rejected.mean() - 0.8) < 4 * math.sqrt(0.8 * 0.2 / 4000)


def test_an_mdd_needs_two_cases_and_is_zero_without_spread():
    assert math.isnan(detectable.detectable([0.3], UNIT)["mdd"])
    assert detectable.detectable([0.2, 0.2, 0.2], UNIT) | {"n": 3} == {
        "n": 3,
        "sd": 0.0,
        "mdd": 0.0,
        "mdd_low": 0.0,
        "mdd_high": 0.0,
    }


# --- compare: the MDD of two noisy runs ----------------------------------------------------------------


def test_compare_gives_the_mdd_of_the_noise_put_in(tmp_path):
    """Two runs of one model whose failure verdicts are each flipped with probability P: a case's difference
    is nonzero (±1) with probability q = 2P(1 - P) and 0 on average, so its SD is sqrt(q). The MDD compare
    gives matches mdd(sqrt(q), n) within the sampling error of the SD: s² is a share of nonzero differences,
    SE(s²) = sqrt(q(1 - q) / n), SE(s) = SE(s²) / (2 sqrt(q))."""
    n = 500
    rng = np.random.default_rng(1)
    truth = (np.arange(n) % 3 == 0)[:, None]
    base = failure_log(tmp_path / "base.eval", flipped(truth, P, rng))
    cand = failure_log(tmp_path / "cand.eval", flipped(truth, P, rng))
    [result] = compare(base, cand, ["failure"], None, resamples=999)
    q = 2 * P * (1 - P)
    se_sd = math.sqrt(q * (1 - q) / n) / (2 * math.sqrt(q))
    assert abs(result.sd_difference - math.sqrt(q)) < 4 * se_sd
    expected = detectable.mdd(math.sqrt(q), n)
    assert abs(result.mdd - expected) < 4 * se_sd * detectable.effect(n)
    assert result.mdd_ci_lower < result.mdd < result.mdd_ci_upper
    assert result.n == n and result.epochs == 1
    assert abs(result.difference) < result.mdd  # the same model twice: nothing this comparison reliably detects


def test_compare_averages_a_cases_epochs_before_pairing(tmp_path, capsys):
    """With epochs the case is the unit: n = cases, and the interval is the bootstrap of the per-case
    differences of epoch means (the same resamples as scipy's, seed 0)."""
    rng = np.random.default_rng(2)
    truth = (np.arange(30) % 2 == 0)[:, None] & np.ones((1, 3), dtype=bool)
    base = failure_log(tmp_path / "base.eval", flipped(truth, P, rng))
    cand = failure_log(tmp_path / "cand.eval", flipped(truth, 0.4, rng))
    [result] = compare(base, cand, ["failure"], None, resamples=999)
    a = scores_frame(load([base])).groupby("id", sort=False)["value"].mean()
    b = scores_frame(load([cand])).groupby("id", sort=False)["value"].mean()
    per_case = (b - a).to_numpy()
    want = stats.bootstrap(
        (per_case,), np.mean, n_resamples=999, method="percentile", rng=np.random.default_rng(0)
    ).confidence_interval
    assert (result.n, result.epochs) == (30, 3)
    assert (result.ci_lower, result.ci_upper) == pytest.approx((want.low, want.high))
    assert result.sd_difference == pytest.approx(np.std(per_case, ddof=1))
    assert main(["compare", base, cand, "--pass-k", "2", "--resamples", "999"]) == 0
    out = capsys.readouterr().out
    assert "| `failure` | lower is better | 30 × 3 epochs |" in out and "MDD [95 % CI]" in out
    assert "Run-to-run noise over epochs" in out and "pass^2 [95 % CI]" in out


# --- consistency over epochs: within-case SD, flips, pass^k ---------------------------------------------


def test_flips_and_within_case_sd_match_the_noise_put_in(tmp_path):
    """600 cases × 2 epochs of a failure verdict flipped with probability P per epoch: a case flips with
    probability f = 2P(1 - P) (SE sqrt(f(1 - f) / n)); the within-case variance is P(1 - P) (each case's
    variance over two epochs is 0 or 1/2, 1/2 with probability f: SE of the mean 0.5 sqrt(f(1 - f) / n))."""
    n = 600
    rng = np.random.default_rng(3)
    truth = (np.arange(n) % 4 == 0)[:, None] & np.ones((1, 2), dtype=bool)
    path = failure_log(tmp_path / "run.eval", flipped(truth, P, rng))
    logs = load([path])
    [row] = epochs.flips(epochs.verdicts(logs)).to_dict("records")
    f = 2 * P * (1 - P)
    assert (row["unit"], row["n_units"], row["n_cases"], row["epochs"]) == ("case", n, n, 2)
    assert abs(row["flip_share"] - f) < 4 * math.sqrt(f * (1 - f) / n)
    assert (row["flip_ci_lower"], row["flip_ci_upper"]) == pytest.approx(
        stats.binomtest(round(row["flip_share"] * n), n).proportion_ci(method="wilson")
    )
    [sd] = epochs.within_case_sd(scores_frame(logs)).to_dict("records")
    se_variance = 0.5 * math.sqrt(f * (1 - f) / n)
    assert abs(sd["within_sd"] ** 2 - P * (1 - P)) < 4 * se_variance
    assert 0 <= sd["within_sd_ci_lower"] < sd["within_sd"] < sd["within_sd_ci_upper"] <= 1


def test_item_flips_are_counted_per_item_with_a_case_bootstrap(tmp_path):
    """300 cases × 3 epochs × 5 checklist answers, each flipped with probability P per epoch: an item flips
    unless its three epochs agree, 1 - P³ - (1 - P)³ (items independent here: SE over the 1,500 items)."""
    n, k, questions = 300, 3, 5
    rng = np.random.default_rng(4)
    truth = np.broadcast_to((np.arange(questions) % 2 == 0), (n, k, questions))
    path = checklist_log(tmp_path / "run.eval", flipped(truth, P, rng))
    [row] = epochs.flips(epochs.verdicts(load([path]))).to_dict("records")
    f = 1 - P**3 - (1 - P) ** 3
    units = n * questions
    assert (row["verdict"], row["unit"], row["n_units"], row["n_cases"]) == ("tcs", "item", units, n)
    assert abs(row["flip_share"] - f) < 4 * math.sqrt(f * (1 - f) / units)
    assert 0 <= row["flip_ci_lower"] < row["flip_share"] < row["flip_ci_upper"] <= 1


def test_pass_k_is_inspects_reducer_and_matches_the_chance_that_k_epochs_pass(tmp_path):
    """pass^k of a unit is Inspect's pass_k: C(c, k) / C(n, k). Over cases whose verdict passes with
    probability π per epoch, its mean estimates the mean of π^k (SE: the SD of the per-case values / sqrt(n))."""
    assert epochs.pass_hat_k([1.0, 1.0, 0.0], 2) == pytest.approx(1 / 3)
    assert epochs.pass_hat_k([1.0, 1.0, 1.0, 0.0], 3) == pytest.approx(math.comb(3, 3) / math.comb(4, 3))
    assert math.isnan(epochs.pass_hat_k([1.0], 2))
    n, k = 400, 4
    rng = np.random.default_rng(5)
    failing = np.arange(n) % 3 == 0  # the true verdict; a failure is the bad outcome
    observed = flipped(np.broadcast_to(failing[:, None], (n, k)), P, rng)
    [row] = epochs.flips(epochs.verdicts(load([failure_log(tmp_path / "r.eval", observed)])), pass_k=2).to_dict(
        "records"
    )
    passing = np.where(failing, P, 1 - P)  # the chance of no failure in one epoch
    per_case = [epochs.pass_hat_k(list(1.0 - row_values), 2) for row_values in observed]
    se = np.std(per_case, ddof=1) / math.sqrt(n)
    assert abs(row["pass_k"] - np.mean(passing**2)) < 4 * se
    assert row["pass_k"] == pytest.approx(np.mean(per_case))
    assert row["pass_1"] == pytest.approx(1 - observed.mean())
    # pass^1's interval (a case bootstrap of the pooled share) covers the truth, as its SE implies
    assert row["pass_1_ci_lower"] < row["pass_1"] < row["pass_1_ci_upper"]
    truth, se_1 = np.mean(passing), np.std(1.0 - observed.mean(axis=1), ddof=1) / math.sqrt(n)
    assert row["pass_1_ci_lower"] - 2 * se_1 < truth < row["pass_1_ci_upper"] + 2 * se_1
    assert row["pass_1_ci_upper"] - row["pass_1_ci_lower"] == pytest.approx(2 * 1.96 * se_1, rel=0.25)


def test_the_report_shows_the_run_to_run_noise_of_a_log_with_epochs(tmp_path):
    rng = np.random.default_rng(6)
    path = failure_log(tmp_path / "run.eval", flipped(np.zeros((40, 3), dtype=bool), P, rng))
    assert main(["report", path, "--out", str(tmp_path / "report"), "--pass-k", "2"]) == 0
    noise = pd.read_csv(tmp_path / "report" / "epoch_noise.csv")
    flips = pd.read_csv(tmp_path / "report" / "epoch_flips.csv")
    assert list(noise["key"]) == ["failure"] and list(noise["n_cases"]) == [40]
    assert list(flips["verdict"]) == ["failure"] and list(flips["k"]) == [2]
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Run-to-run noise" in page and "pass^2 [95 % CI]" in page
    single = failure_log(tmp_path / "one.eval", np.zeros((40, 1)))
    assert main(["report", single, "--out", str(tmp_path / "one")]) == 0
    assert not (tmp_path / "one" / "epoch_noise.csv").exists()  # one epoch: nothing to measure


# --- an observed difference is judged by its interval or test, never by the MDD ---------------------


def test_groups_are_runs_of_neighbours_not_distinguishable_from_their_first():
    distinguishable = {("a", "b"): False, ("a", "c"): True, ("b", "c"): False, ("c", "d"): False, ("a", "d"): True}
    assert groups(["a", "b", "c", "d"], distinguishable) == {"a": 1, "b": 1, "c": 2, "d": 2}


def test_the_paired_p_value_is_the_t_tests_and_holm_adjusts_one_family():
    d = np.array([0.1, -0.05, 0.2, 0.0, 0.15])
    assert detectable.paired_p(d) == pytest.approx(stats.ttest_rel(d, np.zeros(5)).pvalue)
    assert detectable.paired_p([0.2, 0.2, 0.2]) == 0.0  # the same shift on every case: detected at any n >= 2
    assert detectable.paired_p([0.0, 0.0]) == 1.0  # two runs alike on every case: no difference
    assert math.isnan(detectable.paired_p([0.3]))  # one case: no test
    # Holm by hand: sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04, then the running maximum
    assert detectable.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    adjusted = detectable.holm([0.01, math.nan, 0.04])  # a pair not tested is not in the family
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.04)


def exact(rng: np.random.Generator, n: int, mean: float, sd: float) -> np.ndarray:
    """n normal draws rescaled to exactly ``mean`` and SD ``sd``."""
    x = rng.normal(0, 1, n)
    return mean + sd * (x - x.mean()) / x.std(ddof=1)


def sweep_values(models: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"benchmark": "discharge", "grader": "g", "model": m, "id": f"c{i}", "key": "tcs", "value": v}
            for m, column in models.items()
            for i, v in enumerate(column)
        ]
    )


def test_a_difference_smaller_than_the_mdd_that_its_test_detects_opens_a_group():
    """A and B differ by exactly 0.0135 on average over 100 cases, with a per-case difference of SD exactly 0.05:
    the MDD is mdd(0.05, 100) ≈ 0.0141, larger than the difference, but the paired t-test detects it
    (t = 0.0135 / 0.005 = 2.7, p ≈ 0.008; Holm over the 3 pairs keeps it, the other two being tiny): three
    groups. A' differs from B by a third of that (t = 0.9): one group with it."""
    rng = np.random.default_rng(7)
    base = rng.uniform(0.3, 0.7, 100)
    b = base - exact(rng, 100, 0.0135, 0.05)
    ranking, pairs = leaderboard(sweep_values({"A": base, "B": b, "C": base - 0.3 + exact(rng, 100, 0, 0.05)}))
    expected = detectable.mdd(0.05, 100)
    ab = pairs[(pairs["model_a"] == "A") & (pairs["model_b"] == "B")].iloc[0]
    assert ab["difference"] == pytest.approx(0.0135) and ab["mdd"] == pytest.approx(expected) and expected > 0.0135
    assert ab["p_value"] == pytest.approx(2 * stats.t.sf(2.7, 99)) and ab["p_holm"] == pytest.approx(ab["p_value"])
    assert ab["distinguishable"] and ab["ci_lower"] > 0  # its interval excludes zero too
    assert list(ranking["model"]) == ["A", "B", "C"] and list(ranking["group"]) == [1, 2, 3]
    first = ranking.iloc[0]
    assert first["mdd_vs_next"] == pytest.approx(expected) and first["n_vs_next"] == 100
    assert first["difference_vs_next"] == pytest.approx(0.0135) and first["p_holm_vs_next"] == ab["p_holm"]
    assert first["mdd_vs_next_ci_lower"] < expected < first["mdd_vs_next_ci_upper"]
    assert math.isnan(ranking.iloc[2]["mdd_vs_next"])  # the last model has no next
    assert indistinguishable(ranking, pairs) == []

    close = base - exact(rng, 100, 0.0045, 0.05)  # t = 0.9: not distinguishable from A
    ranking, pairs = leaderboard(sweep_values({"A": base, "A'": close, "C": base - 0.3 + exact(rng, 100, 0, 0.05)}))
    assert list(ranking["group"]) == [1, 1, 2]
    [line] = indistinguishable(ranking, pairs)  # one group of two or more: named above the leaderboard
    assert line.startswith("Not distinguishable (discharge, tcs, grader g): A (") and "A' (" in line
    assert "C (" not in line and "n 100" in line
    assert "paired t-test at α = 0.05, Holm-adjusted over the 3 model pairs of this key" in line


def test_holm_keeps_together_neighbours_whose_unadjusted_test_alone_would_part_them():
    """A - B and B - C each have p = 0.03 on their own (t = 2.20 over 100 cases), A - C is far clearer: Holm
    multiplies the two 0.03 by 2 (0.06 ≥ 0.05), so B stays in A's group while C, distinguishable from A, opens
    the next; A's interval with B alone (unadjusted) excludes zero."""
    rng = np.random.default_rng(11)
    step = stats.t.isf(0.015, 99) * 0.05 / 10
    a = rng.uniform(0.3, 0.7, 100)
    b = a - exact(rng, 100, step, 0.05)
    c = b - exact(rng, 100, step, 0.05)
    ranking, pairs = leaderboard(sweep_values({"A": a, "B": b, "C": c}))
    by_pair = pairs.set_index(["model_a", "model_b"])
    assert by_pair.loc[("A", "B"), "p_value"] == pytest.approx(0.03) == by_pair.loc[("B", "C"), "p_value"]
    assert by_pair.loc[("A", "B"), "p_holm"] == pytest.approx(0.06) == by_pair.loc[("B", "C"), "p_holm"]
    assert by_pair.loc[("A", "C"), "distinguishable"] and not by_pair.loc[("A", "B"), "distinguishable"]
    assert list(ranking["group"]) == [1, 1, 2] and ranking.iloc[0]["resolved_vs_next"]


# --- planted truth: a real difference smaller than the MDD is found at the rate the power predicts -------

SIMULATIONS = 4000


@pytest.fixture
def quick_holm(monkeypatch):
    """statsmodels' Holm adjustment runs ``gc.collect()`` on every call (~0.1 s in a test process); thousands
    of simulated families skip it, which changes no number."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda *args: 0)


def rejection_interval(rejected: np.ndarray) -> tuple[float, float]:
    """The 99.99 % Wilson interval of a rejection rate (about ± 4 SE)."""
    return stats.binomtest(int(rejected.sum()), len(rejected)).proportion_ci(0.9999, method="wilson")


def test_the_leaderboards_paired_test_finds_a_difference_below_the_mdd_at_its_power(quick_holm):
    """4,000 seeded pairs of models on 30 cases whose true paired difference is 0.06 with SD 0.2: below the MDD
    (mdd(0.2, 30) ≈ 0.106), so not reliably detected, but real; the paired t-test (one pair: Holm leaves it as
    it is) rejects at statsmodels' power of the paired t-test there, about 0.35, within the rate's interval."""
    n, sd, true = 30, 0.2, 0.06
    assert true < detectable.mdd(sd, n)
    from statsmodels.stats.power import TTestPower

    predicted = float(TTestPower().power(effect_size=true / sd, nobs=n, alpha=0.05))
    rng = np.random.default_rng(12)
    differences = rng.normal(true, sd, (SIMULATIONS, n))
    adjusted = np.array([detectable.holm([detectable.paired_p(d)])[0] for d in differences])
    low, high = rejection_interval(adjusted < 0.05)
    assert low < predicted < high and high - low < 0.06  # about ± 4 SE of 0.0075


def test_compare_finds_a_drop_below_the_mdd_at_the_tests_power_and_never_calls_it_indistinguishable():
    """400 seeded baseline/candidate pairs of 100 cases whose candidate is truly 0.03 lower (per-case SD of the
    difference 0.15: below the MDD, mdd(0.15, 100) ≈ 0.042): compare's verdict (its paired bootstrap interval
    excluding zero) is a significant drop at the paired t-test's power there (about 0.51; the percentile
    bootstrap's and the t-test's rejection agree to ~0.01 at 100 cases), within the rate's interval; and a
    row whose interval excludes zero shows the MDD as what the comparison detects, not as a verdict."""
    from statsmodels.stats.power import TTestPower

    from bedside.reporting.compare import compare_metric, markdown

    n, sd, true, runs = 100, 0.15, 0.03, 400
    assert true < detectable.mdd(sd, n)
    predicted = float(TTestPower().power(effect_size=true / sd, nobs=n, alpha=0.05))
    rng = np.random.default_rng(13)
    found, shown = [], None
    for _ in range(runs):
        base = rng.uniform(0.3, 0.7, n)
        cand = base - rng.normal(true, sd, n)
        tables = [
            pd.DataFrame(
                {"id": [f"c{i}" for i in range(n)], "epoch": 1, "scorer": "topic_checklist", "key": "tcs"}
            ).assign(value=v)
            for v in (base, cand)
        ]
        result = compare_metric(*tables, "tcs", None, resamples=999)
        found.append(result.verdict == "significant drop")
        if found[-1] and abs(result.difference) < result.mdd:
            shown = result
    low, high = rejection_interval(np.array(found))
    assert low < predicted < high
    assert shown is not None  # a drop smaller than the MDD, found
    text = markdown([shown], "b.eval", "c.eval", 999, 0, gate=False)
    assert "significant drop" in text and "reliably detects ≥ MDD [95 % CI]" in text
    assert "inside" not in text and "not distinguishable" not in text


def test_holm_keeps_the_chance_of_parting_any_two_equal_models_at_alpha(quick_holm):
    """1,000 seeded sweeps of 5 equally good models (10 pairs) on 40 cases: an unadjusted t-test parts at least
    one pair far more often than α; after Holm's adjustment the rate is at most α (within its interval)."""
    rng = np.random.default_rng(14)
    any_raw, any_holm = [], []
    for _ in range(1000):
        truth = rng.uniform(0.3, 0.7, 40)
        models = truth + rng.normal(0, 0.1, (5, 40))
        p = [detectable.paired_p(models[i] - models[j]) for i in range(5) for j in range(i + 1, 5)]
        any_raw.append(min(p) < 0.05)
        any_holm.append(min(detectable.holm(p)) < 0.05)
    assert rejection_interval(np.array(any_raw))[0] > 0.05
    assert rejection_interval(np.array(any_holm))[0] < 0.05


# --- estimate --detect: the variance components and the cases they need -----------------------------


def pilot(rng: np.random.Generator, n: int, k: int, sigma_delta: float, sigma_e: float) -> dict[str, np.ndarray]:
    """Two models on n cases × k epochs: case truth ~ N(0.5, 0.2), B's truth off by N(0.05, sigma_delta),
    each epoch adds N(0, sigma_e)."""
    truth = rng.normal(0.5, 0.2, n)
    other = truth + 0.05 + rng.normal(0, sigma_delta, n)
    return {
        "a": truth[:, None] + rng.normal(0, sigma_e, (n, k)),
        "b": other[:, None] + rng.normal(0, sigma_e, (n, k)),
    }


def test_the_pilots_variance_components_are_recovered_without_bias():
    """300 simulated pilots (2 models, 60 cases, 3 epochs; sigma_delta 0.2, sigma_e 0.2): the mean of each
    estimated variance over the pilots is its true value within 4 SE of that mean (SE: the SD over the pilots
    / sqrt(300))."""
    rng = np.random.default_rng(8)
    estimates = np.array([detectable.components(pilot(rng, 60, 3, 0.2, 0.2))[:2] for _ in range(300)])
    se = estimates.std(axis=0, ddof=1) / math.sqrt(len(estimates))
    assert np.all(np.abs(estimates.mean(axis=0) - [0.04, 0.04]) < 4 * se)


def test_a_run_of_the_planned_size_detects_the_wanted_difference_at_the_stated_power():
    """The cases planned for a difference of 0.05 at the true SD of a case's paired difference with k epochs,
    sqrt(sigma_delta² + 2 sigma_e² / k): 3,000 simulated runs of that size reject at the t-test's exact power
    there (noncentral t; at least 0.8, the plan rounds up), within 4 SE."""
    rng = np.random.default_rng(9)
    for k in (1, 3):
        sd = math.sqrt(0.1**2 + 2 * 0.2**2 / k)
        n = int(detectable.cases_for(0.05, sd))
        assert detectable.mdd(sd, n) <= 0.05 < detectable.mdd(sd, n - 1)
        critical = stats.t.ppf(0.975, n - 1)
        exact = stats.nct.sf(critical, n - 1, 0.05 / sd * math.sqrt(n))
        rejected = stats.ttest_1samp(rng.normal(0.05, sd, (3000, n)), 0.0, axis=1).pvalue < 0.05
        assert exact >= 0.8 and abs(rejected.mean() - exact) < 4 * math.sqrt(exact * (1 - exact) / 3000)


def test_estimate_detect_prints_the_cases_per_epochs_from_pilot_logs(tmp_path, capsys):
    rng = np.random.default_rng(10)
    paths = []
    for model, values in pilot(rng, 40, 2, 0.1, 0.15).items():
        samples = [
            sample(f"c{i}", {"topic_checklist": Score(value={"tcs": float(v), "unscored": 0.0})}, epoch=e + 1)
            for i, row in enumerate(values)
            for e, v in enumerate(row)
        ]
        paths.append(write(log("bedside/discharge", f"prov/{model}", samples), tmp_path / f"{model}.eval"))
    out_dir = tmp_path / "plan"
    assert main(["estimate", *paths, "--detect", "0.05", "--metric", "tcs", "--csv", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(out_dir / "detect.csv")
    direct = detectable.needs(scores_frame(load(paths)), 0.05, ["tcs"])
    assert list(table["cases"]) == list(direct["cases"]) and list(table["epochs"]) == [1, 2, 3, 5]
    assert table["cases"].is_monotonic_decreasing and (table["cases_ci_lower"] <= table["cases"]).all()
    assert "2 models' paired differences" in printed and "from 40 pilot cases" in printed
    first = table.iloc[0]
    assert f"1 epoch(s): {first['cases']:,.0f} cases [" in printed
    assert main(["estimate", *paths]) == 2  # neither --cases nor --detect
    assert main(["estimate", *paths, "--detect", "0.05", "--metric", "nope"]) == 2
    assert "bedside estimate: no two pilot cases scored on nope" in capsys.readouterr().out
    assert main(["estimate", paths[0], "--detect", "0.05", "--sd", "0.3", "--metric", "tcs"]) == 0
    assert f"any epochs: {detectable.cases_for(0.05, 0.3):,.0f} cases" in capsys.readouterr().out


def test_scales_bound_the_mdd_and_its_interval():
    """A difference of a binary rate cannot exceed 1: nor can its MDD, at any n."""
    floor = detectable.detectable([1.0, -1.0, 1.0], BINARY)
    assert 0 <= floor["mdd_low"] <= floor["mdd"] <= floor["mdd_high"] <= 1
