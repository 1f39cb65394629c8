"""CPB-Bench single turn (:func:`cpb_reply`): the doctor's reply to the conversation segment, with an
optional mitigation strategy (module docstring of :mod:`bedside.solvers.cpb`)."""

from __future__ import annotations

from inspect_ai.log import transcript
from inspect_ai.model import ChatMessageAssistant, ModelOutput
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import store_as
from pydantic import NonNegativeInt

from bedside.calls import GenerationError
from bedside.cpb.judges import DOCTOR_ROLE, load_case
from bedside.cpb.store import CPBStore
from bedside.params import validate_parameters
from bedside.solvers.cpb.doctor import MitigationName, make_doctor


@solver
@validate_parameters
def cpb_reply(mitigation: MitigationName = "none", parse_retries: NonNegativeInt = 2):
    """The doctor's reply to the conversation segment, with an optional mitigation strategy (any of its
    spellings: :data:`~bedside.solvers.cpb.doctor.MitigationName`)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        case = load_case(state.metadata)
        record = store_as(CPBStore)
        record.mitigation = mitigation
        doctor = make_doctor(case, mitigation, parse_retries)
        state.messages = doctor.messages([])
        try:
            reply = await doctor.reply([], None, 0)
        except GenerationError as ex:
            record.error = str(ex)
            transcript().info({"case_id": case.case_id, "error": record.error}, source="cpb")
            state.output = ModelOutput.from_content(model=str(doctor.model), content="")
            record.agent_stats = {DOCTOR_ROLE: doctor.stats}
            return state
        record.reply = reply.message
        record.trace = {k: v for k, v in reply.data.items() if v is not None}
        record.agent_stats = {DOCTOR_ROLE: doctor.stats}
        state.messages = [*doctor.last_messages, ChatMessageAssistant(content=reply.message)]
        state.output = ModelOutput.from_content(model=str(doctor.model), content=reply.message)
        return state

    return solve
