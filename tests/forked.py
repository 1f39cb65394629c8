"""``subprocess.run`` for the suite's commands, in a fork of a warm process (:mod:`tests.forkserver`).

A test that runs ``inspect eval ...``, ``bedside ...`` or ``python -m ...`` as a process checks what a
process gives (its exit code, what it prints, that nothing of the test process leaks into it); a
fresh one spends 5-7 s importing Inspect, torch, transformers and sentence-transformers before its
first line. :func:`run` keeps the contract — a new process with the given argv, environment,
working folder and standard streams — and skips those imports: the command runs in a fork of a
server that imported them once (one server per test process, started on first use).

A command runs as a fresh process (plain ``subprocess.run``) instead when the fork could differ from
one: a program that is not a Python console script of this venv or ``python -m MODULE`` (interpreter
options, ``-c``, other programs), or an environment that differs from the test process's own in a
variable a library reads when it loads (:data:`STARTUP`: Python's own, OpenMP / BLAS threads, torch's
kernel choice, Hugging Face's cache and offline switches, matplotlib's, the locale, ``HOME``,
``TMPDIR``). The server always has the test process's settings: it is started anew when they have
changed since it started, so which test happened to start it never decides how a later command runs.
``BEDSIDE_TESTS_FRESH_PROCESSES=1`` runs every command as a fresh process (to compare, or to rule
the server out when a test fails).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

#: prefixes of the variables read when Python or a preloaded library starts (compared, never forked across)
STARTUP = (
    "PYTHON",
    "OMP_",
    "GOMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    "ATEN_",
    "TORCH",
    "CUDA",
    "HF_",
    "HUGGINGFACE",
    "TRANSFORMERS_",
    "SENTENCE_TRANSFORMERS",
    "TOKENIZERS_",
    "MPL",
    "LANG",
    "LC_",
    "HOME",
    "XDG_",
    "TMPDIR",
    "LD_",
    "MALLOC",
)


def _startup(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP)}


#: the modules a new server imports (None: :data:`tests.forkserver.PRELOAD`); tests of the server itself
#: start servers with a few light ones
PRELOAD: tuple[str, ...] | None = None


class _Server:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="forkserver-"))
        self.socket = str(self.folder / "socket")
        self.env = dict(os.environ)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.forkserver",
                self.socket,
                *([",".join(PRELOAD)] if PRELOAD is not None else []),
            ],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a test that signals its own process group does not end the server
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready.startswith('{"ready"'):
            raise RuntimeError(f"tests/forkserver.py did not start (exit {self.proc.wait()})")
        #: the variables the preloaded libraries set when imported (sentence-transformers: KMP_*,
        #: TORCHINDUCTOR_CACHE_DIR); a process that imports them gets the same values
        self.preload_set = {k: v for k, v in json.loads(ready)["ready"].items() if k not in self.env}
        atexit.register(self.stop)

    def takes(self, env: dict[str, str]) -> bool:
        """Whether a command with ``env`` runs in a fork of this server as in a fresh process: the same
        library settings, but for those the preloaded libraries set themselves to the same value."""
        ours, theirs = _startup(self.env), _startup(env)
        return all(
            theirs.get(k) == ours.get(k) or (k not in ours and theirs.get(k) == self.preload_set.get(k))
            for k in ours.keys() | theirs.keys()
        )

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: _Server | None = None


def _program(args: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """What the server runs for ``args`` (a venv console script by its file, or ``-m MODULE``), else None."""
    first = shutil.which(args[0], path=env.get("PATH")) if os.sep not in args[0] else args[0]
    if first is None:
        return None
    if Path(first).resolve() == Path(sys.executable).resolve():
        if len(args) >= 3 and args[1] == "-m":
            return {"module": args[2], "args": args[3:]}
        return None
    script = Path(first)
    if script.parent.resolve() != Path(sys.executable).parent.resolve() or not script.is_file():
        return None
    with script.open("rb") as file:
        if b"python" not in file.readline():
            return None
    return {"script": str(script.absolute()), "args": args[1:]}


def run(
    args: list[str],
    *,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    input: str | None = None,  # noqa: A002 - subprocess.run's name
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True, ...)``, forked from the warm server."""
    args, env = [str(a) for a in args], dict(os.environ if env is None else env)
    program = _forkable(args, env)
    if program is None:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, input=input)
    proc = Forked(_server_for(env), program, args, cwd, env, input, merged=False)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc._conn.close()  # the server drops the reply to a client that has gone
        raise subprocess.TimeoutExpired(args, timeout or 0, *_read(proc._streams)) from None
    return subprocess.CompletedProcess(args, proc.wait(), stdout, stderr or "")


