"""CPB stress behaviours as DischargeBench patient overlays, and the paired delta report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai.model import ChatMessageSystem

from bedside.report import delta_report, paired_delta
from bedside.solvers.discharge import BEHAVIORS, behavior_overlay
from bedside.tasks.discharge import discharge
from tests.conftest import model_inputs, run, scripted, store


def roles():
    return {"patient": scripted(), "monitor": scripted(), "grader": scripted()}


def test_every_behavior_has_an_overlay_and_unknown_is_rejected():
    assert behavior_overlay("none") == ""
    for b in BEHAVIORS[1:]:
        assert len(behavior_overlay(b)) > 100
    with pytest.raises(ValueError, match="behavior='grumpy'"):
        discharge(behavior="grumpy")


def test_overlay_reaches_the_patient_prompt_only(tmp_path):
    log = run(discharge(behavior="care_resistance"), roles=roles(), log_dir=tmp_path, limit=1)
    sample = log.samples[0]
    overlay = behavior_overlay("care_resistance")
    patient_systems = [m[0].text for m in model_inputs(sample, "patient") if isinstance(m[0], ChatMessageSystem)]
    assert patient_systems and all("## Your Behaviour In This Conversation" in s and overlay in s for s in patient_systems)
    assert not any(overlay in m.text for msgs in model_inputs(sample, None) for m in msgs)  # educator never sees it
    assert sample.metadata["behavior"] == "care_resistance" and log.eval.task_args["behavior"] == "care_resistance"
    # the scripted patient acts on it
    patient_turns = [t["message"] for t in store(sample)["history"] if t["role"] == "patient"]
    assert any("won't go to that follow-up" in t for t in patient_turns)


def test_no_overlay_by_default(tmp_path):
    log = run(discharge(), roles=roles(), log_dir=tmp_path, limit=1, score=False)
    systems = [m[0].text for m in model_inputs(log.samples[0], "patient")]
    assert not any("## Your Behaviour In This Conversation" in s for s in systems)


def table(rows):
    return pd.DataFrame(rows, columns=["id", "epoch", "scorer", "key", "value"])


def test_paired_delta_arithmetic_and_unscored_pairs():
    base = table([("a", 1, "s", "tcs", 0.5), ("b", 1, "s", "tcs", 0.7), ("c", 1, "s", "tcs", 0.9), ("d", 1, "s", "tcs", 0.4)])
    other = table([("a", 1, "s", "tcs", 0.4), ("b", 1, "s", "tcs", 0.4), ("c", 1, "s", "tcs", float("nan")), ("e", 1, "s", "tcs", 1.0)])
    [row] = paired_delta(base, other).to_dict("records")
    # pairs a, b (c is unscored on one side, d/e unpaired): deltas -0.1, -0.3
    assert row["n"] == 2 and row["excluded_unscored"] == 1
    assert row["delta"] == pytest.approx(-0.2)
    # bedside's interval rule on the deltas (percentile bootstrap): inside the deltas' range, where the
    # paired t-interval was -0.2 ± 1.27
    assert (row["ci_lower"], row["ci_upper"]) == pytest.approx((-0.3, -0.1))
    assert row["baseline"] == pytest.approx(0.6) and row["other"] == pytest.approx(0.4)


def test_delta_report_on_two_runs_of_the_same_cases(tmp_path):
    base = run(discharge(), roles=roles(), log_dir=tmp_path / "none", limit=3)
    stressed = run(discharge(behavior="care_resistance"), roles=roles(), log_dir=tmp_path / "cr", limit=3)
    report = delta_report(base.location, [stressed.location])
    keys = set(report["key"])
    assert {"tcs", "comprehension", "naturalness", "readability", "rouge_l", "cosine", "clean_complete"} <= keys
    assert (report["n"] == 3).all()
    assert "discharge behavior=care_resistance" in report["comparison"].iloc[0]
    turns = report.set_index("key").loc["turns"]
    assert turns["delta"] == pytest.approx(0.0)  # same topic walk, same length
    # the resisting patient changes what the educator's turns respond to, and the report shows it
    assert report.set_index("key").loc["readability", "delta"] != 0.0
    out = tmp_path / "delta.csv"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "bedside-report"), "delta", base.location, stressed.location, "--csv", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "behavior=care_resistance" in proc.stdout and "tcs" in proc.stdout
    assert len(pd.read_csv(out)) == len(report)
