"""One unit of a sharded run: an ordinary Inspect ``eval_set()`` of one task, one model and one shard's
sample ids, in the unit's own log directory.

The unit's directory is its own eval set, so resuming is Inspect's: run again, ``eval_set()`` finds the
unit's log; a finished one is left as it is, an unfinished one (a crashed process's ``started`` log, or an
``error`` / ``cancelled`` one) is completed, re-using the samples it holds and running only the others
(Inspect recovers a crashed log's samples from its sample buffer where the buffer is on this machine). A
unit never holds a sample twice: its log is one eval of its shard's ids, written by one process at a time
(the engine runs a unit once at a time; a retried unit starts after the failed attempt's process is gone).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bedside.compat import parse_model_role_cli_args
from bedside.scale.plan import Unit


@dataclass(frozen=True)
class UnitResult:
    """What one run of a unit gave: its log's status and samples, where it ran."""

    unit: str
    status: str
    samples: int
    log: str | None
    host: str
    pid: int
    node: str | None = None  # the Ray node it ran on (None: not on Ray)
    error: str | None = None


def eval_set_arguments(unit: Unit) -> dict[str, Any]:
    """The ``eval_set()`` arguments of a unit (its roles parsed as ``inspect eval`` parses ``--model-role``)."""
    return {
        "tasks": unit.task,
        "log_dir": unit.log_dir,
        "task_args": dict(unit.task_args),
        "model": unit.model,
        "model_args": dict(unit.model_args),
        "model_base_url": unit.model_base_url,
        "model_roles": parse_model_role_cli_args(unit.model_roles) if unit.model_roles else None,
        "sample_id": list(unit.sample_ids),
        "metadata": unit.info.metadata(),
        "max_connections": unit.max_connections,
        "max_samples": unit.max_samples,
        "display": "none",
        **unit.eval_args,
    }


def run_unit(unit: Unit) -> UnitResult:
    """Run (or resume) ``unit`` in the command's working folder where this machine has it (a Ray worker
    starts elsewhere: relative ``-T`` paths, and the task file a log records, which Inspect writes relative to
    the working folder and matches a unit's log by when it resumes it, are then the command's); returns its
    log's status (``success`` when the shard is complete)."""
    from inspect_ai import eval_set

    with _working_folder(unit.cwd):
        _, logs = eval_set(**eval_set_arguments(unit))
    [log] = logs  # one task, one model: one log
    error = log.error.message if log.error is not None else None
    return UnitResult(
        unit=str(unit),
        status=log.status,
        samples=_samples(log),
        log=log.location,
        host=socket.gethostname(),
        pid=os.getpid(),
        node=_ray_node(),
        error=error,
    )


@contextmanager
def _working_folder(folder: str) -> Iterator[None]:
    before = os.getcwd()
    if folder and os.path.isdir(folder):
        os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _samples(log: Any) -> int:
    """The samples a unit's log holds (``eval_set()`` may return logs without their samples: then counted
    from the log file's sample summaries)."""
    from inspect_ai.log import read_eval_log_sample_summaries

    if log.samples is not None:
        return len(log.samples)
    return len(read_eval_log_sample_summaries(log.location)) if log.location else 0


def _ray_node() -> str | None:
    """The id of the Ray node this process runs on, when it is a Ray worker."""
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return str(ray.get_runtime_context().get_node_id())
