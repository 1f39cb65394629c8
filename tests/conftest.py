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
    """Inspect's summary numbers of one score key (:mod:`bedside.scorers.metrics`): ``mean``,
    ``ci_lower`` / ``ci_upper`` (NaN when the block shows no interval) and ``n`` from the key's
    headline block; or ``total`` (a count) / ``mean`` from the ``health`` block."""
    from bedside.scorers.metrics import label

    row = label(name)
    for s in log.results.scores:
        if scorer is not None and s.scorer != scorer:
            continue
        values = {k: m.value for k, m in s.metrics.items()}
        if s.name == "health" and scorer != "health" or s.scorer == "health":
            if name in values:
                return {"total": values[name]}
            if f"{name} (mean)" in values:
                return {"mean": values[f"{name} (mean)"]}
            continue
        if row in values:
            return {"mean": values[row], "ci_lower": values.get(f"{row} lower", float("nan")),
                    "ci_upper": values.get(f"{row} upper", float("nan")),
                    "n": values.get(f"{row} n", values.get("n"))}
    raise KeyError(name)
