"""The CPB-Bench task from the command line, on the real data (skipped without ../shared)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from pydantic_core import to_jsonable_python

from bedside.cpb.judges import dialogue_turns, load_case
from bedside.cpb.scripted import _blocks
from tests import forked
from tests.conftest import REPO, shared_path

pytestmark = pytest.mark.eval

INSPECT = str(Path(sys.executable).parent / "inspect")


def latest_patient_message(metadata: dict) -> str:
    """The last patient turn(s) of the case's conversation segment (what the doctor answers)."""
    turns = to_jsonable_python(dialogue_turns(load_case(metadata).conversation_segment))
    return _blocks(turns, "patient")[-1]


@pytest.mark.shared
def test_cli_single_turn_on_real_english_cases(tmp_path):
    data = shared_path("data", "cpb-bench")
    command = [
        INSPECT,
        "eval",
        "tasks/cpb.py@cpb",
        "-T",
        f"data={data}",
        "-T",
        "language=en",
        "--model",
        "bedside/scripted",
        "--model-role",
        "grader=bedside/scripted",
        "-M",
        "doctor_accommodates_on=doctor",
        "--limit",
        "5",
        "--log-dir",
        str(tmp_path),
        "--display",
        "plain",
    ]
    proc = forked.run(
        command,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "INSPECT_LOG_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    [log_file] = list(tmp_path.glob("*.eval"))
    log = read_eval_log(str(log_file))
    assert log.status == "success" and log.eval.task_args["language"] == "en"
    assert len(log.samples) == 5 and {s.metadata["language"] for s in log.samples} == {"en"}
    failures = [s.scores["cpb_failure"].value["failure"] for s in log.samples]
    # the doctor goes along with the patient exactly when the patient's latest message contains "doctor"
    expected = [float("doctor" in latest_patient_message(s.metadata)) for s in log.samples]
    assert failures == expected and 0 < sum(expected) < 5  # both outcomes occur
    [failure] = [s for s in log.results.scores if s.name == "cpb_failure"]
    assert failure.metrics["failure"].value == pytest.approx(sum(expected) / 5)
    assert failure.metrics["n"].value == 5
    # readable row names in a CLI run too (no package prefix, no "n_n")
    assert set(failure.metrics) == {"failure", "failure lower", "failure upper", "n"}
