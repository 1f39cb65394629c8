"""Solvers of the MIMIC-IV-Ext-DischargeBench builder (``tasks/discharge_build_cases.py``).

- :func:`data_use_guard`: per-sample set-up that refuses a non-local model before any model call
  (:func:`bedside.discharge.mimic.data_use.check_endpoint`); the task function checks too, when Inspect
  resolves it with the model already known (``inspect eval``, ``eval(task_function, ...)``).
- :func:`extract_case`: one extraction call (protocol ``mimic.extract``, retried while the reply is
  unreadable), assembled into a :class:`DischargeCase` record with its audit rows; the result goes to
  the sample store (``build_cases``) and the output (the case JSON, or the reason it is invalid).
"""

from __future__ import annotations

import json

from inspect_ai.log import transcript
from inspect_ai.model import ChatMessageUser, ModelOutput, get_model
from inspect_ai.solver import Generate, TaskState, solver

from bedside.calls import ask
from bedside.discharge.mimic.data_use import check_endpoint, model_identity
from bedside.discharge.mimic.extract import RESULT_KEY, assemble
from bedside.discharge.mimic.protocol import EXTRACT
from bedside.prompts import render


@solver
def data_use_guard(zero_retention: bool = False):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model = get_model()
        check_endpoint(model, zero_retention)  # raises DataUseRefused: the sample fails, nothing sent
        name, base_url = model_identity(model)
        transcript().info(
            {"data_use": "allowed", "model": name, "base_url": base_url, "zero_retention": zero_retention},
            source="build_cases",
        )
        return state

    return solve


def extraction_prompt(record: dict) -> str:
    return render(
        "discharge/mimic/extract_fields.j2",
        discharge_note=record["discharge_note"],
        icd_version=record["icd_version"],
        icd_code=record["icd_code"],
        icd_title=record.get("icd_title", ""),
    )


@solver
def extract_case(retries: int = 2, cache: bool = False):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        record = dict(state.metadata)
        messages = [ChatMessageUser(content=extraction_prompt(record))]
        state.messages = list(messages)
        result = await ask(get_model(), messages, EXTRACT, retries=retries, cache=cache)
        last = result.replies[-1] if result.replies else ""
        problem = result.error.replace("judge", "extraction") if result.error else None
        assembled = assemble(record, result.value, problem=problem, last_reply=last)
        state.store.set(
            RESULT_KEY,
            {
                "case": assembled.case,
                "problem": assembled.problem,
                "stage": assembled.stage,
                "audit": assembled.audit,
                "last_reply": assembled.last_reply,
                "attempts": len(result.replies),
            },
        )
        text = (
            json.dumps(assembled.case, ensure_ascii=False)
            if assembled.case
            else f"INVALID ({assembled.stage}): {assembled.problem}"
        )
        state.output = ModelOutput.from_content(model=str(get_model()), content=text)
        return state

    return solve
