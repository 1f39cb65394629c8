"""``bedside estimate``: the bill of a planned run from pilot logs, checked on made-up pilots and against a
real second run (a 4-case scripted pilot vs the measured totals of the 24-case scripted run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bedside.reporting.estimate import FIELDS, Pilot, estimate, predictive_totals, read_pilot, render


def pilot(per_sample: list[tuple[int, int, int]], seconds: list[float], role: str = "educator") -> Pilot:
    rows = [
        {
            "sample": f"s{i}",
            "role": role,
            "role_model": "openai/gpt-5.5",
            "protocol": f"x.{role}",
            "calls": 1,
            "input_tokens": inp,
            "input_tokens_cache_read": cached,
            "output_tokens": out,
        }
        for i, (inp, cached, out) in enumerate(per_sample)
    ]
    samples = pd.DataFrame({"sample": [f"s{i}" for i in range(len(seconds))], "seconds": seconds, "human_seconds": 0.0})
    return Pilot(
        calls=pd.DataFrame(rows, columns=["sample", "role", "role_model", "protocol", *FIELDS]), samples=samples
    )


PRICES = {
    "per_tokens": 1_000_000,
    "currency": "USD",
    "models": {"openai/gpt-5.5": {"input": 1.0, "output": 10.0, "input_cache_read": 0.1}},
}


def test_identical_pilot_samples_give_an_exact_estimate_and_cost():
    tables = estimate(pilot([(1000, 500, 100)] * 3, [60.0] * 3), cases=100, epochs=2, max_connections=10, prices=PRICES)
    row = tables["by_role"].iloc[0]
    assert row["calls"] == row["calls_low"] == row["calls_high"] == 200
    assert row["input_tokens"] == 200_000 and row["output_tokens"] == 20_000
    # 200k input at 1/M, 100k cached at 0.1/M, 20k output at 10/M
    assert row["cost"] == pytest.approx(0.2 + 0.01 + 0.2)
    totals = tables["totals"].iloc[0]
    assert totals["wall_seconds"] == pytest.approx(200 * 60 / 10)


def two_roles() -> Pilot:
    """A pilot whose samples each make one educator call and one grader call."""
    educator, grader = pilot([(1000, 0, 100)] * 2, [60.0] * 2), pilot([(4000, 0, 200)] * 2, [60.0] * 2, role="grader")
    return Pilot(calls=pd.concat([educator.calls, grader.calls], ignore_index=True), samples=educator.samples)


def test_a_batched_role_is_priced_less_its_batch_discount_and_the_others_live():
    prices = {**PRICES, "models": {"openai/gpt-5.5": {**PRICES["models"]["openai/gpt-5.5"], "batch_discount": 0.5}}}
    live = estimate(two_roles(), cases=10, prices=prices)["by_role"].set_index("role")
    batched_tables = estimate(two_roles(), cases=10, prices=prices, batched=["grader"])
    batched = batched_tables["by_role"].set_index("role")
    assert list(live["mode"]) == ["live", "live"] and batched["mode"].to_dict() == {
        "educator": "live",
        "grader": "batch",
    }
    assert (
        batched.loc["grader", "cost"] == pytest.approx(live.loc["grader", "cost"] / 2) == pytest.approx(10 * 0.006 / 2)
    )
    assert batched.loc["grader", ["cost_low", "cost_high"]].tolist() == pytest.approx([0.03, 0.03])
    assert batched.loc["educator", "cost"] == live.loc["educator", "cost"]
    assert batched.loc["grader", "input_tokens"] == live.loc["grader", "input_tokens"]  # tokens do not change
    by_protocol = batched_tables["by_protocol"].set_index("role")
    assert by_protocol.loc["grader", "mode"] == "batch" and by_protocol.loc["grader", "cost"] == pytest.approx(0.03)
    assert batched_tables["totals"].iloc[0]["cost"] == pytest.approx(10 * 0.002 + 0.03)
    assert "grader through the batch API" in render(batched_tables, 0.9, "USD")
    with pytest.raises(ValueError, match="--batch judge: no such role in the pilot"):
        estimate(two_roles(), cases=10, prices=prices, batched=["judge"])
    with pytest.raises(
        ValueError, match="--batch grader: the price table .* sets no batch_discount for openai/gpt-5.5"
    ):
        estimate(two_roles(), cases=10, prices=PRICES, batched=["grader"])


def test_the_command_prices_a_batched_grader(tmp_path, capsys):
    """``bedside estimate LOG --batch grader`` on a pilot log: the grader's row through the batch API, at half
    the live cost with the shipped table's example discount; one line when the table has none."""
    from bedside.cli import main
    from tests.reporting.synth import event, log, sample, write

    events = [event(None, "openai/gpt-5.5", 1000, 100), event("grader", "openai/gpt-5.5", 4000, 200)]
    path = write(log("bedside/cpb", "openai/gpt-5.5", [sample("c1", {}, events=events)]), tmp_path / "pilot.eval")
    prices = str(Path(__file__).parents[2] / "bedside" / "reporting" / "prices.yaml")
    assert main(["estimate", path, "--cases", "100", "--prices", prices]) == 0
    live = capsys.readouterr().out
    assert main(["estimate", path, "--cases", "100", "--prices", prices, "--batch", "grader"]) == 0
    batched = capsys.readouterr().out
    grader = lambda out: next(line for line in out.splitlines() if line.strip().startswith("grader"))  # noqa: E731
    assert "(openai/gpt-5.5 through the batch API)" in grader(batched) and "batch API" not in grader(live)
    cost = lambda line: float(line.split(" cost ")[1].split()[0])  # noqa: E731
    assert cost(grader(batched)) == pytest.approx(cost(grader(live)) / 2, abs=0.01)
    table = tmp_path / "prices.yaml"
    table.write_text("per_tokens: 1000000\nmodels:\n  openai/*: {input: 1.0, output: 2.0}\n")
    assert main(["estimate", path, "--cases", "100", "--prices", str(table), "--batch", "grader"]) == 2
    assert capsys.readouterr().out.strip().startswith("bedside estimate: --batch grader: the price table")


