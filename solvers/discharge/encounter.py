"""The DischargeBench encounter (paper Section 2.2, Appendix A.2-A.4, Algorithm 1) as an Inspect solver.

Agents: the educator is the model under test (``observe`` policy); the Virtual Patient is the
``patient`` role (``moderate`` policy, JSON ``{"utterance": ...}`` replies); the Education Monitor
Agent is the ``monitor`` role. An unbound role falls back to the model under test, with a warning
recorded in the log and in the sample store (``role_fallbacks``).

After the session the patient answers the six comprehension questions, each on its own, with the
full conversation history (paper Figure 9); the answers are stored for the scorers.

What the solver leaves behind:
- ``state.messages``: the educator's view of the dialogue (what ``inspect view`` shows as messages);
- ``state.store`` (``EncounterStore``): history with every verdict, discarded turns, soft
  corrections, end reason, persona, role fallbacks, parse counts and comprehension answers;
- ``state.metadata["end_reason"]`` for grouping.
"""

from __future__ import annotations

from inspect_ai.log import transcript
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput, get_model
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import collect, store_as
from pydantic import NonNegativeInt, PositiveInt

from bedside.calls import GenerationError
from bedside.discharge.persona import BEHAVIORS, Behavior, Persona
from bedside.discharge.protocols import COMPREHENSION, EDUCATOR, PATIENT
from bedside.discharge.records import DischargeCase
from bedside.discharge.store import EncounterStore, comprehension_questions
from bedside.end_reasons import SYSTEM_FAILURES
from bedside.params import BadParameter, validate_parameters
from bedside.prompts import load_yaml, render
from bedside.records import Turn
from bedside.roles import role_model
from bedside.solvers.agent import ChatAgent, utterance_json
from bedside.solvers.discharge.monitor import EducationMonitor, MonitorLayout, MonitorPolicy
from bedside.solvers.orchestrator import run_encounter


def educator_prompt(case: DischargeCase, persona: Persona) -> str:
    return render(
        "discharge/educator.j2",
        age=case.age,
        gender=case.gender,
        race=case.race,
        education_level=persona.label("education_level"),
        health_literacy=persona.label("health_literacy"),
        personality=persona.label("personality"),
        discharge_note=case.discharge_note,
    )


def patient_prompt(case: DischargeCase, persona: Persona, behavior_overlay: str = "") -> str:
    return render(
        "discharge/patient.j2",
        patient_age=case.age,
        patient_gender=case.gender,
        patient_race=case.race,
        personality_description=persona.description("personality"),
        education_level=persona.label("education_level"),
        education_description=persona.description("education_level"),
        health_literacy=persona.label("health_literacy"),
        health_literacy_description=persona.description("health_literacy"),
        behavior_overlay=behavior_overlay,
        chief_complaint=case.chief_complaint,
        main_diagnosis=case.main_diagnosis,
        reason_for_admission=case.reason_for_admission,
        medication_on_admission=case.medications_on_admission,
        allergy=case.allergies,
        medical_history=case.medical_history,
        family_history=case.family_history,
        past_medical_history_recall_level=persona.label("recall_level"),
        past_medical_history_recall_description=persona.description("recall_level"),
    )


def behavior_overlay(behavior: Behavior) -> str:
    """The stress-behaviour text for the patient prompt (bedside extension: CPB-Bench's four
    challenging behaviours as DischargeBench overlays, ``prompts/discharge/stress_overlays.yaml``)."""
    if behavior not in BEHAVIORS:
        raise BadParameter("behavior", f"behavior={behavior!r} is not one of {list(BEHAVIORS)}")
    if behavior == "none":
        return ""
    return load_yaml("discharge/stress_overlays.yaml")["behaviors"][behavior]["overlay"].strip()


@solver
@validate_parameters
def discharge_encounter(
    min_turns: NonNegativeInt = 10,
    max_turns: PositiveInt = 100,
    max_retries: NonNegativeInt = 2,
    parse_retries: NonNegativeInt = 2,
    monitor_layout: MonitorLayout = "paper",
    monitor_policy: MonitorPolicy = "algorithm1",
):
    """Simulate one discharge-education session and ask the comprehension questions.
    ``monitor_layout``, ``monitor_policy``: see :mod:`bedside.solvers.discharge.monitor`."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        case = DischargeCase.model_validate(state.metadata["case"])
        persona = Persona.model_validate(state.metadata["persona"])
        record = store_as(EncounterStore)
        record.persona = persona.model_dump(mode="json")
        transcript().info({"case_id": case.case_id, "persona": record.persona}, source="persona")

        patient_model, patient_fallback = role_model("patient")
        monitor_model, monitor_fallback = role_model("monitor")
        record.role_fallbacks = [r for r, fb in (("patient", patient_fallback), ("monitor", monitor_fallback)) if fb]
        overlay = behavior_overlay(state.metadata.get("behavior", "none"))

        educator = ChatAgent(
            role="educator",
            model=get_model(),
            system_prompt=educator_prompt(case, persona),
            policy="observe",
            protocol=EDUCATOR,
            kickoff=render("discharge/educator_kickoff.j2"),
            parse_retries=parse_retries,
        )
        patient = ChatAgent(
            role="patient",
            model=patient_model,
            system_prompt=patient_prompt(case, persona, overlay),
            policy="moderate",
            protocol=PATIENT,
            render_own=utterance_json,
            parse_retries=parse_retries,
        )
        monitor = EducationMonitor(
            monitor_model, parse_retries=parse_retries, layout=monitor_layout, policy=monitor_policy
        )

        state.messages = educator.messages([])

        def on_turn(turn: Turn) -> None:
            message = ChatMessageAssistant if turn.role == "educator" else ChatMessageUser
            state.messages.append(message(content=turn.message))

        result = await run_encounter(
            [educator, patient],
            monitor,
            min_turns=min_turns,
            max_turns=max_turns,
            max_retries=max_retries,
            on_turn=on_turn,
        )
        record.history = result.history
        record.discards = result.discards
        record.end_reason = result.end_reason
        record.error = result.error
        record.completion_ignored = result.completion_ignored
        record.soft_corrections = result.soft_corrections
        record.unread_observations = result.unread_observations
        state.metadata["end_reason"] = result.end_reason

        if result.history and result.end_reason not in SYSTEM_FAILURES:  # a failed session is not scored
            record.comprehension = await ask_comprehension(patient, result.history)
        record.agent_stats = {"educator": educator.stats, "patient": patient.stats, "monitor": monitor.stats}

        last_educator = next((t.message for t in reversed(result.history) if t.role == "educator"), "")
        state.output = ModelOutput.from_content(model=str(educator.model), content=last_educator)
        return state

    return solve


async def ask_comprehension(patient: ChatAgent, history: list[Turn]) -> list[dict]:
    """The six post-education questions (Figure 9), each asked separately with the full history."""

    async def one(question: dict) -> dict:
        prompt = render("discharge/comprehension_question.j2", question=question["text"])
        try:
            reply = await patient.ask(patient.messages(history, extra_user=prompt), protocol=COMPREHENSION)
            return {"id": question["id"], "question": question["text"], "answer": reply.message, "error": None}
        except GenerationError as ex:
            return {"id": question["id"], "question": question["text"], "answer": None, "error": str(ex)}

    return await collect(*(one(q) for q in comprehension_questions()))
