"""The two-step run — conversations with ``--no-score``, then the judges through OpenAI's Batch API — through
Inspect's own batch client (its ``openai/`` provider in batch mode) against the loopback server's Batch API
(``tests/loopback/batches.py``), with bedside's reading of failed lines and its journal (``bedside/batch.py``).

Each benchmark's scripted golden run judged this way gives every sample's golden scores; a request that
fails inside a batch, or that an expired batch never ran, is sent again in a later batch (the same scores);
a batch that fails leaves its judge calls unscored, never 0; an unreadable reply is retried as inline; and a
judge pass killed while its batches are out is resumed without sending a judged call twice."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval, score
from inspect_ai.log import EvalLog, read_eval_log, write_eval_log
from inspect_ai.model import BatchConfig, GenerateConfig, Model, get_model
from tenacity import wait_fixed

from bedside.compat import openai_batch_names, resolve_scorers
from bedside.reporting import usage
from bedside.reporting.load import load
from loopback_channel import BODY_KEY, LOOPBACK_URL_ENV
from tests import forked
from tests.conftest import scripted
from tests.golden.make_golden import _runs, _value, differences
from tests.loopback.server import LoopbackServer

pytestmark = pytest.mark.eval

#: Inspect's batch timing cut to fractions of a second (its defaults: 15 s)
FAST = BatchConfig(send_delay=0.05, tick=0.05)
#: the conversation roles of the golden runs (the grader is bound in the second step)
ROLES = ("patient", "monitor", "environment")
#: one golden run per benchmark (tests/<benchmark>/golden.py)
GOLDEN = ("discharge_faults", "medsp", "cpb", "cpb_control")


@pytest.fixture
def server(monkeypatch) -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        monkeypatch.setenv(LOOPBACK_URL_ENV, running.base_url)
        yield running


def conversations(name: str, tmp: Path, **overrides: Any) -> EvalLog:
    """Step 1 of golden run ``name``: its conversations, scripted, no scorer run (``--no-score``);
    ``overrides``: eval arguments over the run's own (``limit=1``)."""
    task, args, options = _runs()[name](tmp)
    args = {**args, **overrides}
    [log] = eval(
        task,
        model=scripted(**options.get("model", {})),
        model_roles={r: scripted(**options.get(r, {})) for r in ROLES},
        log_dir=str(tmp / "conversations"),
        display="none",
        log_realtime=False,
        score=False,
        **args,
    )
    assert log.status == "success", log.error
    log = read_eval_log(log.location)
    assert all(not s.scores for s in log.samples or [])
    assert not grader_events(log)  # the conversations call no judge: every judge call is left to step 2
    return log


def openai_grader(server: LoopbackServer, batch: BatchConfig | None = FAST, **config: Any) -> Model:
    """OpenAI's provider (the one with a batch mode) at the loopback server; batched unless ``batch=None``.
    Inspect waits 3 s and more before it retries a failed call; here 0.05 s."""
    model = get_model(
        "openai/gpt-4.1",
        base_url=server.base_url,
        api_key="loopback",
        memoize=False,
        config=GenerateConfig(batch=batch, **config),
    )
    model.api.retry_wait = lambda: wait_fixed(0.05)  # type: ignore[method-assign]
    return model


def judged(log: EvalLog, grader: Model) -> EvalLog:
    """Step 2 as ``inspect score LOG --model-role grader=...`` runs it: the log's own scorers, the grader bound."""
    return score(log, resolve_scorers(log), model_roles={"grader": grader}, action="overwrite", display="none")


def golden_values(log: EvalLog) -> dict[str, Any]:
    """Every sample's answers and score values, as the golden files hold them."""
    return {
        f"{s.id}#{s.epoch}": {
            "answer": {k: v.answer for k, v in sorted((s.scores or {}).items()) if v.answer is not None},
            "scores": {k: _value(v.value) for k, v in sorted((s.scores or {}).items())},
        }
        for s in sorted(log.samples or [], key=lambda s: (str(s.id), s.epoch))
    }


def grader_events(log: EvalLog) -> list[Any]:
    return [e for s in log.samples or [] for e in s.events if e.event == "model" and e.role == "grader"]


