"""``bedside rescore`` of a folder of logs, as a user runs it: one process judges every log at once
(:func:`bedside.reporting.rescore.judged_together`) and writes each log as its judging ends, while the other
logs' judges are still at work in the same event loop."""

from __future__ import annotations

import shutil
import sys
import traceback
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from tests import forked
from tests.test_batch_judges import conversations

pytestmark = pytest.mark.eval

#: logs judged together: enough that one log's end finds the others' judges queued in the event loop
LOGS = 6


def test_a_folder_of_logs_is_judged_together_and_every_log_written(tmp_path):
    """Writing a log from inside the running event loop with Inspect's synchronous ``write_eval_log`` made
    Inspect re-enter the loop (nest_asyncio, applied then for the first time in the process) in the middle of
    one of its steps; the loop lost the step's other ready callbacks and the command died with ``IndexError:
    pop from an empty deque`` (every time with these six logs). A log is written with the async writer."""
    log = conversations("medsp", tmp_path)
    folder = tmp_path / "conversations-copies"
    folder.mkdir()
    for i in range(LOGS):
        shutil.copy(log.location, folder / f"run-{i}.eval")
    out = tmp_path / "judged"
    bedside = str(Path(sys.executable).parent / "bedside")
    done = forked.run([bedside, "rescore", str(folder), "--grader", "bedside/scripted", "--out", str(out)], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = sorted(out.glob("*.eval"))
    assert [p.name for p in written] == [f"run-{i}.eval" for i in range(LOGS)]
    for path in written:
        judged = read_eval_log(str(path))
        assert judged.status == "success" and all(s.scores for s in judged.samples or [])
        assert judged.eval.metadata["bedside_rescore"]["grader"] == "bedside/scripted"


def test_a_log_whose_scorer_took_a_parameter_since_renamed_is_refused_in_one_line(tmp_path):
    """A log records its scorers' arguments by name; one its scorer no longer takes (renamed, no alias before
    1.0) stops ``bedside rescore`` before any call, naming the log, the scorer and what it takes, and ``inspect
    score`` with the same line, no traceback."""
    from inspect_ai.log import write_eval_log

    log = conversations("medsp", tmp_path, limit=1)
    [renamed] = [s for s in log.eval.scorers or [] if s.options][:1]
    old, value = next(iter(renamed.options.items()))
    takes = list(renamed.options)
    renamed.options = {f"{old}_before" if k == old else k: v for k, v in renamed.options.items()}
    stale = tmp_path / "stale.eval"
    write_eval_log(log, str(stale))
    bedside = str(Path(sys.executable).parent / "bedside")
    out = tmp_path / "judged"
    done = forked.run([bedside, "rescore", str(stale), "--grader", "bedside/scripted", "--out", str(out)], timeout=600)
    assert done.returncode == 2 and not list(out.glob("*.eval"))
    [line] = done.stdout.strip().splitlines()
    assert line.startswith(f"bedside rescore: {stale}: this log's scorer {renamed.name} was run with {old}_before,")
    assert f"(it takes {', '.join(takes)}" in line and line.endswith(
        "re-score the log with the bedside version that wrote it"
    )
    inspect = str(Path(sys.executable).parent / "inspect")
    scored = forked.run(
        [inspect, "score", str(stale), "--model-role", "grader=bedside/scripted", "--overwrite"], timeout=600
    )
    assert scored.returncode != 0 and "Traceback" not in scored.stdout + scored.stderr
    assert f"scorer {renamed.name} was run with {old}_before" in " ".join((scored.stdout + scored.stderr).split())


def test_a_log_is_judged_a_window_of_samples_at_a_time_into_what_inspect_score_writes(tmp_path, monkeypatch):
    """``bedside rescore`` reads a log's samples one at a time as they are judged and writes each to the new log
    as soon as it is judged: never the log whole (reading a log whole fails here), at most ``max_samples`` samples
    read and not yet written at once; and the log it writes holds the scores, metrics and reductions that
    Inspect's ``score`` gives for the log held whole."""
    from inspect_ai import score

    from bedside.compat import resolve_scorers
    from bedside.log_writer import LogWriter
    from bedside.reporting.rescore import rescore
    from bedside.reporting.run import Run
    from tests.conftest import scripted, whole_log_reads_fail

    log = conversations("medsp", tmp_path)
    assert len(log.samples or []) > 3
    expected = score(log, resolve_scorers(log), model_roles={"grader": scripted()}, action="overwrite", display="none")

    whole_log_reads_fail(monkeypatch)
    held, most = 0, 0
    read, write = Run.sample_async, LogWriter.sample

    async def counted_read(self, id, epoch):  # noqa: ANN001, ANN202
        nonlocal held, most
        held += 1
        most = max(most, held)
        return await read(self, id, epoch)

    async def counted_write(self, sample):  # noqa: ANN001, ANN202
        nonlocal held
        held -= 1
        await write(self, sample)

    monkeypatch.setattr(Run, "sample_async", counted_read)
    monkeypatch.setattr(LogWriter, "sample", counted_write)
    [written] = rescore([log.location], scripted(), tmp_path / "judged", max_samples=2)
    monkeypatch.undo()
    assert 1 <= most <= 2 and held == 0

    judged = read_eval_log(str(written))
    assert [(s.id, s.epoch) for s in judged.samples or []] == [(s.id, s.epoch) for s in expected.samples or []]
    assert judged.results == expected.results and judged.eval.scorers == expected.eval.scorers

    def values(reductions):  # noqa: ANN001, ANN202
        return [(r.scorer, r.reducer, [(s.sample_id, s.value) for s in r.samples]) for r in reductions or []]

    assert values(judged.reductions) == values(expected.reductions)
    for got, want in zip(judged.samples or [], expected.samples or []):
        assert {k: (s.value, s.explanation) for k, s in (got.scores or {}).items()} == {
            k: (s.value, s.explanation) for k, s in (want.scores or {}).items()
        }
    assert not list((tmp_path / "judged").glob("*.partial"))


def test_a_log_whose_judging_fails_leaves_nothing_at_its_target(tmp_path, monkeypatch):
    """The log is written under a temporary name and renamed once finished: a failure part way through (here the
    third sample unreadable) leaves neither the log nor its partial file in ``--out``."""
    from bedside.reporting.rescore import rescore
    from bedside.reporting.run import Run
    from tests.conftest import scripted

    log = conversations("medsp", tmp_path)
    third = (log.samples or [])[2]
    read = Run.sample_async

    async def unreadable_third(self, id, epoch):  # noqa: ANN001, ANN202
        if (id, epoch) == (third.id, third.epoch):
            raise OSError(f"sample {id} unreadable")
        return await read(self, id, epoch)

    monkeypatch.setattr(Run, "sample_async", unreadable_third)
    with pytest.raises(BaseException) as failed:  # noqa: PT011 (Inspect's task groups wrap it)
        rescore([log.location], scripted(), tmp_path / "judged", max_samples=1)
    assert f"sample {third.id} unreadable" in "".join(traceback.format_exception(failed.value))
    assert list((tmp_path / "judged").iterdir()) == []


def test_a_json_log_is_rejudged_into_a_json_log_with_the_scores_of_its_eval_copy(tmp_path):
    """A ``.json`` log (no index: read whole) is re-judged into a ``.json`` log of its own name, with the scores,
    metrics and reductions its ``.eval`` copy gets."""
    from inspect_ai.log import write_eval_log

    from bedside.reporting.rescore import rescore
    from tests.conftest import scripted

    log = conversations("medsp", tmp_path, limit=3)
    write_eval_log(log, str(tmp_path / "run.json"))
    [as_json] = rescore([str(tmp_path / "run.json")], scripted(), tmp_path / "json", max_samples=2)
    [as_eval] = rescore([log.location], scripted(), tmp_path / "eval", max_samples=2)
    assert as_json == tmp_path / "json" / "run.json" and as_json.read_text().startswith("{")
    a, b = read_eval_log(str(as_json)), read_eval_log(str(as_eval))
    assert a.results == b.results and [s.scores for s in a.samples or []] == [s.scores for s in b.samples or []]
