"""A retried run is one run in every reader: a DischargeBench run killed mid-way (SIGKILL) and finished with a
real ``inspect eval-retry`` — of the scripted model, and of a person (``bedside/human``, played by a thread
posting to the page's API, as in tests/human/test_baseline.py) — reads back with each (sample id, epoch) once,
from the attempt that finished it, and the killed log named in one line; the killed log alone (never retried)
is reported as unfinished in one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from inspect_ai import eval
from inspect_ai.log import list_eval_logs, read_eval_log, read_eval_log_sample_summaries

from bedside.reporting.load import load, read_run, read_runs, scores_frame
from tests.conftest import bedside_command, scripted
from tests.golden.make_golden import KERNEL_FLOATS
from tests.human.test_baseline import Person
from tests.human.test_browser import free_port

pytestmark = pytest.mark.eval

INSPECT = str(Path(sys.executable).with_name("inspect"))
ROLES = ("patient", "monitor", "grader")
CASES = 3


def started(log_dir: Path, *model: str) -> subprocess.Popen[str]:
    """``inspect eval bedside/discharge`` of CASES short sessions, one at a time, in a process group of its own."""
    roles = [arg for role in ROLES for arg in ("--model-role", f"{role}=bedside/scripted")]
    command = [INSPECT, "eval", "bedside/discharge", *model, *roles, "-T", "min_turns=4"]
    command += ["--limit", str(CASES), "--max-samples", "1", "--log-dir", str(log_dir), "--display", "none"]
    return subprocess.Popen(command, start_new_session=True, text=True, stderr=subprocess.PIPE)


def killed_after_one_sample(proc: subprocess.Popen[str], log_dir: Path) -> Path:
    """The log of ``proc``, killed (SIGKILL, its whole group) once it has finished a sample and before the last."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        logs = [Path(info.name.removeprefix("file://")) for info in list_eval_logs(str(log_dir))]
        if logs:
            try:
                done = [s for s in read_eval_log_sample_summaries(str(logs[0])) if s.completed]
            except Exception:  # the file between two writes
                done = []
            if done:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return logs[0]
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError("the run finished no sample in 600 s")


def retried(killed: Path, log_dir: Path) -> None:
    done = subprocess.run(
        [INSPECT, "eval-retry", str(killed), "--log-dir", str(log_dir), "--display", "none"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def one_line_about(text: str, path: Path) -> list[str]:
    return [line for line in text.splitlines() if str(path) in line]


def test_a_scripted_run_killed_and_retried_is_one_run_with_the_numbers_of_an_uninterrupted_run(tmp_path):
    log_dir = tmp_path / "logs"
    killed = killed_after_one_sample(started(log_dir, "--model", "bedside/scripted"), log_dir)
    header = read_eval_log(str(killed), header_only=True)
    assert header.status == "started"
    unfinished = tmp_path / "unfinished"  # the killed log alone, as a user would find it before retrying
    unfinished.mkdir()
    shutil.copy(killed, unfinished / killed.name)
    retried(killed, log_dir)
    logs = sorted(Path(info.name.removeprefix("file://")) for info in list_eval_logs(str(log_dir)))
    assert len(logs) == 2 and killed in logs  # the interrupted log stays beside its retry

    [run] = read_runs([str(log_dir)], say=False)
    assert run.status == "success" and run.superseded == [str(killed)]
    keys = [(str(s.id), s.epoch) for s in run.samples]
    assert len(keys) == len(set(keys)) == CASES

    [clean] = eval(
        "bedside/discharge",
        model=scripted(),
        model_roles={role: scripted() for role in ROLES},
        task_args={"min_turns": 4},
        limit=CASES,
        log_dir=str(tmp_path / "clean"),
        display="none",
    )
    keys = ["id", "epoch", "scorer", "key"]
    got = scores_frame(load([str(log_dir)]))[[*keys, "value"]]
    want = scores_frame(load([str(clean.location)]))[[*keys, "value"]]
    assert not got.empty and not got.duplicated(keys).any()
    both = got.merge(want, on=keys, how="outer", indicator=True)
    assert (both["_merge"] == "both").all(), both[both["_merge"] != "both"]
    # every score equal to the uninterrupted run's (a kernel float within its golden tolerance)
    tolerance = [KERNEL_FLOATS.get((scorer, key), 0.0) for scorer, key in zip(both["scorer"], both["key"])]
    close = (both["value_x"] - both["value_y"]).abs() <= tolerance
    same = close | (both["value_x"].isna() & both["value_y"].isna())
    assert same.all(), both[~same]

    # every reader: one run, the killed log named once (stderr), no "holds 2 runs"
    report = bedside_command("report", str(log_dir), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stdout
    [line] = one_line_about(report.stderr, killed)
    assert "retry" in line and str(logs[logs.index(killed) - 1]) in line
    assert "unfinished" not in report.stderr
    for command in (("strata", str(log_dir)), ("audit", str(log_dir))):
        done = bedside_command(*command)
        assert done.returncode == 0 and len(one_line_about(done.stderr, killed)) == 1, (command, done)
    compared = bedside_command("compare", str(clean.location), str(log_dir))
    assert compared.returncode == 0, compared.stdout
    assert "| 0.0000" in compared.stdout or "0.000" in compared.stdout

    # the killed log alone: reported as unfinished, in one line
    alone = bedside_command("strata", str(unfinished))
    assert alone.returncode == 0
    [warning] = one_line_about(alone.stderr, unfinished / killed.name)
    assert "unfinished" in warning and "eval-retry" in warning


def test_a_persons_run_killed_and_retried_is_one_run(tmp_path, monkeypatch):
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "journals"))  # the person's journal, kept by the retry
    port = free_port()
    person = Person(f"http://127.0.0.1:{port}/")
    person.start()
    log_dir = tmp_path / "logs"
    try:
        proc = started(log_dir, "--model", "bedside/human", "-M", f"port={port}")
        killed = killed_after_one_sample(proc, log_dir)
        retried(killed, log_dir)
    finally:
        person.stop.set()
    [run] = read_runs([str(log_dir)], say=False)
    assert run.status == "success" and run.superseded == [str(killed)]
    keys = [(str(s.id), s.epoch) for s in run.samples]
    assert len(keys) == len(set(keys)) == CASES
    [item] = load([str(log_dir)])
    assert item.label == "human"
    frame = scores_frame([item])
    assert not frame.duplicated(["id", "epoch", "scorer", "key"]).any()
    assert set(frame["id"]) == {k for k, _ in keys}
    assert read_run(str(log_dir)).eval.eval_id != read_eval_log(str(killed), header_only=True).eval.eval_id
