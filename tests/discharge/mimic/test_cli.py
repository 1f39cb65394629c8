"""``bedside build-cases`` end to end on the synthetic fixture: the command in this process
(:func:`tests.conftest.bedside_command`), and once in a subprocess (``python -m bedside``: a bad
folder gives exit status 2 and one message, no traceback)."""

from __future__ import annotations

import json
import sys

import pytest

from bedside.discharge.records import load_cases
from tests import forked
from tests.conftest import REPO, bedside_command
from tests.discharge.mimic.fixture import INVALID_MARK

pytestmark = pytest.mark.eval


def build_cases(fx, out, *extra):
    return bedside_command("build-cases", "--mimic", str(fx.mimic), "--note", str(fx.note), "--out", str(out), *extra)


@pytest.mark.eval  # the extraction is an Inspect eval, started inside the command
def test_build_cases_with_the_scripted_model(fx, tmp_path):
    out = tmp_path / "built" / "cases.jsonl"
    done = build_cases(
        fx,
        out,
        "--per-chapter",
        "1",
        "--seed",
        "3",
        "--model",
        "bedside/scripted",
        "-M",
        f"mimic_invalid_on={INVALID_MARK}",
        "--display",
        "none",
        "--log-dir",
        str(tmp_path / "logs"),
    )
    assert done.returncode == 0, done.stderr
    cases = load_cases(out)
    assert len(cases) == 23  # 24 chapters, one patient each; the marked note is invalid
    assert (
        "Selection (paper A.1):" in done.stdout
        and "Demographics (n=24)" in done.stdout
        and "Demographics (n=23)" in done.stdout
    )
    assert "INVALID records (1)" in done.stdout and "cases.invalid.csv" in done.stdout and "peak memory" in done.stdout
    for name in (
        "cases.cohort.jsonl",
        "cases.cohort_summary.json",
        "cases.cohort_summary.csv",
        "cases.audit.csv",
        "cases.invalid.csv",
        "cases.summary.json",
        "cases.summary.csv",
    ):
        assert (out.parent / name).is_file(), name
    summary = json.loads((out.parent / "cases.cohort_summary.json").read_text())
    assert summary["seed"] == 3 and summary["per_chapter"] == 1 and summary["funnel"]["sampled_patients"] == 24
    assert list((tmp_path / "logs").glob("*.eval"))


def test_non_local_model_refused_before_reading_mimic(fx, tmp_path, monkeypatch):
    out = tmp_path / "run" / "cases.jsonl"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    done = build_cases(fx, out, "--model", "openai/gpt-5.5")
    assert done.returncode == 3
    assert "Refusing to send MIMIC-IV-Note text to openai/gpt-5.5" in done.stderr and "--zero-retention" in done.stderr
    assert "Traceback" not in done.stderr and "Selection" not in done.stdout
    assert not out.parent.exists()  # refused before the MIMIC files were read: nothing written
    monkeypatch.setenv("LAB_API_KEY", "x")
    accepted = build_cases(
        fx,
        out,
        "--model",
        "openai-api/lab/qwen",
        "--model-base-url",
        "http://127.0.0.1:9/v1",
        "--cohort-only",
    )
    assert accepted.returncode == 0, accepted.stderr


def test_cohort_only_and_bad_input(fx, tmp_path):
    out = tmp_path / "cases.jsonl"
    done = build_cases(fx, out, "--per-chapter", "2")
    assert done.returncode == 0, done.stderr
    assert (
        "next: extract the fields with a local model" in done.stdout
        and f"-T cohort={tmp_path / 'cases.cohort.jsonl'}" in done.stdout
    )
    assert (tmp_path / "cases.cohort.jsonl").is_file() and not out.exists()
    missing = forked.run(
        [
            sys.executable,
            "-m",
            "bedside",
            "build-cases",
            "--mimic",
            str(tmp_path / "nope"),
            "--note",
            str(fx.note),
            "--out",
            str(out),
        ],
        cwd=REPO,
        timeout=300,
    )
    assert missing.returncode == 2 and "patients: not found" in missing.stderr and "Traceback" not in missing.stderr
    bad = build_cases(fx, out, "--per-chapter", "0")
    assert bad.returncode == 2 and "--per-chapter" in bad.stderr
