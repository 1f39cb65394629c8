"""tests/forked.py: a command in a fork of the warm server behaves as the fresh process it stands for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests import forked

pytestmark = pytest.mark.eval

PROBE = textwrap.dedent(
    """
    import os, sys
    print("argv", sys.argv[1:])
    print("cwd", os.getcwd())
    print("var", os.environ.get("FORKED_PROBE"))
    print("stdin", sys.stdin.read())
    print("torch preloaded", "torch" in sys.modules)
    print("bedside preloaded", "bedside" in sys.modules)
    print("csv preloaded", "csv" in sys.modules)
    print("to stderr", file=sys.stderr)
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "exit":
        sys.exit(3)
    if what == "message":
        sys.exit("a message")
    if what == "raise":
        raise ValueError("uncaught")
    if what == "kill":
        os.kill(os.getpid(), 9)
    if what == "sleep":
        import time
        time.sleep(60)
    """
)


@pytest.fixture
def probe(tmp_path, monkeypatch):
    monkeypatch.delenv("BEDSIDE_TESTS_FRESH_PROCESSES", raising=False)  # these tests are of the server
    (tmp_path / "forked_probe.py").write_text(PROBE)
    return tmp_path


@pytest.fixture
def own_server(probe, monkeypatch):
    """Servers of this test's own that preload only ``csv`` (starting one with the full preload costs
    seconds); the test process's server is back afterwards."""
    shared = forked._server
    monkeypatch.setattr(forked, "PRELOAD", ("csv",))
    monkeypatch.setattr(forked, "_server", None)
    yield probe
    if forked._server is not None and forked._server is not shared:
        forked._server.stop()


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "forked_probe", *args]


def test_a_forked_command_gets_its_argv_folder_environment_and_streams(probe):
    env = {**os.environ, "FORKED_PROBE": "seen"}
    done = forked.run(command("a", "b c"), cwd=probe, env=env, input="typed")
    assert done.returncode == 0, done.stderr
    assert "argv ['a', 'b c']" in done.stdout and f"cwd {probe}" in done.stdout
    assert "var seen" in done.stdout and "stdin typed" in done.stdout and done.stderr == "to stderr\n"
    # the heavy libraries come from the server; bedside is imported by the command itself
    assert "torch preloaded True" in done.stdout and "bedside preloaded False" in done.stdout
    assert (
        "var None" in forked.run(command(), cwd=probe, env={k: v for k, v in env.items() if k != "FORKED_PROBE"}).stdout
    )


@pytest.mark.parametrize(
    ("what", "code", "stderr"),
    [("exit", 3, ""), ("message", 1, "a message"), ("raise", 1, "ValueError: uncaught"), ("kill", -9, "")],
)
def test_exit_status_and_errors_are_those_of_a_process(probe, what, code, stderr):
    done = forked.run(command(what), cwd=probe)
    assert done.returncode == code and stderr in done.stderr
    fresh = subprocess.run(command(what), cwd=probe, capture_output=True, text=True)
    assert fresh.returncode == code and stderr in fresh.stderr


def test_a_timeout_kills_the_command(probe):
    with pytest.raises(subprocess.TimeoutExpired):
        forked.run(command("sleep"), cwd=probe, timeout=2)
    # the client that gave up closed its connection: the same server serves the next command
    server = forked._server
    assert forked.run(command("a"), cwd=probe).returncode == 0 and forked._server is server


def test_a_library_setting_of_another_value_runs_a_fresh_process(probe):
    # torch reads OpenMP's thread count when it loads: a fork of the server would keep the server's
    env = {**os.environ, "OMP_NUM_THREADS": "1" if os.environ.get("OMP_NUM_THREADS") != "1" else "2"}
    done = forked.run(command(), cwd=probe, env=env)
    assert done.returncode == 0 and "torch preloaded False" in done.stdout
    # so does anything that is not python -m or a console script of this venv
    done = forked.run([sys.executable, "-c", "import sys; print('torch' in sys.modules)"], cwd=probe)
    assert done.stdout.strip() == "False"


def test_a_server_that_ended_is_replaced(own_server):
    assert forked.run(command("a"), cwd=own_server).returncode == 0
    ended = forked._server
    ended.proc.kill()
    ended.proc.wait()
    done = forked.run(command("a"), cwd=own_server)
    assert done.returncode == 0 and "csv preloaded True" in done.stdout, done.stderr
    assert forked._server is not ended and forked._server.proc.poll() is None


def test_a_setting_the_test_process_gains_moves_the_server_with_it(own_server, monkeypatch):
    # a library imported in this process can set a library setting here (sentence-transformers sets KMP_*
    # and TORCHINDUCTOR_CACHE_DIR): the commands after it run in a fork of a server with that setting
    assert "csv preloaded True" in forked.run(command(), cwd=own_server).stdout
    before = forked._server
    monkeypatch.setenv("KMP_SET_BY_AN_IMPORT", "1")
    done = forked.run(command(), cwd=own_server)
    assert done.returncode == 0 and "csv preloaded True" in done.stdout, done.stderr
    assert forked._server is not before and forked._server.env["KMP_SET_BY_AN_IMPORT"] == "1"
    assert before.proc.poll() is not None  # the old server is gone, not left running


def test_a_setting_the_preloaded_libraries_make_themselves_is_no_difference():
    # the server imported sentence-transformers, which set KMP_INIT_AT_FORK=FALSE there; when this
    # process imports it later it gets the same value, as a fresh process of the command would
    server = object.__new__(forked._Server)
    server.env = {"PATH": "/bin", "OMP_NUM_THREADS": "2"}
    server.preload_set = {"KMP_INIT_AT_FORK": "FALSE"}
    assert server.takes({"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"})  # not a library setting
    assert server.takes({"OMP_NUM_THREADS": "2", "KMP_INIT_AT_FORK": "FALSE"})
    assert not server.takes({"OMP_NUM_THREADS": "2", "KMP_INIT_AT_FORK": "TRUE"})  # another value
    assert not server.takes({"OMP_NUM_THREADS": "2", "KMP_OTHER": "1"})  # one the preload did not set
    assert not server.takes({"OMP_NUM_THREADS": "1"}) and not server.takes({})


def test_a_write_to_a_closed_pipe_raises_as_in_a_fresh_process(probe):
    # Python ignores SIGPIPE: a server whose client has gone gets BrokenPipeError, it is not killed
    (probe / "pipe_probe.py").write_text(
        "import os\nr, w = os.pipe()\nos.close(r)\n"
        "try:\n    os.write(w, b'x')\nexcept BrokenPipeError:\n    print('raised')\n"
    )
    done = forked.run([sys.executable, "-m", "pipe_probe"], cwd=probe)
    assert done.returncode == 0 and done.stdout.strip() == "raised", (done.returncode, done.stderr)


def test_a_started_command_runs_beside_the_test_and_merges_its_streams(probe):
    proc = forked.start(command("sleep"), cwd=probe, stderr=subprocess.STDOUT)
    assert isinstance(proc, forked.Forked) and proc.poll() is None  # running, while the test goes on
    os.killpg(proc.pid, signal.SIGKILL)  # its own session: the pid is its process group
    assert proc.wait(timeout=30) == -9
    done = forked.start(command("a"), cwd=probe, stderr=subprocess.STDOUT)
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0 and err is None and "argv ['a']" in out and "to stderr" in out
