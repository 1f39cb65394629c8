"""CPB stress behaviours as DischargeBench patient overlays, and their paired comparison (``bedside compare``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from inspect_ai.model import ChatMessageSystem

from bedside.cpb.records import CATEGORIES
from bedside.prompts import load_yaml
from bedside.reporting.compare import compare, compare_metric
from bedside.solvers.discharge.encounter import BEHAVIORS, behavior_overlay
from bedside.tasks.discharge import discharge
from tests import forked
from tests.conftest import model_inputs, run, scripted, store


def roles():
    return {"patient": scripted(), "monitor": scripted(), "grader": scripted()}


def test_the_overlays_enact_the_four_cpb_behaviours_in_3_to_5_sentences():
    overlays = load_yaml("discharge/stress_overlays.yaml")["behaviors"]
    assert set(overlays) == {"contradiction", "false_belief", "self_diagnosis", "care_resistance"}
    # each enacts one of CPB-Bench's four categories, by the paper's label
    assert {CATEGORIES[o["cpb_category"]] for o in overlays.values()} == set(overlays)
    for key, item in overlays.items():
        text = item["overlay"]
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
        assert 3 <= len(sentences) <= 5, (key, len(sentences))
        assert text.startswith("During this session you") and " you " in text
        assert "{" not in text  # plain text, injected as is
    assert "educator acknowledges your" in overlays["care_resistance"]["overlay"]


def test_every_behavior_has_an_overlay_and_unknown_is_rejected():
    assert behavior_overlay("none") == ""
    for b in BEHAVIORS[1:]:
        assert len(behavior_overlay(b)) > 100
    with pytest.raises(ValueError, match="behavior='grumpy'"):
        discharge(behavior="grumpy")


@pytest.mark.eval
def test_overlay_reaches_the_patient_prompt_only(tmp_path):
    log = run(discharge(behavior="care_resistance"), roles=roles(), log_dir=tmp_path, limit=1)
    sample = log.samples[0]
    overlay = behavior_overlay("care_resistance")
    patient_systems = [m[0].text for m in model_inputs(sample, "patient") if isinstance(m[0], ChatMessageSystem)]
    assert patient_systems and all(
        "## Your Behaviour In This Conversation" in s and overlay in s for s in patient_systems
    )
    assert not any(overlay in m.text for msgs in model_inputs(sample, None) for m in msgs)  # educator never sees it
    assert sample.metadata["behavior"] == "care_resistance" and log.eval.task_args["behavior"] == "care_resistance"
    # the scripted patient acts on it
    patient_turns = [t["message"] for t in store(sample)["history"] if t["role"] == "patient"]
    assert any("won't go to that follow-up" in t for t in patient_turns)


@pytest.mark.eval
def test_no_overlay_by_default(tmp_path):
    log = run(discharge(), roles=roles(), log_dir=tmp_path, limit=1, score=False)
    systems = [m[0].text for m in model_inputs(log.samples[0], "patient")]
    assert not any("## Your Behaviour In This Conversation" in s for s in systems)


def table(rows):
    return pd.DataFrame(rows, columns=["id", "epoch", "scorer", "key", "value"])


@pytest.mark.eval
def test_paired_delta_arithmetic_and_unscored_pairs():
    base = table(
        [("a", 1, "s", "tcs", 0.5), ("b", 1, "s", "tcs", 0.7), ("c", 1, "s", "tcs", 0.9), ("d", 1, "s", "tcs", 0.4)]
    )
    other = table(
        [
            ("a", 1, "s", "tcs", 0.4),
            ("b", 1, "s", "tcs", 0.4),
            ("c", 1, "s", "tcs", float("nan")),
            ("e", 1, "s", "tcs", 1.0),
        ]
    )
    row = compare_metric(base, other, "tcs", None)
    # pairs a, b (c is unscored on one side, d/e unpaired): deltas -0.1, -0.3
    assert row.n == 2 and row.excluded == 1
    assert row.difference == pytest.approx(-0.2)
    # bedside's interval rule on the deltas (percentile bootstrap): inside the deltas' range, where the
    # paired t-interval was -0.2 ± 1.27
    assert (row.ci_lower, row.ci_upper) == pytest.approx((-0.3, -0.1))
    assert row.baseline == pytest.approx(0.6) and row.candidate == pytest.approx(0.4)
    assert row.verdict == "significant drop" and not row.regressed  # no --max-drop: no gate


@pytest.mark.eval
def test_compare_without_metrics_on_two_runs_of_the_same_cases(tmp_path):
    base = run(discharge(), roles=roles(), log_dir=tmp_path / "none", limit=3)
    stressed = run(discharge(behavior="care_resistance"), roles=roles(), log_dir=tmp_path / "cr", limit=3)
    results = compare(base.location, stressed.location, None, None)
    report = {r.metric: r for r in results}
    assert len(report) == len(results)  # each (scorer, key) once; a key of two scorers is written scorer/key
    assert {"tcs", "comprehension", "naturalness", "readability", "rouge_l", "cosine", "clean_complete"} <= set(report)
    assert {"comprehension/na_questions", "factual_consistency/na_questions"} <= set(report)
    assert all(r.n == 3 for r in report.values())
    assert report["turns"].difference == pytest.approx(0.0)  # same topic walk, same length
    # the resisting patient changes what the educator's turns respond to, and the report shows it
    assert report["readability"].difference != 0.0
    assert not any(r.regressed for r in report.values())  # no --max-drop: a report, not a gate
    bin_dir = Path(sys.executable).parent
    out = tmp_path / "compare.csv"
    proc = forked.run(
        [str(bin_dir / "bedside"), "compare", base.location, stressed.location, "--csv", str(out)],
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert stressed.location in proc.stdout and "| `tcs` |" in proc.stdout and "no gate" in proc.stdout
    assert len(pd.read_csv(out)) == len(report)
