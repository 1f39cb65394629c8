"""What every bedside task does first: :func:`opening`, while Inspect builds the task, and the per-sample
set-up it returns (``Task(setup=...)``, :func:`reply_format`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inspect_ai.model import get_model, model_roles
from inspect_ai.solver import Generate, Solver, TaskState, solver

from bedside.params import validate_parameters
from bedside.protocols import ReadingRule, use_reading, use_structured_output
from bedside.roles import check_roles
from bedside.structured import check_models, check_run_models

if TYPE_CHECKING:
    from bedside.benchmark import Benchmark


def opening(
    task: str, benchmark: Benchmark | None, structured_output: bool | None = None, reading: ReadingRule = "official"
) -> Solver:
    """The opening of task ``task``, before it reads any data: the bound model roles checked against its
    benchmark's (:func:`bedside.roles.check_roles`; ``benchmark`` None: a task with no role but the model under
    test), and, when ``structured_output`` is asked for, the servers of the run's models probed (one line naming
    a server that rejects the JSON-schema format, :func:`bedside.structured.check_run_models`). Returns the
    task's per-sample set-up: :func:`reply_format` of ``structured_output`` and ``reading``."""
    if benchmark is None:
        check_roles(task, ())
    else:
        check_roles(task, benchmark.roles, benchmark.subject_role)
    if structured_output:
        check_run_models()
    return reply_format(structured_output, reading)


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
