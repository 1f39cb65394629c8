"""--epochs with outcomes that differ between epochs, and metrics rebuilt from a log (what
`inspect log recover`, `inspect eval-retry` and `inspect score` do)."""

from __future__ import annotations

import copy
import math

import pytest
from inspect_ai.log import recompute_metrics

from bedside.tasks.discharge import discharge
from tests.conftest import metrics_of, run, scripted

pytestmark = pytest.mark.eval


def roles(**patient_options):
    return {"patient": scripted(**patient_options), "monitor": scripted(), "grader": scripted()}


def test_two_epochs_with_different_outcomes(tmp_path):
    # epoch 1: the patient breaks character for good -> hard stop; epoch 2: a clean session
    log = run(
        discharge(),
        roles=roles(break_character_turns=[3], break_character_attempts=99, only_epochs=1),
        log_dir=tmp_path,
        limit=2,
        epochs=2,
    )
    by_epoch = {(s.id, s.epoch): s.scores["encounter_outcome"].answer for s in log.samples}
    assert {v for (_, e), v in by_epoch.items() if e == 1} == {"hard_stop"}
    assert {v for (_, e), v in by_epoch.items() if e == 2} == {"clean_complete"}
    erroneous = metrics_of(log, "erroneous")
    assert erroneous["mean"] == pytest.approx(0.5) and erroneous["n"] == 2  # per-sample means of 0 and 1
    # both samples are at 0.5: no spread, so the bootstrap interval is [0.5, 0.5], inside [0, 1]
    assert erroneous["ci_lower"] == erroneous["ci_upper"] == 0.5


def test_metrics_are_rebuilt_from_the_log(tmp_path):
    log = run(discharge(), roles=roles(), log_dir=tmp_path, limit=2)
    before = {s.name: {k: m.value for k, m in s.metrics.items()} for s in log.results.scores}
    rebuilt = copy.deepcopy(log)
    recompute_metrics(rebuilt)  # the path of `inspect log recover` / eval-retry: metrics from the header
    after = {s.name: {k: m.value for k, m in s.metrics.items()} for s in rebuilt.results.scores}
    assert before.keys() == after.keys()
    for name, values in before.items():
        for key, value in values.items():
            assert after[name][key] == pytest.approx(value, nan_ok=True), (name, key)
    assert not math.isnan(after["topic_checklist"]["TCS"])


def test_medsp_and_cpb_metrics_are_rebuilt_from_the_log(tmp_path):
    from bedside.tasks.cpb import cpb
    from bedside.tasks.medsp import medsp
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb"))
    runs = [
        run(
            medsp(),
            roles={"patient": scripted(), "environment": scripted(), "grader": scripted()},
            log_dir=tmp_path / "m",
            limit=2,
        ),
        run(cpb(data=data), roles={"grader": scripted()}, log_dir=tmp_path / "c", limit=3, epochs=2),
    ]
    for log in runs:
        before = {(s.scorer, s.name): {k: m.value for k, m in s.metrics.items()} for s in log.results.scores}
        rebuilt = copy.deepcopy(log)
        recompute_metrics(rebuilt)
        after = {(s.scorer, s.name): {k: m.value for k, m in s.metrics.items()} for s in rebuilt.results.scores}
        assert before.keys() == after.keys() and before
        for name, values in before.items():
            for key, value in values.items():
                assert after[name][key] == pytest.approx(value, nan_ok=True), (log.eval.task, name, key)
