"""Running the CPB-Bench tasks offline with scripted models."""

from __future__ import annotations

from typing import Any

from inspect_ai.log import EvalLog, EvalSample

from bedside.cpb.protocols import FAILURE_JUDGE, OVERREACTION_JUDGE, PERSISTENCE_JUDGE
from tests.conftest import metrics_of, run, scripted


def parse_failure(text: str, rule: str | None = None) -> Any:
    """The failure judge's reply read by its protocol (``rule``: ``official``/``strict``; default the run's)."""
    return FAILURE_JUDGE.read(text, rule)[0]


def parse_persistence(text: str, rule: str | None = None) -> Any:
    return PERSISTENCE_JUDGE.read(text, rule)[0]


def parse_overreaction(text: str, rule: str | None = None) -> Any:
    return OVERREACTION_JUDGE.read(text, rule)[0]


def run_cpb(
    task,
    tmp_path,
    doctor: dict[str, Any] | None = None,
    grader: dict[str, Any] | None = None,
    patient: dict[str, Any] | None = None,
    **eval_args: Any,
) -> EvalLog:
    """``task`` with a scripted doctor (model under test), grader and (if given) patient."""
    roles = {"grader": scripted(**(grader or {}))}
    if patient is not None:
        roles["patient"] = scripted(**patient)
    return run(task, educator=scripted(**(doctor or {})), roles=roles, log_dir=tmp_path, **eval_args)


def cpb_store(sample: EvalSample) -> dict[str, Any]:
    prefix = "CPBStore:"
    return {k[len(prefix) :]: v for k, v in sample.store.items() if k.startswith(prefix)}


def by_id(log: EvalLog) -> dict[str, EvalSample]:
    return {str(s.id): s for s in log.samples or []}


def metrics(log: EvalLog, name: str) -> dict[str, float]:
    """The summary numbers of the score key ``name`` (e.g. ``failure``): ``mean``, ``ci_lower``,
    ``ci_upper``, ``n`` (or ``total`` for a bookkeeping key of the health block)."""
    return metrics_of(log, name)


def calls(sample: EvalSample, role: str | None) -> list[list[Any]]:
    return [e.input for e in sample.events if e.event == "model" and e.role == role]
