"""A discharge note that cannot fit a bound model's context window is reported (estimated tokens)
when the task is built, before any model call; a note that fits is not."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from inspect_ai.model import get_model

from bedside.discharge.context_window import context_window, estimate_tokens, oversized_notes
from bedside.discharge.samples import DEMO_CASES
from tests import forked
from tests.conftest import REPO

INSPECT = str(Path(sys.executable).parent / "inspect")


def test_windows_of_known_and_bedside_models():
    assert context_window(get_model("bedside/scripted", memoize=False)) is None  # no window: not checked
    assert context_window(get_model("bedside/scripted", context_window=3000, memoize=False)) == 3000
    from inspect_ai.model import get_model_info

    assert get_model_info("openai/gpt-4o").context_length == 128000  # Inspect's model database
    assert estimate_tokens("x" * 4001) == 1001


def test_only_notes_above_a_window_are_reported():
    small = get_model("bedside/scripted", context_window=3000, memoize=False)
    lines = oversized_notes(
        [("big", "word " * 4000), ("fits", "word " * 100)],
        {"educator": small, "patient": get_model("bedside/scripted", memoize=False)},
    )
    assert lines == [
        "case big: the discharge note is about 5,000 tokens (estimated at 4 characters per token), "
        "more than the context window of the educator (bedside/scripted: 3,000 tokens); its session "
        "will end as a system failure"
    ]


@pytest.mark.eval
def test_cli_warns_with_the_estimate_before_any_model_call(tmp_path):
    record = json.loads(DEMO_CASES.read_text().splitlines()[0])
    record["discharge_note"] = "Take your tablets. " * 300_000  # ~5.7 MB
    data = tmp_path / "big.jsonl"
    data.write_text(json.dumps(record) + "\n")
    env = {**os.environ, "COLUMNS": "300"}
    command = [
        INSPECT,
        "eval",
        "tasks/discharge.py",
        "--model",
        "bedside/scripted",
        "-M",
        "context_window=100000",
        "--model-role",
        "patient=bedside/scripted",
        "--model-role",
        "monitor=bedside/scripted",
        "--model-role",
        "grader=bedside/scripted",
        "-T",
        f"data={data}",
        "--log-dir",
        str(tmp_path / "logs"),
        "--display",
        "plain",
        "--max-samples",
        "1",
    ]
    proc = forked.run(command, cwd=REPO, env=env, timeout=600)
    output = proc.stdout + proc.stderr
    warning = f"case {record['case_id']}: the discharge note is about 1,425,000 tokens"
    assert warning in " ".join(output.split()), output[-3000:]
    assert "educator (bedside/scripted: 100,000 tokens)" in " ".join(output.split())
    # warned when the task was built: before the eval's first line of progress
    assert " ".join(output.split()).index(warning) < " ".join(output.split()).index("Running")
