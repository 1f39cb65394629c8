"""bedside/local never takes the eval down without a message: llama.cpp is probed in a subprocess
first, and a probe that dies by a signal stops the eval with one message naming the cause and the
rebuild command. The crash here is real (a SIGSEGV in a stand-in ``llama_cpp`` package), so these
tests run without llama.cpp installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bedside.compat import PrerequisiteError
from bedside.providers import local
from bedside.providers.local import LocalEngine, probe_llama

REPO = Path(__file__).resolve().parents[2]
SEGFAULT = "import ctypes\nctypes.string_at(0)\n"  # dereferences NULL: SIGSEGV, like a wrong-CPU build


@pytest.fixture
def crashing_llama(tmp_path: Path) -> Path:
    """A directory holding a ``llama_cpp`` package whose import dies with SIGSEGV."""
    pkg = tmp_path / "fake" / "llama_cpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(SEGFAULT)
    return pkg.parent


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_a_probe_killed_by_a_signal_is_one_clear_error(gguf, monkeypatch):
    monkeypatch.setattr(local, "_probed", {})
    with pytest.raises(PrerequisiteError) as info:
        probe_llama(str(gguf), 1, script=SEGFAULT)
    message = str(info.value.message)
    assert "SIGSEGV" in message and "make local" in message and "\n" not in message
    assert local._probed == {}  # a failed probe is not remembered as good


def test_a_probe_that_fails_without_a_signal_names_the_error(gguf, monkeypatch):
    monkeypatch.setattr(local, "_probed", {})
    with pytest.raises(PrerequisiteError, match="could not load .*ValueError: bad gguf"):
        probe_llama(str(gguf), 1, script="raise ValueError('bad gguf')")


@pytest.mark.eval
def test_a_good_probe_runs_once_per_model(gguf, monkeypatch):
    monkeypatch.setattr(local, "_probed", {})
    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(local.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    assert probe_llama(str(gguf), 1, script="print('probe ok')").strip() == "probe ok"
    assert probe_llama(str(gguf), 1, script="print('probe ok')").strip() == "probe ok"
    assert len(calls) == 1


@pytest.mark.eval
def test_the_engine_checks_the_library_in_a_subprocess(gguf, crashing_llama, monkeypatch):
    monkeypatch.setattr(local, "_probed", {})
    monkeypatch.setenv("PYTHONPATH", f"{crashing_llama}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.syspath_prepend(str(crashing_llama))  # find_spec sees the package; nothing imports it here
    with pytest.raises(PrerequisiteError, match="died with SIGSEGV"):
        LocalEngine(model_path=str(gguf), n_threads=1).check_runnable()
    assert "llama_cpp" not in sys.modules or not str(sys.modules["llama_cpp"].__file__).startswith(str(crashing_llama))


@pytest.mark.eval
def test_inspect_eval_stops_with_one_message_when_llama_cpp_crashes(gguf, crashing_llama, tmp_path):
    """What a user on an AMX VM sees: the eval stops before any sample with the cause and the fix,
    instead of `Segmentation fault` and no log."""
    env = {**os.environ, "PYTHONPATH": str(crashing_llama)}
    done = subprocess.run(
        [
            Path(sys.executable).parent / "inspect",
            "eval",
            "tasks/discharge.py",
            "--model",
            "bedside/local",
            "-M",
            f"model_path={gguf}",
            "--limit",
            "1",
            "--log-dir",
            str(tmp_path / "logs"),
            "--display",
            "plain",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # the eval process itself did not die by the signal
    assert "died with SIGSEGV" in out and "make local" in out
    assert "Traceback" not in out
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())  # stopped before any sample
