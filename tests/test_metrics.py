"""bedside's one interval rule (:mod:`bedside.intervals`), by the scales the scorers declare
(:func:`bedside.benchmarks.score_key`), and the summary / health blocks Inspect shows
(:mod:`bedside.scorers.metrics`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from inspect_ai.scorer import SampleScore, Score
from scipy import stats

from bedside import benchmarks
from bedside.intervals import BINARY, LIKERT, UNBOUNDED, UNIT, case_bootstrap, mean_interval, summarise, wilson
from bedside.scorers.metrics import gather_health, health_counts, summary
from tests.compat import empty_metric_value


def scale_of(key: str):
    return benchmarks.score_key(key, strict=True).scale


def scores(values):
    return [SampleScore(score=Score(value=v), sample_id=i) for i, v in enumerate(values)]


@pytest.mark.eval
def test_wilson_only_for_scales_declared_binary():
    ref = stats.binomtest(2, 3).proportion_ci(confidence_level=0.95, method="wilson")
    assert mean_interval([1.0, 0.0, 1.0], BINARY) == pytest.approx((ref.low, ref.high))
    assert scale_of("failure").binary and scale_of("cpb_failure/failure").binary
    # a comprehension item (0, 0.5 or 1) whose values happen to be 0/1 is not a binary rate: bootstrap
    assert not scale_of("q1").binary
    low, high = mean_interval([1.0, 0.0, 1.0], scale_of("q1"))
    assert (low, high) != pytest.approx((ref.low, ref.high)) and 0.0 <= low <= high <= 1.0
    # every value 1 on a [0, 1] scale: the bootstrap sees no spread (declared binary: Wilson's real width)
    assert mean_interval([1.0, 1.0, 1.0], scale_of("q1")) == (1.0, 1.0)
    assert mean_interval([1.0, 1.0, 1.0], BINARY)[0] == pytest.approx(wilson(3, 3)[0]) and wilson(3, 3)[0] < 0.5


def test_no_interval_below_two_values():
    for scale in (BINARY, UNIT, LIKERT, UNBOUNDED):
        assert mean_interval([], scale) is None and mean_interval([1.0], scale) is None
        assert mean_interval([float("nan"), 1.0], scale) is None  # NaN = unscored, left out
    row = summarise([4.0])
    assert row["mean"] == 4.0 and row["n"] == 1 and math.isnan(row["ci_lower"]) and math.isnan(row["ci_upper"])


@pytest.mark.eval
@pytest.mark.parametrize("key", ["clarity", "comprehension", "q1", "tcs", "rouge_l", "cosine", "failure", "micro"])
def test_intervals_stay_inside_the_declared_scale_for_small_skewed_samples(key):
    scale = scale_of(key)
    rng = np.random.default_rng(1)
    for n in (2, 3, 4, 7):
        for _ in range(25):
            if scale.binary:
                values = rng.integers(0, 2, n).astype(float)
            else:
                # mostly at the top of the scale, like the issue's clarity 4.667 over n = 3
                values = np.where(rng.random(n) < 0.8, scale.upper, rng.uniform(scale.lower, scale.upper, n))
            low, high = mean_interval(values, scale)
            assert scale.lower <= low <= values.mean() <= high <= scale.upper, (values, low, high)


@pytest.mark.eval
def test_the_issue_examples_are_now_bounded():
    assert mean_interval([5.0, 5.0, 4.0], LIKERT)[1] <= 5.0  # was 4.667 [3.232, 6.101]
    assert mean_interval([1.0, 1.0, 0.833], UNIT)[1] <= 1.0  # was 0.944 [0.705, 1.183]
    assert mean_interval([0.0, 0.5, 1.0, 1.0], UNIT)[0] >= 0.0  # was 0.625 [-0.137, 1.387]
    assert mean_interval([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], scale_of("unsupported_actions"))[0] >= 0.0  # was [-0.262, ...]


def test_epoch_averaged_binary_rate_gets_the_bootstrap_inside_unit_interval():
    values = [0.5, 1.0, 1.0, 1.0]  # --epochs 2: one sample's outcomes were 0 and 1
    low, high = mean_interval(values, BINARY)
    assert 0.5 <= low < high <= 1.0


@pytest.mark.eval
def test_bootstrap_is_deterministic_and_percentile():
    values = [3.0, 4.0, 5.0, 4.0, 2.0]
    first = mean_interval(values, LIKERT)
    assert first == mean_interval(values, LIKERT)
    ref = stats.bootstrap(
        (np.array(values),), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(0)
    ).confidence_interval
    assert first == pytest.approx((ref.low, ref.high))


@pytest.mark.parametrize("n", [2, 3, 7, 20, 31, 477])
def test_mean_interval_is_scipys_percentile_bootstrap_bit_for_bit(n):
    rng = np.random.default_rng(n)
    samples = [rng.normal(size=n), rng.integers(1, 6, size=n).astype(float), np.round(rng.random(n), 2)]
    for values in samples * 2:  # the second time from the kept draw
        ref = stats.bootstrap(
            (values,),
            np.mean,
            vectorized=True,
            n_resamples=2000,
            confidence_level=0.95,
            method="percentile",
            rng=np.random.default_rng(0),
        ).confidence_interval
        assert mean_interval(values, UNBOUNDED) == (float(ref.low), float(ref.high))


def test_case_bootstrap_draws_scipys_indices_and_keeps_draws_within_their_budget(monkeypatch):
    import bedside.intervals as intervals

    values = np.random.default_rng(5).random(40)
    drawn = np.random.default_rng(0).integers(0, 40, size=(2000, 40))  # scipy's draw for seed 0
    means = values[drawn].mean(-1)
    assert case_bootstrap(40, lambda idx: values[idx].mean(-1)) == tuple(
        np.quantile(means, [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2])
    )
    monkeypatch.setattr(intervals, "_drawn", {})
    monkeypatch.setattr(intervals, "DRAWN_BYTES", 3 * 2000 * 45 * 8)  # three draws of n <= 45
    for n in range(40, 46):
        mean_interval(np.arange(n, dtype=float))
        assert sum(a.nbytes for a in intervals._drawn.values()) <= intervals.DRAWN_BYTES
    assert [key[0] for key in intervals._drawn] == [43, 44, 45]  # the least recently used dropped


def test_case_bootstrap_of_a_ratio_of_sums():
    met, items = np.array([3.0, 1.0, 2.0]), np.array([4.0, 4.0, 3.0])
    low, high = case_bootstrap(3, lambda idx: met[idx].sum(-1) / items[idx].sum(-1), UNIT)
    assert 0.0 <= low < 6 / 11 < high <= 1.0
    assert case_bootstrap(1, lambda idx: idx.sum(-1)) is None


def test_every_declared_scale_is_ordered():
    for benchmark in benchmarks.all_benchmarks():
        for key in benchmark.keys.values():
            scale = key.scale
            assert scale.lower is None or scale.upper is None or scale.lower < scale.upper, key


def test_summary_block_rows():
    block = summary(["clarity", "tcs"])
    rows = block(
        [
            SampleScore(score=Score(value={"clarity": v, "tcs": t}), sample_id=i)
            for i, (v, t) in enumerate([(5.0, 0.5), (4.0, 1.0), (5.0, float("nan"))])
        ]
    )
    assert rows["CL"] == pytest.approx(14 / 3) and rows["TCS"] == 0.75
    assert rows["CL lower"] >= 4.0 and rows["CL upper"] <= 5.0
    assert rows["CL n"] == 3 and rows["TCS n"] == 2 and "n" not in rows  # different n: one per key
    same = block([SampleScore(score=Score(value={"clarity": 5.0, "tcs": 1.0}), sample_id=0)])
    assert same == {"CL": 5.0, "TCS": 1.0, "n": 1}  # n < 2: no interval rows
    empty = empty_metric_value(block)  # what Inspect reports when every sample is unscored
    assert empty["n"] == 0 and math.isnan(empty["CL"]) and "CL lower" not in empty


def test_health_gathers_bookkeeping_from_the_other_scorers():
    sample = {
        "conversation_quality": Score(value={"naturalness": 4.0, "unscored": 1.0}),
        "comprehension": Score(value={"comprehension": 0.5, "unscored": 2.0}),
        "encounter_outcome": Score(
            value={"erroneous": 0.0, "system_failure": 0.0, "role_fallbacks": 1.0, "turns": 12.0}
        ),
        "topic_checklist": Score(value={"tcs": 1.0, "unscored": 0.0}),
    }
    value = gather_health(sample)
    assert value == {"system_failure": 0.0, "unscored": 3.0, "role_fallbacks": 1.0, "turns": 12.0}
    # the block's order is the registry's (counts, tallies, means), whatever order the scorers ran in
    assert list(value) == ["unscored", "system_failure", "role_fallbacks", "turns"]
    assert list(gather_health(dict(reversed(sample.items())))) == list(value)
    rows = health_counts()(
        [
            SampleScore(score=Score(value=value), sample_id=0),
            SampleScore(score=Score(value={**value, "turns": 20.0}), sample_id=1),
        ]
    )
    assert rows == {"samples": 2, "system_failure": 0.0, "unscored": 6.0, "role_fallbacks": 2.0, "turns (mean)": 16.0}
