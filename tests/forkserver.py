"""A warm Python process that runs each command of the test suite in a fork of itself.

Started by :mod:`tests.forked` (one per test process) as ``python -m tests.forkserver SOCKET [MODULES]``. It
imports the heavy third-party libraries a bedside command loads (Inspect, torch, transformers,
sentence-transformers, pandas, scipy, scikit-learn, matplotlib, rouge-score, textstat, ppi-python)
once, then for each request forks: the child takes the request's working folder, environment,
standard streams and argv, runs the program as a fresh interpreter would (a console script of this
venv by its file, or ``python -m module``) and exits through the interpreter's normal shutdown, so
its exit code, output and tracebacks are those of a fresh process.

Nothing of bedside or of the tests is imported before the fork: bedside's import-time behaviour
(the registry, hooks registered by environment variable) happens in the command. No torch
operation runs in the server, so no OpenMP thread pool exists when it forks. Variables a library
reads when it loads (see :data:`tests.forked.STARTUP`) are the server's; :mod:`tests.forked` runs a
command whose environment differs in one of them as a fresh process instead.

The server is single-threaded: it accepts a request and forks (the child, in a session of its own,
answers with its pid); when the child ends it answers with its exit status. It exits when its parent
(the test process) is gone.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

#: imported once here; a module missing from this venv is skipped (the command imports what it needs)
PRELOAD = (
    "inspect_ai",
    "inspect_ai._cli.main",
    "inspect_ai.model._providers.openai",
    "inspect_ai.model._providers.openai_compatible",
    # what Inspect imports while every eval runs: its first sample's message types (~1.2 s) and the
    # input server of the sample's console (~0.8 s)
    "inspect_ai.model._openai_responses",
    "inspect_ai.model._providers.anthropic",
    "inspect_ai.agent._acp.server",
    "openai",
    "numpy",
    "pandas",
    "scipy.stats",
    "sklearn.metrics",
    "torch",
    "transformers",
    "sentence_transformers",
    "rouge_score.rouge_scorer",
    "textstat",
    "ppi_py",
    "matplotlib",
    "matplotlib.pyplot",
    "yaml",
    "jinja2",
    "pydantic",
)


def preload(names: tuple[str, ...] = PRELOAD) -> None:
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - a library this venv lacks is the command's business
            continue
    if names != PRELOAD:
        return
    from inspect_ai.model import get_model_info

    get_model_info("openai/gpt-4o")  # Inspect's model database, read from its YAML files once (~0.2 s)
    with contextlib.suppress(ImportError):
        import textstat

        textstat.flesch_kincaid_grade("Its pronunciation dictionary loads on first use.")  # ~1 s, once


def serve(path: str) -> dict[str, Any]:
    """Serve requests until the parent is gone (then exit); in a forked child, return its request."""
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}
    # ready, with the environment the preloaded libraries left (some set variables when imported)
    print(json.dumps({"ready": dict(os.environ)}), flush=True)
    while True:
        for _ in selector.select(timeout=0.05):
            conn, _ = listener.accept()
            request = json.loads(_read_line(conn))
            pid = os.fork()
            if pid == 0:
                # its own session (and process group) before the client learns its pid, so that the
                # client can signal the group at once; then the connection is the server's alone
                os.setsid()
                _send(conn, {"pid": os.getpid()})
                selector.close()
                listener.close()
                for other in running.values():
                    other.close()
                conn.close()
                return request
            running[pid] = conn
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = running.pop(pid, None)
            if conn is not None:
                _send(conn, {"returncode": _returncode(status)})
                conn.close()
        if os.getppid() != parent:
            sys.exit(0)


def _send(conn: socket.socket, message: dict[str, int]) -> None:
    """One line to the client; a client that has gone (it timed out and closed) is not the server's end."""
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(message).encode() + b"\n")


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _returncode(status: int) -> int:
    """As :class:`subprocess.Popen` reports it: the exit code, or minus the signal that ended it."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def become(request: dict[str, Any]) -> None:
    """Turn this forked child into the requested command (then run it: :func:`run`)."""
    for sig in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it: a closed socket raises, never kills
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        if name == "stderr" and request["stderr"] == request["stdout"]:  # merged, as stderr=STDOUT
            os.dup2(1, 2)
            continue
        opened = os.open(request[name], mode)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )


def run(request: dict[str, Any]) -> None:
    """Run the program as ``python SCRIPT ARGS`` or ``python -m MODULE ARGS`` would."""
    import runpy

    if "module" in request:
        sys.path[0] = os.getcwd()
        sys.argv = ["-m", *request["args"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    else:
        sys.path[0] = os.path.dirname(request["script"])
        sys.argv = [request["script"], *request["args"]]
        runpy.run_path(request["script"], run_name="__main__")


def exit_status(request: dict[str, Any]) -> int:
    """Run the request and give the exit status the interpreter would, printing what it would."""
    try:
        run(request)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports an uncaught exception
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def finish(status: int) -> None:
    """The interpreter's exit without its final teardown of every module: wait for non-daemon threads,
    run the atexit functions, flush the streams, exit. (Tearing down the inherited modules would touch
    every page the fork shares with the server and copy them: seconds per command.)"""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize does first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


if __name__ == "__main__":
    preload(tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else PRELOAD)
    gc.freeze()  # the children's collections leave the server's objects (and their shared pages) alone
    request = serve(sys.argv[1])
    become(request)
    finish(exit_status(request))
