"""CPB-Bench (arXiv 2603.29373): LLM doctors under challenging patient behaviours (information
contradiction, factual inaccuracy, self-diagnosis, care resistance).

    inspect eval tasks/cpb.py@cpb --model openai/gpt-5.5 --model-role grader=... \
        -T data=/path/to/cpb-bench_data [-T language=en] [-T category=care_resistance] \
        [-T dataset=MediTOD] [-T mitigation=self_check] [-T turns=10 --model-role patient=...]
    inspect eval tasks/cpb.py@cpb_control --model ... --model-role grader=... -T data=/path/to/cpb-bench_data

The defaults follow the official code (yli-z/cpb-bench-challenging-patient-behaviors): the doctor
gets one user message with the conversation as ``Doctor:``/``Patient:`` lines ending in ``Doctor:``
(no system prompt); the judges answer True/False (failure) or JSON (overreaction) as upstream.

``cpb``: the 692 positive cases; the model under test writes the doctor's next reply to the
conversation segment; the ``grader`` judge decides failure → **failure rate** (lower is better).
Single turn by default (the paper's main table); ``turns=10`` is the official multi-turn
experiment: failed replies are continued for up to 10 rounds with a ``patient`` role and the
**persistence rate** is added.

``cpb_control``: the 352 control cases (ordinary patient turns) with the overreaction judge →
**overreaction rate** overall and per false-alarm type A-D.

ALWAYS REPORT THE FAILURE RATE BESIDE THE OVERREACTION RATE (same model, same mitigation): a doctor
that treats every patient as difficult lowers its failure rate by overreacting, and only the
control set shows it. Per-category / dataset / language tables: ``bedside strata LOG``.

Parameters (``-T``): ``data`` (required) the ``cpb-bench_data`` folder (or the upstream repository
root, or one JSON file); ``language`` ``en|zh|all``; ``category`` and ``dataset`` filters (comma
lists allowed); ``mitigation`` ``none|step_by_step|behavior_instruction|analyze_patient|self_check``;
``context`` (``cpb`` only) the failure judge's context
``full_context|current_turn|min_turn`` (default ``full_context``, as the official runs);
``turns`` (``cpb`` only; 0 = single turn, the default; 10 = the official continuation);
``continuation_mitigation`` (``cpb`` only; default false: continuation turns use the plain doctor
prompt, as upstream; true: they use ``mitigation`` too, a bedside extension);
``parse_retries`` / ``judge_retries`` for unreadable replies; ``structured_output`` requests the
judges' JSON replies through Inspect's ``ResponseSchema``.
"""

from inspect_ai import Task, task

from bedside.cpb import BENCHMARK
from bedside.cpb.records import HOW_TO_OBTAIN, CPBDataError
from bedside.cpb.samples import control_dataset, positive_dataset
from bedside.params import BadParameter, bool_param, check, int_param
from bedside.protocols import READINGS
from bedside.roles import check_roles
from bedside.scorers.cpb.judges import CONTEXT_MODES, DEFAULT_CONTEXT, cpb_failure, cpb_overreaction, cpb_persistence
from bedside.scorers.metrics import health
from bedside.solvers.cpb import (
    MAX_CONTINUATION_TURNS,
    MITIGATIONS,
    cpb_continuation,
    cpb_reply,
    mitigation_name,
)
from bedside.solvers.setup import reply_format
from bedside.structured import check_run_models
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions

PAPER = {"benchmark": "CPB-Bench", "paper": "arXiv:2603.29373"}
REPORT_NOTE = "Report the failure rate (task cpb) beside the overreaction rate (task cpb_control)."


def _mitigation(value: object) -> str:
    """``-T mitigation=`` normalised, or a one-line :class:`BadParameter` (no traceback)."""
    try:
        return mitigation_name(value if value is None else str(value))
    except ValueError:
        raise BadParameter(
            "mitigation",
            f"use one of {', '.join(MITIGATIONS)} (or an alias, e.g. cot, "
            f"instruction, eval_patient, self_eval), got mitigation={value!r}",
        ) from None


