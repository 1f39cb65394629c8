"""Unbound roles are recorded; the task runs by path and through the entry point."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from bedside.tasks.discharge import discharge
from tests import forked
from tests.conftest import REPO, run, store

pytestmark = pytest.mark.eval

INSPECT = str(Path(sys.executable).parent / "inspect")


def test_unbound_roles_fall_back_and_are_recorded(tmp_path):
    log = run(discharge(), roles={}, log_dir=tmp_path, limit=1)
    sample = log.samples[0]
    assert store(sample)["role_fallbacks"] == ["patient", "monitor"]
    assert sample.scores["encounter_outcome"].value["role_fallbacks"] == 3  # grader included
    assert sample.scores["encounter_outcome"].metadata["role_fallbacks"] == ["patient", "monitor", "grader"]
    infos = [e for e in sample.events if e.event == "info" and e.source == "roles"]
    assert {e.data["role_fallback"] for e in infos} == {"patient", "monitor", "grader"}
    assert sample.scores["topic_checklist"].metadata["grader_fallback"] is True
    # the scripted model played every role, so the session still completes
    assert store(sample)["end_reason"] == "clean_complete"


def test_unbound_role_warning_is_logged(tmp_path, caplog):
    import bedside.roles

    bedside.roles._warned.clear()
    with caplog.at_level(logging.WARNING, logger="bedside.roles"):
        run(discharge(), roles={}, log_dir=tmp_path, limit=1)
    assert any("model role 'patient' is not bound" in r.message for r in caplog.records)


def cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "INSPECT_LOG_DIR": str(tmp_path)}
    return forked.run([INSPECT, *args], cwd=REPO, env=env, timeout=300)


def test_cli_by_path_and_by_entry_point(tmp_path):
    # one `inspect eval` with both targets: the task file and the registered name (two logs)
    roles = ["--model-role", "patient=bedside/scripted", "--model-role", "monitor=bedside/scripted"]
    out_dir = tmp_path / "logs"
    proc = cli(
        "eval",
        "tasks/discharge.py",
        "bedside/discharge",
        "--model",
        "bedside/scripted",
        *roles,
        "--limit",
        "1",
        "-T",
        "personality=minimiser",
        "--display",
        "none",
        "--log-dir",
        str(out_dir),
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    logs = [read_eval_log(str(f)) for f in out_dir.glob("*.eval")]
    by_target = {log.eval.task_file or log.eval.task: log for log in logs}
    assert len(logs) == 2 and set(by_target) == {"tasks/discharge.py", "bedside/discharge"}
    for log in logs:
        assert log.status == "success" and log.eval.task_args["personality"] == "minimiser"
        assert set(log.eval.model_roles) == {"patient", "monitor"}
        assert log.samples[0].metadata["personality"] == "minimiser"


def test_the_cli_prints_the_unknown_role_in_one_line_without_traceback(tmp_path):
    from tests.task_parameters import inspect_eval

    proc = inspect_eval("tasks/discharge.py", "--model-role", "judge=bedside/scripted", log_dir=tmp_path / "logs")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in output, output[-2000:]
    [line] = [line for line in output.splitlines() if line.strip()]
    assert line.startswith("Unknown model role for task discharge") and "--model-role grader=bedside/scripted" in line
