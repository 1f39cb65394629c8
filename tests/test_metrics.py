"""Shared metrics: t-interval for scales, Wilson interval for 0/1 rates (t clipped to [0, 1] for
epoch-averaged rates), n that is 0 rather than NaN."""

from __future__ import annotations

import math

import pytest
from inspect_ai._eval.task.results import empty_metric_value
from inspect_ai.scorer import SampleScore, Score
from scipy import stats

from bedside.scorers.metrics import headline, interval_bounds, n, wilson_bounds


def scores(values, **meta):
    return [SampleScore(score=Score(value=v), sample_id=i, sample_metadata={k: m[i] for k, m in meta.items()})
            for i, v in enumerate(values)]


def test_wilson_matches_scipy_and_stays_in_unit_interval():
    b = wilson_bounds([1.0, 0.0, 0.0, 0.0, 0.0])
    ref = stats.binomtest(1, 5).proportion_ci(confidence_level=0.95, method="wilson")
    assert b == {"lower": pytest.approx(ref.low), "upper": pytest.approx(ref.high)}
    all_zero = wilson_bounds([0.0] * 6)
    assert all_zero["lower"] == pytest.approx(0.0, abs=1e-12) and 0 < all_zero["upper"] < 0.5
    with pytest.raises(ValueError, match="0/1"):
        wilson_bounds([0.5, 1.0])


def test_headline_intervals():
    mean_, t_ci, count = headline()
    xs = [3.0, 4.0, 5.0, 4.0]
    ss = scores(xs)
    half = stats.t.ppf(0.975, 3) * stats.sem(xs)
    assert mean_(ss) == 4.0 and count(ss) == {"n": 4}
    assert t_ci(ss) == {"lower": pytest.approx(4 - half), "upper": pytest.approx(4 + half)}
    _, w_ci, _ = headline(binary=True)
    assert w_ci(scores([1.0, 0.0, 1.0])) == wilson_bounds([1.0, 0.0, 1.0])


def test_rate_averaged_over_epochs_gets_a_clipped_t_interval():
    values = [0.5, 1.0, 1.0, 1.0]  # --epochs 2: one sample's outcomes were 0 and 1
    _, w_ci, _ = headline(binary=True)
    bounds = w_ci(scores(values))
    ref = stats.t.interval(0.95, 3, loc=sum(values) / 4, scale=stats.sem(values))
    assert bounds["lower"] == pytest.approx(ref[0]) and bounds["upper"] == 1.0 < ref[1]  # clipped, not raised
    assert interval_bounds([1.0, 0.0], binary=True) == wilson_bounds([1.0, 0.0])


def test_n_is_zero_not_nan_when_every_sample_is_unscored():
    assert empty_metric_value(n()) == {"n": 0}  # what Inspect reports for a key with no scored sample
    lower = interval_bounds([], binary=True)["lower"]
    assert math.isnan(lower)