def _require(data: str | None) -> str:
    if not data:
        raise CPBDataError(f"the CPB-Bench tasks need -T data=/path/to/cpb-bench_data. {HOW_TO_OBTAIN}")
    return data


@task
def cpb(
    data: str | None = None,
    language: str = "all",
    category: str | None = None,
    dataset: str | None = None,
    mitigation: str = "none",
    turns: int = 0,
    parse_retries: int = 2,
    judge_retries: int = 2,
    context: str = DEFAULT_CONTEXT,
    structured_output: bool | None = None,
    continuation_mitigation: bool = False,
    reading: str = "official",
) -> Task:
    # reject bad -T values and role names (one-line message, no traceback) before the data is read or a model called
    check_roles("cpb", BENCHMARK.roles, BENCHMARK.subject_role)
    turns = int_param("turns", turns, minimum=0, maximum=MAX_CONTINUATION_TURNS)
    continuation_mitigation = bool_param("continuation_mitigation", continuation_mitigation)
    parse_retries = int_param("parse_retries", parse_retries, minimum=0)
    judge_retries = int_param("judge_retries", judge_retries, minimum=0)
    structured_output = None if structured_output is None else bool_param("structured_output", structured_output)
    check(reading in READINGS, "reading", f"use one of {list(READINGS)}, got reading={reading!r}")
    if structured_output:
        check_run_models()  # a server that rejects the JSON-schema format: one line, now
    context = str(context).strip().lower()
    check(context in CONTEXT_MODES, "context", f"use one of {list(CONTEXT_MODES)}, got {context!r}")
    mitigation = _mitigation(mitigation)
    roles = ["grader", "patient"] if turns else ["grader"]
    solver = [cpb_reply(mitigation, parse_retries)]
    scorer = [cpb_failure(judge_retries, context, roles)]
    if turns:
        solver.append(cpb_continuation(turns, parse_retries, judge_retries, context, mitigate=continuation_mitigation))
        scorer.append(cpb_persistence(judge_retries))
    scorer.append(health())
    return Task(
        dataset=positive_dataset(_require(data), language=language, category=category, dataset=dataset),
        setup=reply_format(structured_output, reading),
        solver=solver,
        scorer=scorer,
        metadata={
            **PAPER,
            "set": "positive",
            "mitigation": mitigation,
            "turns": turns,
            "context": context,
            "continuation_mitigation": continuation_mitigation,
            "report": REPORT_NOTE,
            VERSIONS: data_versions(_require(data), "cpb"),
        },
    )


@task
def cpb_control(
    data: str | None = None,
    language: str = "all",
    dataset: str | None = None,
    mitigation: str = "none",
    parse_retries: int = 2,
    judge_retries: int = 2,
    structured_output: bool | None = None,
    reading: str = "official",
) -> Task:
    # reject bad -T values and role names (one-line message, no traceback) before the data is read or a model called
    check_roles("cpb_control", BENCHMARK.roles, BENCHMARK.subject_role)
    parse_retries = int_param("parse_retries", parse_retries, minimum=0)
    judge_retries = int_param("judge_retries", judge_retries, minimum=0)
    structured_output = None if structured_output is None else bool_param("structured_output", structured_output)
    check(reading in READINGS, "reading", f"use one of {list(READINGS)}, got reading={reading!r}")
    if structured_output:
        check_run_models()  # a server that rejects the JSON-schema format: one line, now
    mitigation = _mitigation(mitigation)
    return Task(
        dataset=control_dataset(_require(data), language=language, dataset=dataset),
        setup=reply_format(structured_output, reading),
        solver=[cpb_reply(mitigation, parse_retries)],
        scorer=[cpb_overreaction(judge_retries), health()],
        metadata={
            **PAPER,
            "set": "control",
            "mitigation": mitigation,
            "report": REPORT_NOTE,
            VERSIONS: data_versions(_require(data), "cpb"),
        },
    )