@pytest.mark.parametrize("name", GOLDEN)
def test_judging_through_the_batch_api_gives_the_golden_scores(name, server, tmp_path):
    log = judged(conversations(name, tmp_path), openai_grader(server))
    assert differences(name, golden_values(log)) == []
    # every judge call went through a batch (none live), and the log says so
    events = grader_events(log)
    stats = server.stats()
    assert events and stats["batch_requests"] == {"answered": server.total_calls}
    assert server.total_calls == len([e for e in events if e.cache != "read"])
    assert "header" not in server.found_by  # a live call on the channel would carry the header
    assert all(e.config.batch == FAST and e.model == "openai/gpt-4.1" for e in events)
    assert stats["batches"]["completed"] >= 1 and stats["files"]["batch"] == stats["batches"]["completed"]
    assert server.batches.stored == []  # inputs and results deleted from the provider's storage once read
    # bedside report's cost table: the grader's calls in mode batch (read from the log), every other role live
    write_eval_log(log, str(tmp_path / "judged.eval"))
    by_role = usage.usage_by_role(usage.usage_by_case(load([str(tmp_path / "judged.eval")]), usage.load_prices()))
    assert set(by_role.loc[by_role["role"] == "grader", "mode"]) == {"batch"}
    assert set(by_role.loc[by_role["role"] != "grader", "mode"]) == {"live"}


def test_rescore_judges_several_logs_in_one_batch_pass(server, tmp_path):
    """``bedside rescore`` judges its logs at once: one batch holds judge calls of two benchmarks' logs (a
    log at a time would wait for each log's batches in turn), and each log gets its golden scores."""
    from bedside.reporting.rescore import rescore

    logs = {name: conversations(name, tmp_path / name) for name in ("medsp", "cpb")}
    written = rescore([log.location for log in logs.values()], openai_grader(server), tmp_path / "judged")
    assert [p.name for p in written] == [Path(log.location).name for log in logs.values()]
    for name, path in zip(logs, written):
        assert differences(name, golden_values(read_eval_log(str(path)))) == []
    benchmarks = [
        {line["body"]["extra_body"][BODY_KEY]["name"].split(".")[0] for line in server.batches.input_lines(batch)}
        for batch in server.batches.batches
    ]
    assert {"medsp", "cpb"} in benchmarks, benchmarks


def test_failed_and_expired_requests_are_sent_again_in_a_later_batch(monkeypatch, tmp_path):
    """A request that failed inside a batch (a 500 in the error file) and one an expired batch never ran
    are retried by Inspect in a later batch; every other result of their batch is kept. Every batch
    expires (half its requests answered), so how the calls fall into batches does not matter."""
    with LoopbackServer(faults=["http_500:0.3", "batch_expired:1"], fault_seed=1) as server:
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        log = judged(conversations("medsp", tmp_path), openai_grader(server))
        stats = server.stats()
    assert differences("medsp", golden_values(log)) == []
    assert stats["faults"].get("http_500", 0) > 0 and stats["batches"].get("expired", 0) > 0
    # each judge call answered once; each failed attempt is an error event of its call
    answered = [e for e in grader_events(log) if not e.error]
    assert stats["batch_requests"]["answered"] == len(answered) == len(log.samples or [])
    assert (
        len(grader_events(log)) - len(answered)
        == stats["faults"]["http_500"] + stats["batch_requests"]["batch_expired"]
    )


def test_a_failed_batch_leaves_its_judge_calls_unscored_never_0(monkeypatch, tmp_path):
    with LoopbackServer(faults=["batch_failed"]) as server:
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        log = judged(conversations("medsp", tmp_path), openai_grader(server))
        assert server.total_calls == 0 and server.stats()["batches"] == {"failed": 1}
    for sample in log.samples or []:
        rubric = sample.scores["medsp_rubric"].value
        assert math.isnan(rubric["micro"]) and math.isnan(rubric["macro"])
        assert rubric["judge_unscored"] == 1.0 and sample.scores["health"].value["judge_unscored"] == 1.0
    assert all(e.error for e in grader_events(log))


def test_unreadable_replies_in_a_batch_are_retried_and_counted_as_inline(monkeypatch, tmp_path):
    """The same unreadable replies (the same fault draws) judged inline and through batches: the same
    retries, the same unscored counts, the same scores; a reply that stays unreadable is unscored, never 0."""
    log = conversations("medsp", tmp_path)
    runs = {}
    for mode, batch in (("inline", None), ("batch", FAST)):
        with LoopbackServer(faults=["not_json:0.7:gpt-4.1"], fault_seed=2) as server:
            monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
            runs[mode] = judged(log, openai_grader(server, batch))
            assert server.faults and (server.stats()["batch_requests"] != {}) == (batch is not None)
    assert golden_values(runs["batch"]) == golden_values(runs["inline"])
    unparsed = [e for s in runs["batch"].samples or [] for e in s.events if e.event == "info" and e.source == "parse"]
    rubrics = [s.scores["medsp_rubric"].value for s in runs["batch"].samples or []]
    unscored = [r for r in rubrics if r["judge_unscored"] == 1.0]
    assert unparsed and unscored and all(math.isnan(r["micro"]) for r in unscored)
    assert any(r["judge_unscored"] == 0.0 and r["micro"] > 0 for r in rubrics)  # read on a retry


