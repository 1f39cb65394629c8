"""Per-sample set-up shared by every bedside task (``Task(setup=...)``)."""

from __future__ import annotations

from inspect_ai.solver import Generate, TaskState, solver

from bedside.protocols import use_structured_output


@solver
def reply_format(structured_output: bool = False):
    """``-T structured_output=true``: every JSON reply (patient, monitor, judges, ...) is requested
    through Inspect's ``ResponseSchema`` built from the protocol's reply model, for API models that
    support structured output (OpenAI, vLLM's guided decoding, ...). Off by default: the papers'
    prompts ask for JSON in plain text, and bedside reads (and repairs) it either way."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        use_structured_output(structured_output)
        return state

    return solve
