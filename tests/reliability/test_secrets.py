"""Secrets and patient data: API keys and base-URL credentials must not reach eval
logs, and ``logs/`` (Inspect's default log folder here) is ignored by git.

A log is scanned byte by byte: an ``.eval`` file is a zip, and every member is read (header,
journal, samples, summaries), with Inspect logging every raw API call (``log_model_api=True``).
"""

from __future__ import annotations

import base64
import secrets
import subprocess
import zipfile
from pathlib import Path

import pytest
from inspect_ai import eval, task_with
from inspect_ai.model import get_model

from bedside.scorers.discharge.encounter_outcome import encounter_outcome
from bedside.tasks.discharge import discharge
from tests.conftest import REPO
from tests.loopback.server import LoopbackServer

pytestmark = pytest.mark.eval

LOOPBACK = "openai-api/loopback"


def leaks(log_file: str, values: list[str]) -> dict[str, list[str]]:
    """value -> the zip members of ``log_file`` that contain it."""
    found: dict[str, list[str]] = {}
    with zipfile.ZipFile(log_file) as z:
        members = z.namelist()
        assert any(m.startswith("samples/") for m in members) and "header.json" in members
        for name in members:
            data = z.read(name)
            for value in values:
                if value.encode() in data:
                    found.setdefault(value, []).append(name)
    return found


def run_with(tmp_path: Path, api_key: str, base_url: str) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOOPBACK_API_KEY", api_key)
        mp.setenv("LOOPBACK_BASE_URL", base_url)
        mp.setenv("BEDSIDE_LOOPBACK_URL", base_url)
        models = {role: get_model(f"{LOOPBACK}/{role}", memoize=False) for role in ("educator", "patient", "monitor")}
        task = task_with(discharge(min_turns=2, max_turns=4, cache_references=False), scorer=[encounter_outcome()])
        [log] = eval(
            task,
            model=models.pop("educator"),
            model_roles=models,
            limit=1,
            log_dir=str(tmp_path),
            display="none",
            log_model_api=True,
        )
    assert log.status == "success" and log.samples and log.samples[0].error is None
    return log.location


@pytest.fixture(scope="module")
def credentialed_run(tmp_path_factory) -> tuple[str, dict[str, str]]:
    key = f"sk-bedside-{secrets.token_hex(12)}"
    user, password = "alice", f"pw-{secrets.token_hex(12)}"
    with LoopbackServer() as server:
        url = server.base_url.replace("http://", f"http://{user}:{password}@")
        location = run_with(tmp_path_factory.mktemp("secrets"), key, url)
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    return location, {"key": key, "password": password, "basic": basic, "userinfo": f"{user}:{password}@"}


def test_api_key_never_reaches_the_log(credentialed_run):
    location, values = credentialed_run
    assert leaks(location, [values["key"], f"Bearer {values['key']}", values["basic"]]) == {}


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="Inspect writes model base URLs verbatim into the log header (see report)",
)
def test_base_url_credentials_never_reach_the_log(credentialed_run):
    """Inspect records each model's ``base_url`` (``eval.model_base_url``, ``eval.model_roles``) as
    given: credentials in the URL (``http://user:secret@host/v1``) end up in ``header.json`` and
    ``_journal/start.json``. Pass credentials in ``<SERVICE>_API_KEY``, never in the URL."""
    location, values = credentialed_run
    assert leaks(location, [values["password"], values["userinfo"]]) == {}


def test_logs_folder_is_ignored_by_git():
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0

    assert ignored("logs/2026-01-01T00-00-00+00-00_discharge_abc.eval")
    assert ignored("logs/sub/run.json")
    assert not ignored("logs/.gitkeep")  # the folder itself is kept
