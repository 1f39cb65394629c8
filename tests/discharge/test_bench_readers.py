"""``bench/readers.py make``: the logs it writes without model calls read as a real sweep's, with Inspect's own
reader (``samples_df``, the sample summaries) and with ``bedside report``, every sample there once."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from inspect_ai import eval
from inspect_ai.analysis import samples_df
from inspect_ai.log import read_eval_log, read_eval_log_sample_summaries, read_eval_log_samples

from bedside.tasks.discharge import discharge
from bench import readers
from tests.conftest import bedside_command, scripted

pytestmark = pytest.mark.eval


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], str]:
    """Two models' logs of 3 cases each, stretched from one short scripted sample."""
    root = tmp_path_factory.mktemp("bench-readers")
    [template] = eval(
        discharge(min_turns=4),
        model=scripted(educator_topics=2),
        model_roles={"patient": scripted(), "monitor": scripted(), "grader": scripted()},
        limit=1,
        log_dir=str(root / "template"),
        display="none",
    )
    assert template.status == "success", template.error
    paths = readers.make(samples=3, models=2, out=root / "sweep", template_path=template.location)
    return root, paths, template.location


def test_inspect_reads_every_declared_sample_from_the_summaries(sweep):
    root, paths, _ = sweep
    frame = samples_df(str(root / "sweep"), quiet=True)
    assert len(frame) == 6
    assert sorted(frame["id"]) == sorted(["bench-0001", "bench-0002", "bench-0003"] * 2)
    assert frame["sample_id"].is_unique  # a new uuid per sample
    for path in paths:
        header = read_eval_log(path, header_only=True)
        assert header.status == "success"
        assert header.results is not None and header.results.total_samples == 3
        assert header.eval.dataset.samples == 3
        assert len(read_eval_log_sample_summaries(path)) == 3
    assert {read_eval_log(p, header_only=True).eval.model for p in paths} == {
        "bench/educator-01",
        "bench/educator-02",
    }


def test_each_sample_is_a_session_of_its_own_length_with_every_score_key(sweep):
    _, paths, template_path = sweep
    [template] = read_eval_log(template_path).samples or []
    keys = {name: set(score.value) for name, score in (template.scores or {}).items()}
    for path in paths:
        for sample in read_eval_log_samples(path, resolve_attachments=True):
            history = sample.store["EncounterStore:history"]
            assert 10 <= len(history) <= 100
            assert {name: set(score.value) for name, score in (sample.scores or {}).items()} == keys
            assert sample.scores["encounter_outcome"].value["turns"] == len(history)
            turns = [m.text for m in sample.messages if m.role in ("user", "assistant")][1:]
            assert turns == [t["message"] for t in history]  # the conversation is the history
            assert len(set(turns)) == len(turns)
            note = sample.metadata["case"]["discharge_note"]
            educator_calls = [e for e in sample.events if e.event == "model" and e.role is None]
            assert len(educator_calls) == (len(history) + 1) // 2
            assert note in educator_calls[0].input[0].text
            assert set(sample.role_usage) == {"patient", "monitor", "grader"}


def test_bedside_report_reads_them_as_a_sweep(sweep, tmp_path):
    root, _, _ = sweep
    done = bedside_command("report", str(root / "sweep"), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    board = pd.read_csv(tmp_path / "report" / "leaderboard.csv")
    assert set(board["model"]) == {"bench/educator-01", "bench/educator-02"}
    assert set(board["n"]) == {3}
