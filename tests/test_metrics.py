"""Shared metrics: t-interval for scales, Wilson interval for 0/1 rates, n, strata."""

from __future__ import annotations

import math

import pytest
from inspect_ai.scorer import SampleScore, Score
from scipy import stats

from bedside.scorers.metrics import headline, n, strata, wilson_bounds


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
    assert mean_(ss) == 4.0 and count(ss) == 4
    assert t_ci(ss) == {"lower": pytest.approx(4 - half), "upper": pytest.approx(4 + half)}
    _, w_ci, _ = headline(binary=True)
    assert w_ci(scores([1.0, 0.0, 1.0])) == wilson_bounds([1.0, 0.0, 1.0])


def test_strata_mean_ci_and_n_per_group():
    ss = scores([1.0, 0.0, 1.0, 1.0], personality=["anxious", "anxious", "neutral", "neutral"])
    out = strata("personality", binary=True)(ss)
    assert out["personality=anxious"] == 0.5 and out["personality=anxious n"] == 2
    assert out["personality=neutral"] == 1.0 and out["personality=neutral upper"] == pytest.approx(1.0)
    assert out["personality=anxious lower"] == pytest.approx(wilson_bounds([1.0, 0.0])["lower"])
    missing = strata("icd_chapter")(ss)
    assert missing["icd_chapter=<missing> n"] == 4
    assert n()(ss) == 4 and not math.isnan(out["personality=anxious upper"])
