"""Crash and resume: ``inspect eval`` is killed with SIGKILL mid-run, ``inspect
eval-retry LOG`` completes it, re-using the samples that had finished. The loopback server runs in
its own process and logs every request to a file, so its counts survive the crash and prove that
the retry called the models for the unfinished samples only.

Everything a user types: two ``inspect`` command lines against ``python -m tests.loopback``. The
task is DischargeBench with its judge scorers that need no embedding model, written to a task file
in the test's folder (``eval-retry`` reloads a task from its file). ``XDG_DATA_HOME`` points
Inspect's sample buffer (what ``eval-retry`` recovers a crashed log from) into the test's folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from tests.reliability.helpers import LOOPBACK, ServerProcess, event_request_key, model_events, replicate_discharge

pytestmark = pytest.mark.eval

INSPECT = str(Path(sys.executable).parent / "inspect")
N = 6  # the kill comes after the third: three or more samples are left to the retry

TASK_FILE = """
from inspect_ai import task, task_with

from bedside.scorers.discharge.conversation_quality import conversation_quality
from bedside.scorers.discharge.encounter_outcome import encounter_outcome
from bedside.scorers.discharge.topic_checklist import topic_checklist
from bedside.tasks.discharge import discharge


@task
def discharge_lean(data: str, min_turns: int = 4, max_turns: int = 8):
    base = discharge(data=data, min_turns=min_turns, max_turns=max_turns, cache_references=False)
    return task_with(base, scorer=[encounter_outcome(), conversation_quality(), topic_checklist()])
"""


def samples_in(logs: Path) -> int:
    """Finished samples in the log file being written (Inspect replaces it whole at each flush)."""
    try:
        [log_file] = logs.glob("*.eval")
        with zipfile.ZipFile(log_file) as log:
            return sum(1 for name in log.namelist() if name.startswith("samples/"))
    except (ValueError, OSError, zipfile.BadZipFile):  # not written yet
        return 0


def test_killed_eval_is_completed_by_eval_retry(tmp_path):
    data = replicate_discharge(N, tmp_path / "cases.jsonl", prefix="crash")
    (tmp_path / "lean_task.py").write_text(TASK_FILE)
    logs = tmp_path / "logs"
    with ServerProcess(request_log=tmp_path / "requests.jsonl") as server:
        env = {
            **os.environ,
            **server.env,
            "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
            "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        }
        roles = [
            arg for role in ("patient", "monitor", "grader") for arg in ("--model-role", f"{role}={LOOPBACK}/{role}")
        ]
        command = [
            INSPECT,
            "eval",
            "lean_task.py",
            "-T",
            f"data={data}",
            "--model",
            f"{LOOPBACK}/educator",
            *roles,
            "--max-samples",
            "2",
            "--log-buffer",
            "1",
            "--log-dir",
            str(logs),
            "--display",
            "none",
        ]
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and proc.poll() is None:
                # three samples' last judge call answered, and the log holds a finished sample: kill
                # now (waiting for the log, not a fixed pause, holds on a slow or busy machine too)
                judged = sum(1 for x in server.log_lines() if x["protocol"] == "discharge.judge_checklist")
                if judged >= 3 and samples_in(logs):
                    break
                time.sleep(0.1)
            assert proc.poll() is None, f"the eval ended before it could be killed: {proc.stdout.read()[-2000:]!r}"
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
            proc.stdout.close()
        before = len(server.log_lines())

        [crashed_file] = logs.glob("*.eval")
        crashed = read_eval_log(str(crashed_file))
        assert crashed.status == "started"  # killed: no final status was written
        finished = {s.id: s.uuid for s in crashed.samples or []}
        assert 1 <= len(finished) < N, finished

        retry = subprocess.run(
            [INSPECT, "eval-retry", str(crashed_file), "--log-dir", str(logs), "--display", "none"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert retry.returncode == 0, retry.stdout[-2000:] + retry.stderr[-3000:]
        lines = server.log_lines()

    [final_file] = [f for f in logs.glob("*.eval") if f != crashed_file]
    final = read_eval_log(str(final_file), resolve_attachments=True)
    assert final.status == "success" and final.results is not None and final.results.completed_samples == N
    samples = final.samples or []
    assert sorted(s.id for s in samples) == [f"crash-{i:03d}" for i in range(1, N + 1)]
    assert all(s.error is None and s.scores and s.scores["encounter_outcome"].answer for s in samples)
    # the samples of the crashed log were re-used as they were (same uuid)
    assert {s.id: s.uuid for s in samples if s.id in finished} == finished
    # Inspect also re-uses a sample that finished in the crashed run after the log's last flush
    # (from its realtime sample buffer): a sample is re-used when all its calls were answered in
    # the first run, re-run when all were made by the retry; never a mix
    after = lines[before:]
    first = Counter(x["key"] for x in lines[:before])
    retried = Counter(x["key"] for x in after)
    keys = {s.id: [event_request_key(e) for e in model_events(s)] for s in samples}
    reused = {sid for sid, ks in keys.items() if all(first[k] and not retried[k] for k in ks)}
    rerun = [s for s in samples if s.id not in reused]
    assert set(finished) <= reused and len(rerun) >= 1, (sorted(finished), sorted(reused))
    # the retry's requests are exactly the model calls of the re-run samples (no fault, no cache:
    # one request per call), each answered, and none of a re-used sample
    assert all(x["outcome"] == "answered" for x in lines)
    assert retried == Counter(k for s in rerun for k in keys[s.id])
    assert len(after) == sum(len(model_events(s)) for s in rerun)
