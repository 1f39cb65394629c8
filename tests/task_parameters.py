"""What the tests of task parameters share: the shared ones (``tests/test_params.py``, every registered task)
and each benchmark's own cases (``tests/<b>/test_params.py``)."""

from __future__ import annotations

import functools
import inspect
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bedside.compat import PrerequisiteError
from bedside.params import BadParameter, validate_parameters
from tests import forked
from tests.benchmarks import unread_args
from tests.conftest import REPO

INSPECT = str(Path(sys.executable).parent / "inspect")
#: How ``-T name=<text>`` arrives after Inspect's YAML parsing: 'abc' and '' stay strings,
#: 3.5 is a float, true a bool, null None.
NOT_INTS: list[Any] = ["abc", "", "3.5", 3.5, True, False, None, [1], "1e3"]
NOT_BOOLS: list[Any] = ["maybe", "", 2, -1, 0.5, None, "truee", [True]]


def assert_refused(task_function: Callable[..., Any], args: dict[str, Any], name: str) -> None:
    """``task_function(**args)`` raises :class:`BadParameter` naming ``name`` in one line, before it reads any
    data (every required parameter and ``data`` name no readable file)."""
    with pytest.raises(BadParameter) as err:
        task_function(**{**unread_args(task_function), **args})
    msg = str(err.value)
    assert msg.startswith(f"Bad parameter '{name}': ") and f"got {name}=" in msg and "\n" not in msg, msg
    assert err.value.name == name
    assert isinstance(err.value, PrerequisiteError) and isinstance(err.value, ValueError)


def received(task_function: Callable[..., Any], args: dict[str, Any]) -> dict[str, Any]:
    """The arguments the task's body gets for ``args`` (its signature and annotations, a body that records)."""
    body = inspect.unwrap(task_function)
    seen: dict[str, Any] = {}

    @functools.wraps(body)
    def spy(*a: Any, **kw: Any) -> None:
        seen.update(inspect.signature(body).bind_partial(*a, **kw).arguments)

    validate_parameters(spy)(**args)
    return seen


def inspect_eval(target: str, *args: str, log_dir: Path) -> subprocess.CompletedProcess:
    # a wide console: Inspect prints the message through rich, which wraps at 80 columns off a tty
    env = {**os.environ, "COLUMNS": "200", "INSPECT_LOG_DIR": str(log_dir)}
    command = [INSPECT, "eval", target, "--model", "bedside/scripted", *args, "--limit", "1", "--log-dir", str(log_dir)]
    return forked.run(command, cwd=REPO, env=env, timeout=300)


def assert_cli_refuses(target: str, arg: str, name: str, tmp_path: Path) -> None:
    """``inspect eval TARGET -T ARG`` prints one line naming parameter ``name``, no traceback, and runs no eval."""
    log_dir = tmp_path / "logs"
    proc = inspect_eval(target, "-T", arg, log_dir=log_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-2000:]
    assert "Traceback" not in output, output[-2000:]
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines == [line for line in lines if "Bad parameter" in line], output[-2000:]
    [line] = lines
    assert line.startswith(f"Bad parameter '{name}':") and f"got {name}=" in line
    assert not list(log_dir.glob("*.eval"))  # no eval ran, so no model was called
