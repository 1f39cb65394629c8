"""``bedside compare``: exit codes for improvement, noise and regression on logs with controlled values."""

from __future__ import annotations

import numpy as np
import pytest
from inspect_ai.scorer import Score
from scipy import stats

from bedside.cli import main
from bedside.reporting.compare import compare
from tests.reporting.synth import NAN, log, sample, write

pytestmark = pytest.mark.eval

BASE = [0.80, 0.70, 0.90, 0.60, 0.75, 0.85, 0.65, 0.80, 0.70, 0.90, 0.60, 0.75]


def make(tmp_path, name: str, values, erroneous=None, ids=None) -> str:
    ids = ids or [f"c{i}" for i in range(len(values))]
    erroneous = erroneous or [0.0] * len(values)
    samples = [sample(i, {"quality": Score(value={"x": v, "erroneous": e})}) for i, v, e in zip(ids, values, erroneous)]
    return write(log("bedside/discharge", "prov/a", samples), tmp_path / f"{name}.eval")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    rng = np.random.default_rng(1)
    noise = [0.9 if i % 2 else -1.0 for i in range(len(BASE))]  # mean -0.05, huge spread
    return {
        "base": make(tmp, "base", BASE),
        "better": make(tmp, "better", [v + 0.05 + 0.01 * rng.standard_normal() for v in BASE]),
        "worse": make(tmp, "worse", [v - 0.20 + 0.01 * rng.standard_normal() for v in BASE]),
        "slightly_worse": make(tmp, "slightly_worse", [v - 0.02 + 0.005 * rng.standard_normal() for v in BASE]),
        "noisy": make(tmp, "noisy", [v + d for v, d in zip(BASE, noise)]),
        "more_errors": make(tmp, "more_errors", BASE, erroneous=[1.0] * 10 + [0.0] * 2),
        "with_nan": make(tmp, "with_nan", [NAN, NAN] + [v - 0.2 for v in BASE[2:]]),
        "other_cases": make(tmp, "other_cases", BASE, ids=[f"z{i}" for i in range(len(BASE))]),
    }


def gate(logs, candidate, *extra, tmp_path=None) -> int:
    return main(
        ["compare", logs["base"], logs[candidate], "--metric", "x", "--max-drop", "0.05", "--resamples", "2000", *extra]
    )


def test_improvement_passes(logs, capsys):
    assert gate(logs, "better") == 0
    assert "improvement" in capsys.readouterr().out


def test_regression_fails(logs, capsys, tmp_path):
    summary = tmp_path / "summary.md"
    assert gate(logs, "worse", "--markdown", str(summary)) == 1
    out = capsys.readouterr().out
    assert "Regression" in out and "| `x` |" in out
    assert summary.read_text() == out.rstrip("\n") + "\n"  # the same Markdown in the file


def test_noise_passes_although_the_mean_dropped(logs, capsys):
    [result] = compare(logs["base"], logs["noisy"], ["x"], 0.01, resamples=2000)
    assert result.drop > 0.01 and result.ci_lower < 0 < result.ci_upper
    assert result.verdict == "no significant change"
    assert gate(logs, "noisy", "--max-drop", "0.01") == 0


def test_small_significant_drop_within_threshold_passes(logs):
    [result] = compare(logs["base"], logs["slightly_worse"], ["x"], 0.05, resamples=2000)
    assert result.verdict == "drop within threshold" and result.ci_upper < 0
    assert gate(logs, "slightly_worse") == 0


def test_lower_is_better_keys_gate_on_an_increase(logs):
    assert main(["compare", logs["base"], logs["more_errors"], "--metric", "erroneous", "--max-drop", "0.1"]) == 1
    assert (
        main(["compare", logs["more_errors"], logs["base"], "--metric", "quality/erroneous", "--max-drop", "0.1"]) == 0
    )


def test_interval_is_scipys_paired_bootstrap(logs):
    [result] = compare(logs["base"], logs["worse"], ["x"], 0.05, resamples=999, seed=3)
    from inspect_ai.log import read_eval_log

    base = [s.scores["quality"].value["x"] for s in read_eval_log(logs["base"]).samples]
    cand = [s.scores["quality"].value["x"] for s in read_eval_log(logs["worse"]).samples]
    want = stats.bootstrap(
        (np.array(base), np.array(cand)),
        lambda b, c, axis=-1: np.mean(c - b, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=999,
        method="percentile",
        rng=np.random.default_rng(3),
    ).confidence_interval
    assert (result.ci_lower, result.ci_upper) == pytest.approx((want.low, want.high))
    assert result.difference == pytest.approx(np.mean(np.array(cand) - np.array(base)))
    assert result.n == len(BASE)


def test_unscored_pairs_are_left_out_and_counted(logs):
    [result] = compare(logs["base"], logs["with_nan"], ["x"], 0.05, resamples=500)
    assert (result.n, result.excluded) == (len(BASE) - 2, 2) and result.verdict == "regression"


def test_unusable_input_exits_2(logs, capsys):
    assert gate(logs, "other_cases") == 2
    assert "share no sample id" in capsys.readouterr().out
    assert main(["compare", logs["base"], logs["better"], "--metric", "nope", "--max-drop", "0.1"]) == 2
    assert "not a score key" in capsys.readouterr().out