def test_the_interval_holds_the_spread_and_narrows_with_a_larger_pilot():
    rng = np.random.default_rng(1)
    values = rng.lognormal(8, 0.5, size=400)
    small = predictive_totals(values[:4], 500, 4000, np.random.default_rng(0))
    large = predictive_totals(values, 500, 4000, np.random.default_rng(0))
    width = lambda d: np.subtract(*np.quantile(d, [0.95, 0.05]))  # noqa: E731
    assert width(small) > width(large) > 0
    # coverage: over many pilots of 30 samples, the 90 % interval holds the total of a fresh planned run
    # of 500 samples about 90 % of the time
    hits = 0
    for trial in range(200):
        draws = predictive_totals(rng.lognormal(8, 0.5, size=30), 500, 2000, np.random.default_rng(trial))
        actual = rng.lognormal(8, 0.5, size=500).sum()
        hits += np.quantile(draws, 0.05) <= actual <= np.quantile(draws, 0.95)
    assert 0.8 <= hits / 200 <= 0.97, hits


def test_wall_time_is_never_below_the_longest_sample():
    tables = estimate(pilot([(10, 0, 1)] * 2, [30.0, 300.0]), cases=2, max_connections=64)
    assert tables["totals"].iloc[0]["wall_seconds"] == pytest.approx(300.0)


#: measured on the scripted DischargeBench demo set: calls 1.000, input tokens 1.021, output tokens 1.026
TOLERANCE = 0.10  # tokens and calls: |estimate / measured - 1| below this


@pytest.mark.eval
def test_a_four_case_pilot_estimates_the_24_case_run(tmp_path):
    """Calls and tokens of the 24-case scripted run from a 4-case pilot, within :data:`TOLERANCE`. The
    wall-time estimate is a timing: ``bench/estimate.py`` measures it (pilot and run in processes of
    their own, as a user runs them), not this test."""
    from inspect_ai import eval

    roles = {r: "bedside/scripted" for r in ("patient", "monitor", "grader")}
    logs = {}
    for n in (4, 24):
        [log] = eval(
            "bedside/discharge",
            model="bedside/scripted",
            model_roles=roles,
            limit=n,
            task_args={"cache_references": False},  # no call answered from Inspect's cache of another test
            log_dir=str(tmp_path / f"run{n}"),
            display="none",
            log_realtime=False,  # no live sample buffer: the test reads the finished log
            max_connections=4,
        )
        assert log.status == "success"
        logs[n] = log
    planned = estimate(read_pilot([logs[4].location]), cases=24, max_connections=4)["totals"].iloc[0]
    measured = read_pilot([logs[24].location])
    for field in ("calls", "input_tokens", "output_tokens"):
        ratio = planned[field] / measured.calls[field].sum()
        assert abs(ratio - 1) < TOLERANCE, (field, ratio)
