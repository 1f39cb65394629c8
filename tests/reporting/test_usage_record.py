"""A sample's usage recorded when it ends (:mod:`bedside.sample_usage`): ``bedside report`` reads a new log's
usage from its summaries without opening a sample, an older log's from its samples' events, both the same; a
re-scored log's record stays its events'."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from inspect_ai import score
from inspect_ai.log import EvalLog, read_eval_log, write_eval_log
from inspect_ai.scorer import Score

from bedside import sample_usage
from bedside.compat import resolve_scorers
from bedside.reporting import usage
from bedside.reporting.load import load
from bedside.reporting.run import Run
from bedside.scorers.metrics import scorer_name
from bedside.tasks.discharge import discharge
from tests.conftest import run, scripted

pytestmark = pytest.mark.eval


@pytest.fixture(scope="module")
def new_log(tmp_path_factory: pytest.TempPathFactory) -> EvalLog:
    """A scripted run of two cases with every role, the simulator check among its scorers."""
    roles = {"patient": scripted(), "monitor": scripted(), "grader": scripted(), "simulator_checker": scripted()}
    return run(
        discharge(simulator_check=True, min_turns=4, max_turns=8),
        roles=roles,
        log_dir=tmp_path_factory.mktemp("usage-record"),
        limit=2,
    )


def by_case(path: str | Path) -> pd.DataFrame:
    return usage.usage_by_case(load([str(path)]), usage.load_prices())


def from_events(log: EvalLog) -> dict[str, list[dict]]:
    return {f"{s.id}#{s.epoch}": sample_usage.rows_of(s.events) for s in log.samples or []}


def recorded(log: EvalLog) -> dict[str, list[dict] | None]:
    return {f"{s.id}#{s.epoch}": sample_usage.read(s.scores) for s in log.samples or []}


def without_record(log: EvalLog, path: Path) -> Path:
    """``log`` as bedside wrote it before it recorded usage: the health score without the record."""
    old = log.model_copy(deep=True)
    for sample in old.samples or []:
        health = (sample.scores or {})[sample_usage.HOLDER]
        health.metadata = {k: v for k, v in (health.metadata or {}).items() if k != sample_usage.KEY}
    write_eval_log(old, str(path))
    return path


def test_a_new_log_is_read_from_its_summaries_and_an_old_one_from_its_events(new_log, tmp_path, monkeypatch):
    assert recorded(new_log) == from_events(new_log)
    roles = {row["role"] for rows in from_events(new_log).values() for row in rows}
    assert roles == {None, "patient", "monitor", "grader", "simulator_checker"}
    old = without_record(new_log, tmp_path / "old.eval")

    def no_sample(*args, **kwargs):
        raise AssertionError("a sample was opened")

    with monkeypatch.context() as patched:
        patched.setattr(Run, "sample", no_sample)
        summaries = by_case(new_log.location)
        with pytest.raises(AssertionError, match="a sample was opened"):
            by_case(old)
    fallback = by_case(old)
    assert len(summaries) == 2 * 5 and summaries["calls"].sum() == sum(
        r["calls"] for rows in from_events(new_log).values() for r in rows
    )
    pd.testing.assert_frame_equal(summaries, fallback)
    pd.testing.assert_frame_equal(usage.usage_by_role(summaries), usage.usage_by_role(fallback))
    pd.testing.assert_frame_equal(usage.cost_per_case(summaries), usage.cost_per_case(fallback))


def test_a_record_not_whole_is_not_read():
    row = {**dict.fromkeys(sample_usage.COUNTS, 0), "role": None, "model": "m", "mode": "live", "calls": 2}
    rows = [{**row, "person_seconds": None}]
    made = sample_usage.record(rows, ["a", sample_usage.HOLDER])
    assert set(made) == {"scores", "role", "model", "mode", "calls"}  # the columns 0 (None) everywhere left out
    person = [*rows, {**row, "role": "patient", "model": "bedside/human", "person_seconds": 12.25}]
    recorded_person = sample_usage.record(person, ["a", sample_usage.HOLDER])
    assert recorded_person["person_seconds"] == [None, 12.25]

    def scores(value) -> dict[str, Score]:
        return {"a": Score(value=1), sample_usage.HOLDER: Score(value={}, metadata={sample_usage.KEY: value})}

    assert sample_usage.read(scores(made)) == rows
    assert sample_usage.read(scores(recorded_person)) == person
    assert sample_usage.read(scores("Key removed from summary (> 1k)")) is None  # thinned by Inspect's summary
    assert sample_usage.read({**scores(made), "b": Score(value=0)}) is None  # a scorer appended since


def test_inspect_score_records_the_calls_of_the_log_it_writes(new_log, tmp_path):
    """Re-scoring seeds the transcript with the old scorers' calls; the written log replaces them: the record
    counts the new ones only. A scorer appended later leaves the record stale: the events are read."""
    grader = {"grader": scripted(), "simulator_checker": scripted()}
    again = score(new_log, resolve_scorers(new_log), model_roles=grader, action="overwrite", display="none")
    assert recorded(again) == from_events(again)
    write_eval_log(again, str(tmp_path / "again.eval"))
    pd.testing.assert_frame_equal(by_case(tmp_path / "again.eval"), by_case(without_record(again, tmp_path / "o.eval")))
    [outcome] = [s for s in resolve_scorers(new_log) if scorer_name(s) == "encounter_outcome"]
    appended = score(again, [outcome], model_roles=grader, action="append", display="none")
    assert set(recorded(appended).values()) == {None}


def test_bedside_rescore_records_the_calls_of_the_log_it_writes(new_log, tmp_path):
    """With a grader every scorer runs again (the old judges' calls replaced); with the simulator checker alone
    only its scorer runs, appended beside the kept scores: each written sample records its events' calls."""
    from bedside.cli import main

    for args, out in (
        (["--grader", "bedside/scripted"], "judged"),
        (["--simulator-checker", "bedside/scripted"], "checked"),
    ):
        assert main(["rescore", new_log.location, *args, "--out", str(tmp_path / out)]) == 0
        [written] = (tmp_path / out).glob("*.eval")
        log = read_eval_log(str(written))
        assert recorded(log) == from_events(log)
        pd.testing.assert_frame_equal(by_case(written), by_case(without_record(log, tmp_path / f"{out}-old.eval")))
