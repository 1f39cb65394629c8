"""Helpers for the MedSP tests: scripted roles, one-scenario runs, the sample store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import Model

from bedside.records.medsp import Scenario
from bedside.tasks.medsp import medsp
from tests.conftest import run, scripted

ANAPHYLAXIS = "bedside_demo_anaphylaxis/scenario1"
BACK_PAIN = "bedside_demo_back_pain/scenario1"
DKA_ICU = "bedside_demo_dka/scenario2"


def roles(**overrides: Model) -> dict[str, Model]:
    """Scripted patient, environment and grader, with some replaced."""
    return {"patient": scripted(), "environment": scripted(), "grader": scripted(), **overrides}


def run_one(
    tmp_path: Path,
    sample_id: str = ANAPHYLAXIS,
    *,
    examinee: Model | None = None,
    role_models: dict[str, Model] | None = None,
    **task_args: Any,
) -> tuple[EvalLog, EvalSample]:
    log = run(
        medsp(**task_args),
        educator=examinee,
        roles=roles() if role_models is None else role_models,
        log_dir=tmp_path,
        sample_id=sample_id,
    )
    return log, log.samples[0]


def store(sample: EvalSample) -> dict[str, Any]:
    prefix = "MedSPStore:"
    return {k[len(prefix) :]: v for k, v in sample.store.items() if k.startswith(prefix)}


def scenario_of(sample: EvalSample) -> Scenario:
    return Scenario.model_validate(sample.metadata["scenario_record"])


def text_of(messages: list[Any]) -> str:
    return "\n".join(m.text for m in messages)


def score(sample: EvalSample):
    return sample.scores["medsp_rubric"]