def stop(proc: Forked | subprocess.Popen[str], timeout: float = 30) -> None:
    """Kills a started command's process group (:func:`start` gives it its own) if it still runs, and waits for it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=timeout)


def start(
    args: list[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None, stderr: int | None = None
) -> Forked | subprocess.Popen[str]:
    """``subprocess.Popen(args, stdout=PIPE, stderr=PIPE or stderr, text=True, start_new_session=True)``
    forked from the warm server (a fresh process where the server cannot stand for one, as in :func:`run`).
    ``stderr=subprocess.STDOUT`` merges the two streams. The command has its own session: its pid is its
    process group's."""
    args, env = [str(a) for a in args], dict(os.environ if env is None else env)
    program = _forkable(args, env)
    if program is None:
        return subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr is None else stderr,
            text=True,
            start_new_session=True,
        )
    return Forked(_server_for(env), program, args, cwd, env, None, merged=stderr == subprocess.STDOUT)


def _forkable(args: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """What the server runs for the command, or None: it is not a program the server can run, or it sets
    a library setting of its own (then it runs as a fresh process)."""
    if os.environ.get("BEDSIDE_TESTS_FRESH_PROCESSES") or _startup(env) != _startup(dict(os.environ)):
        return None
    return _program(args, env)


def _server_for(env: dict[str, str]) -> _Server:
    """The running server, or a new one: the first command, the server has ended, or this process's own
    settings changed since it started (a server with this process's settings)."""
    global _server
    if _server is None or _server.proc.poll() is not None or not _server.takes(env):
        if _server is not None:
            _server.stop()
        _server = _Server()
    return _server


class Forked:
    """A command running in a fork of the server, with the part of :class:`subprocess.Popen` the tests
    use: ``args``, ``pid``, ``returncode``, ``poll``, ``wait``, ``communicate`` and ``stdout`` (what it
    printed so far, readable while it runs)."""

    def __init__(
        self,
        server: _Server,
        program: dict[str, Any],
        args: list[str],
        cwd: str | Path | None,
        env: dict[str, str],
        input: str | None,  # noqa: A002
        merged: bool,
    ) -> None:
        self.args = args
        self.returncode: int | None = None
        self._scratch = tempfile.TemporaryDirectory(prefix="forked-")
        self._streams = {name: Path(self._scratch.name, name) for name in ("stdin", "stdout", "stderr")}
        self._streams["stdin"].write_text(input or "", encoding="utf-8")
        for name in ("stdout", "stderr"):
            self._streams[name].touch()
        if merged:
            self._streams["stderr"] = self._streams["stdout"]
        request = {
            **program,
            "cwd": str(Path(cwd or os.getcwd()).absolute()),
            "env": env,
            **{name: str(path) for name, path in self._streams.items()},
        }
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._conn.connect(server.socket)
        self._conn.sendall(json.dumps(request).encode() + b"\n")
        self._received = b""
        self.pid: int = self._line(None)["pid"]
        self.stdout = self._streams["stdout"].open(encoding=locale.getpreferredencoding(False))
        self._merged = merged

    def _line(self, timeout: float | None) -> dict[str, Any]:
        """The server's next line; ``TimeoutError`` after ``timeout`` seconds without one."""
        self._conn.settimeout(timeout)
        while b"\n" not in self._received:
            chunk = self._conn.recv(4096)
            if not chunk:
                raise RuntimeError("tests/forkserver.py ended while the command ran")
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return json.loads(line)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = self._line(timeout)["returncode"]
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(0.001)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str | None]:
        self.wait(timeout)
        stdout, stderr = _read(self._streams)
        return stdout, None if self._merged else stderr


def _read(streams: dict[str, Path]) -> tuple[str, str]:
    encoding = locale.getpreferredencoding(False)
    return tuple(streams[n].read_text(encoding=encoding) for n in ("stdout", "stderr"))  # type: ignore[return-value]
