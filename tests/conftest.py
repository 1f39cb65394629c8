"""Shared test helpers: scripted models, running a task offline, reading what a sample produced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task, eval
from inspect_ai.log import EvalLog, EvalSample, read_eval_log
from inspect_ai.model import Model, get_model

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def scripted(**options: Any) -> Model:
    """A fresh ``bedside/scripted`` model with behaviour options (not memoized across options)."""
    return get_model("bedside/scripted", memoize=False, **options)


def run(
    task: Task,
    *,
    educator: Model | None = None,
    roles: dict[str, Model] | None = None,
    log_dir: Path,
    **eval_args: Any,
) -> EvalLog:
    """Run ``task`` with scripted models for every role unless given (``roles={}``: none bound)."""
    model_roles = {"patient": scripted(), "monitor": scripted()} if roles is None else roles
    [log] = eval(
        task,
        model=educator or scripted(),
        model_roles=model_roles or None,
        log_dir=str(log_dir),
        display="none",
        **eval_args,
    )
    assert log.status == "success", log.error
    return read_eval_log(log.location, resolve_attachments=True)


def store(sample: EvalSample) -> dict[str, Any]:
    """The ``EncounterStore`` fields of a sample, without the class prefix."""
    prefix = "EncounterStore:"
    return {k[len(prefix) :]: v for k, v in sample.store.items() if k.startswith(prefix)}


def model_inputs(sample: EvalSample, role: str | None) -> list[list[Any]]:
    """The input messages of every model call made by ``role`` (None = the model under test)."""
    return [e.input for e in sample.events if e.event == "model" and e.role == role]


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: this test reads other projects' data from ../shared (not shipped with bedside)")
    return path


def metrics_of(log: EvalLog, name: str, scorer: str | None = None) -> dict[str, float]:
    """Metric values of one score key, with Inspect's package prefix ("bedside/") removed: Inspect
    prefixes a package's metric names when the task is loaded from the CLI, not from Python."""
    for s in log.results.scores:
        if s.name == name and (scorer is None or s.scorer == scorer):
            return {k.removeprefix("bedside/"): m.value for k, m in s.metrics.items()}
    raise KeyError(name)