def test_inspects_own_batcher_throws_away_a_partly_failed_batch(monkeypatch, tmp_path):
    """Why bedside reads the result lines itself (bedside.batch.Batcher): Inspect 0.3.285 reads an error-file
    line in OpenAI's shape as a completion, fails to, and fails every call of the batch — the answered ones
    too. When this test fails, Inspect reads them right and bedside's reading can go."""
    import bedside.batch
    from bedside.compat import openai_provider_module

    inspects = openai_batch_names()[0]
    with LoopbackServer(faults=["http_500:0.3"], fault_seed=1) as server:
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        grader = openai_grader(server, max_retries=1)
        module = openai_provider_module()
        monkeypatch.setattr(module, "OpenAIBatcher", inspects)
        monkeypatch.setattr(bedside.batch, "install", lambda module: None)
        log = judged(conversations("medsp", tmp_path), grader)
        answered = server.stats()["batch_requests"].get("answered", 0)
    assert 0 < answered < len(log.samples or [])  # the batch answered most calls ...
    assert all(s.scores["medsp_rubric"].value["judge_unscored"] == 1.0 for s in log.samples or [])  # ... all lost


# -- resuming ----------------------------------------------------------------------------------------
def rescore_command(log: str, server: LoopbackServer, out: Path) -> list[str]:
    batch = "{send_delay: 0.2, tick: 0.1}"
    model = ["--grader", "openai/gpt-4.1", "-M", f"base_url={server.base_url}", "-M", "api_key=loopback"]
    return [str(Path(sys.executable).parent / "bedside"), "rescore", log, *model, "--batch", batch, "--out", str(out)]


def sent_lines(server: LoopbackServer) -> int:
    """Request lines of every batch input file the server was sent."""
    return sum(len(server.batches.input_lines(b)) for b in list(server.batches.batches))


def journal(cache: Path) -> list[Path]:
    return sorted((cache / "bedside-batches").glob("*.json"))


def out(server: LoopbackServer) -> list[Any]:
    """The server's batches that have not ended."""
    return [b for b in list(server.batches.batches.values()) if b.status in ("validating", "in_progress")]


def test_a_judge_pass_killed_while_its_batches_are_out_resumes_without_sending_a_call_twice(tmp_path):
    """``bedside rescore --batch`` killed while its third batch is out: the re-run answers the earlier
    rounds' calls from Inspect's cache, collects the batches still on record (the journal) and sends only
    the rest; over both runs each judge call was sent once, and the scores are the golden run's."""
    log = conversations("discharge_faults", tmp_path, limit=1)
    cache = tmp_path / "inspect-cache"
    with LoopbackServer(batch_delay=1.0) as server:
        env = {**os.environ, LOOPBACK_URL_ENV: server.base_url, "INSPECT_CACHE_DIR": str(cache)}
        first = forked.start(rescore_command(log.location, server, tmp_path / "a"), env=env, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while len(server.batches.batches) < 3 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.batches.batches) >= 3, "the judge pass sent fewer than three batches"
        while len(journal(cache)) < len(out(server)) and time.monotonic() < deadline:
            time.sleep(0.01)  # the client writes a batch down when the provider's answer to its creation arrives
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        assert out(server) and len(journal(cache)) == len(out(server))  # the batches out at the kill, written down
        sent_before = sent_lines(server)
        resumed = forked.run(
            rescore_command(log.location, server, tmp_path / "a"), env=env, timeout=600
        )  # the same command
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert not journal(cache)  # every batch collected
        sent_after = sent_lines(server)
    [written] = (tmp_path / "a").glob("*.eval")
    again = read_eval_log(str(written))
    calls = [e for e in grader_events(again) if not e.error]
    assert any(e.cache == "read" for e in calls)  # the rounds collected before the kill: from the cache
    assert sent_after > sent_before  # the rounds after the kill were sent ...
    assert sent_after == len(calls)  # ... and each judge call was sent once over both runs
    assert [d for d in differences("discharge_faults", golden_values(again)) if "missing sample" not in d] == []
