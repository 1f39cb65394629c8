"""Per-sample set-up shared by every bedside task (``Task(setup=...)``)."""

from __future__ import annotations

from inspect_ai.model import get_model, model_roles
from inspect_ai.solver import Generate, TaskState, solver

from bedside.params import validate_parameters
from bedside.protocols import ReadingRule, use_reading, use_structured_output
from bedside.structured import check_models


@solver
@validate_parameters
def reply_format(structured_output: bool | None = None, reading: ReadingRule = "official"):
    """How replies are requested and read, per sample (so that ``inspect score`` on a log keeps it).

    ``structured_output`` (``-T structured_output=``): ``true`` requests every JSON reply (patient,
    monitor, judges, ...) through Inspect's ``ResponseSchema`` built from the protocol's reply model,
    for API models that support structured output (OpenAI, vLLM's guided decoding, ...); the servers of
    the run's models are probed first and a server that rejects the format stops the run with one line
    (:mod:`bedside.structured`). ``false``: never. Unset (``auto``): only where the official code asks
    with a schema (protocols marked ``structured_where_supported``), on providers known to support it; the papers' other
    prompts ask for JSON in plain text, and bedside reads (and repairs) it either way.

    ``reading`` (``-T reading=``): ``official`` (default) reads replies by the official benchmarks'
    rules; ``strict`` uses bedside's stricter reading where it differs (docs/reading-replies.md)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        use_structured_output(structured_output)
        use_reading(reading)
        if structured_output:
            roles = [m for v in model_roles().values() for m in (v if isinstance(v, list) else [v])]
            await check_models([get_model(), *roles])
        return state

    return solve
