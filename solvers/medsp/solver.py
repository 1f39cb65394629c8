"""The MedSP1000 solver: the scenario, the three agents and the orchestrator's run, and what it leaves in the
store (:class:`~bedside.medsp.records.MedSPStore`). The closed loop is described in :mod:`bedside.solvers.medsp`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from inspect_ai.model import GenerateConfig, ModelOutput, get_model
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import store_as
from pydantic import NonNegativeInt, PositiveInt

from bedside.medsp.protocols import ENVIRONMENT, EXAMINEE, PATIENT
from bedside.medsp.records import MedSPStore, Scenario
from bedside.params import validate_parameters
from bedside.roles import role_model
from bedside.solvers.medsp.agents import EnvironmentAgent, ExamineeAgent, PatientAgent
from bedside.solvers.medsp.prompts import load_prompt_set
from bedside.solvers.medsp.scaling import FIXED, BestOfNExaminee, BonSelector, PanelExaminee
from bedside.solvers.medsp.session import Session
from bedside.solvers.orchestrator import run_encounter

#: test-time scaling of the examinee (``-T scaling=``; :mod:`bedside.solvers.medsp`)
Scaling = Literal["none", "single", "best_of_n", "panel"]


def make_examinee(
    session: Session,
    scaling: Scaling,
    *,
    n: int,
    panel_size: int,
    panel_rounds: int,
    bon_selector: BonSelector,
    parse_retries: int,
) -> ExamineeAgent:
    common: dict[str, Any] = dict(
        role="examinee",
        model=get_model(),
        system_prompt=session.prompts.examinee_system(session.scenario),
        policy="none",
        protocol=EXAMINEE,
        parse_retries=parse_retries,
        session=session,
        config=GenerateConfig() if scaling == "none" else FIXED,
    )
    if scaling in ("none", "single"):
        return ExamineeAgent(**common)
    if scaling == "best_of_n":
        return BestOfNExaminee(**common, n=n, selector=bon_selector)
    if scaling == "panel":
        return PanelExaminee(**common, panel_size=panel_size, rounds=panel_rounds)
    raise ValueError(f"unknown scaling {scaling!r}")


@solver
@validate_parameters
def medsp_encounter(
    *,
    max_turns: PositiveInt,
    scaling: Scaling,
    n: PositiveInt,
    panel_size: PositiveInt,
    panel_rounds: NonNegativeInt,
    bon_selector: BonSelector,
    parse_retries: NonNegativeInt,
    prompts: str | None,
):
    """Run one MedSP1000 scenario in closed loop (module docstring). Its arguments are the task's of the same
    names (``tasks/medsp.py``: their defaults and meanings), each required here and checked against its type."""
    prompt_set = load_prompt_set(prompts)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        scenario = Scenario.model_validate(state.metadata["scenario_record"])
        record = store_as(MedSPStore)
        record.scenario, record.scaling, record.max_turns, record.prompts = (
            scenario.key,
            scaling,
            max_turns,
            prompt_set.name,
        )

        role_config = None if scaling == "none" else FIXED
        patient_model, patient_fallback = role_model("patient", role_config)
        env_model, env_fallback = role_model("environment", role_config)
        record.role_fallbacks = [r for r, fb in (("patient", patient_fallback), ("environment", env_fallback)) if fb]

        session = Session(scenario=scenario, prompts=prompt_set, max_turns=max_turns)
        examinee = make_examinee(
            session,
            scaling,
            n=n,
            panel_size=panel_size,
            panel_rounds=panel_rounds,
            bon_selector=bon_selector,
            parse_retries=parse_retries,
        )
        if isinstance(examinee, PanelExaminee):
            await examinee.choose_domains()
            record.panel_domains, record.panel_domain_selection = examinee.domains, examinee.domain_selection
        patient = PatientAgent(
            role="patient",
            model=patient_model,
            system_prompt=prompt_set.patient_system(scenario),
            policy="none",
            protocol=PATIENT,
            parse_retries=parse_retries,
            session=session,
        )
        environment = EnvironmentAgent(
            role="environment",
            model=env_model,
            system_prompt=prompt_set.environment_system(scenario),
            policy="none",
            protocol=ENVIRONMENT,
            parse_retries=parse_retries,
            session=session,
        )
        # the history cap is a safety net only: three turns per examinee turn never exceed it
        result = await run_encounter(
            [examinee, patient, environment],
            None,
            min_turns=0,
            max_turns=3 * max_turns + 3,
            controller=session,
            role_limits={"examinee": max_turns},
        )

        s = session.state
        record.history = result.history
        record.sim_state = asdict(s)
        record.progress_index, record.state_label, record.phase_history = (
            s.progress_index,
            s.current_phase_id,
            list(s.phase_history),
        )
        record.end_reason = result.end_reason
        record.error = result.error
        record.examinee_turns = sum(t.role == "examinee" for t in result.history)
        record.action_statuses = {k: session.statuses.get(k, 0) for k in ("executed", "pending", "unsupported")}
        record.unsupported_actions = session.statuses.get("unsupported", 0)
        record.progression_anomalies = session.anomalies
        record.agent_stats = {"examinee": examinee.stats, "patient": patient.stats, "environment": environment.stats}
        state.metadata["end_reason"] = result.end_reason

        state.messages = examinee.chat(result.history)
        last = next((t for t in reversed(result.history) if t.role == "examinee"), None)
        state.output = ModelOutput.from_content(model=str(examinee.model), content=last.raw if last else "")
        return state

    return solve
