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

Parameters (``-T``): the task functions' docstrings (``python -m bedside.params --markdown cpb``,
``... --markdown cpb_control``).
"""

from typing import Annotated

from inspect_ai import Task, task
from pydantic import Field

from bedside.cpb import BENCHMARK
from bedside.cpb.judges import DEFAULT_CONTEXT, JudgeContext
from bedside.cpb.records import HOW_TO_OBTAIN, CPBDataError
from bedside.cpb.samples import CategoryFilter, DatasetFilter, LanguageFilter, control_dataset, positive_dataset
from bedside.params import (
    JudgeRetries,
    ParseRetries,
    Reading,
    SimulatorCheck,
    StructuredOutput,
    check,
    validate_parameters,
)
from bedside.scorers.metrics import task_scorers, with_health
from bedside.solvers.cpb import MAX_CONTINUATION_TURNS, MitigationName, cpb_continuation, cpb_reply
from bedside.solvers.setup import opening
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions

PAPER = {"benchmark": "CPB-Bench", "paper": "arXiv:2603.29373"}
REPORT_NOTE = "Report the failure rate (task cpb) beside the overreaction rate (task cpb_control)."


def _require(data: str | None) -> str:
    if not data:
        raise CPBDataError(f"the CPB-Bench tasks need -T data=/path/to/cpb-bench_data. {HOW_TO_OBTAIN}")
    return data


@task
@validate_parameters
def cpb(
    data: str | None = None,
    language: LanguageFilter = "all",
    category: CategoryFilter | None = None,
    dataset: DatasetFilter | None = None,
    mitigation: MitigationName = "none",
    turns: Annotated[int, Field(ge=0, le=MAX_CONTINUATION_TURNS)] = 0,
    parse_retries: ParseRetries = 2,
    judge_retries: JudgeRetries = 2,
    context: JudgeContext = DEFAULT_CONTEXT,
    structured_output: StructuredOutput = None,
    continuation_mitigation: bool = False,
    reading: Reading = "official",
    simulator_check: SimulatorCheck = False,
) -> Task:
    """CPB-Bench's 692 positive cases: the doctor's next reply, judged for failure (lower is better).

    Args:
        data: (required) the ``cpb-bench_data`` folder of the authors' repository, the repository root,
            or one JSON file of cases.
        language: the cases of one language (``en``: ACI and MediTOD; ``zh``: IMCS and MedDG), or all.
        category: only these behaviour categories (comma-separated; the paper's labels, e.g.
            ``Care Resistance``, are accepted too); unset: all four.
        dataset: only these source datasets (comma-separated; ``IMCS`` and ``IMCS21`` both name the
            IMCS-21 corpus); unset: all.
        mitigation: the doctor's mitigation strategy: ``step_by_step`` (reason, then the reply after
            "Final Doctor's Response:"), ``behavior_instruction`` (all four behaviours described),
            ``analyze_patient`` (analyse the patient's message, then reply), ``self_check`` (draft,
            review, revise); the authors' names (``cot``, ``instruction``, ``eval_patient``,
            ``self_eval``) are accepted too.
        turns: 0: single turn (the paper's main table); 1 to 10: a failed reply is continued for up to
            this many rounds with a ``patient`` role and the persistence rate is added (10 is the official
            multi-turn experiment).
        parse_retries: the doctor's replies (and the continuation patient's).
        judge_retries: the official code counts an unreadable verdict as "not failure".
        context: what the failure judge sees besides the reply: ``full_context`` (the whole segment, as
            in the official runs), ``current_turn`` (nothing more) or ``min_turn`` (the doctor's previous
            turn and the patient's answer).
        structured_output: the official code uses one for the overreaction judge.
        continuation_mitigation: ``false``: continuation turns use the plain doctor prompt, as upstream;
            ``true``: they use ``mitigation`` too (a bedside extension).
        reading: the official code reads a judge's verdict as the first True/False anywhere in its reply.
        simulator_check: only with ``turns`` (a single-turn sample's patient is the data's).
    """
    arguments = dict(locals())  # its scorers take theirs by name (scorers/cpb/: each one's declaration)
    # the opening (the annotations are checked already); the data comes last
    setup = opening("cpb", BENCHMARK, structured_output, reading)
    check(
        turns > 0 or not simulator_check,
        "simulator_check",
        "needs the multi-turn continuation (-T turns=N): a single-turn sample's patient is the data's, not simulated",
    )
    solver = [cpb_reply(mitigation, parse_retries)]
    if turns:
        solver.append(cpb_continuation(turns, parse_retries, judge_retries, context, mitigate=continuation_mitigation))
    return Task(
        dataset=positive_dataset(_require(data), language=language, category=category, dataset=dataset),
        setup=setup,
        solver=solver,
        scorer=with_health(task_scorers(BENCHMARK, "cpb", arguments)),
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
@validate_parameters
def cpb_control(
    data: str | None = None,
    language: LanguageFilter = "all",
    dataset: DatasetFilter | None = None,
    mitigation: MitigationName = "none",
    parse_retries: ParseRetries = 2,
    judge_retries: JudgeRetries = 2,
    structured_output: StructuredOutput = None,
    reading: Reading = "official",
) -> Task:
    """CPB-Bench's 352 control cases (ordinary patient turns): the doctor's reply, judged for overreaction.

    Args:
        data: (required) the ``cpb-bench_data`` folder of the authors' repository, the repository root,
            or one JSON file of controls.
        language: the cases of one language (``en``: ACI and MediTOD; ``zh``: IMCS21 and MedDG), or all.
        dataset: only these source datasets (comma-separated; ``IMCS`` and ``IMCS21`` both name the
            IMCS-21 corpus); unset: all.
        mitigation: the doctor's mitigation strategy, as in ``cpb`` (run the same one on both sets).
        parse_retries: the doctor's replies.
        structured_output: the official code uses one for the overreaction judge.
    """
    arguments = dict(locals())  # its scorers take theirs by name (scorers/cpb/: each one's declaration)
    # the opening (the annotations are checked already); the data comes last
    setup = opening("cpb_control", BENCHMARK, structured_output, reading)
    return Task(
        dataset=control_dataset(_require(data), language=language, dataset=dataset),
        setup=setup,
        solver=[cpb_reply(mitigation, parse_retries)],
        scorer=with_health(task_scorers(BENCHMARK, "cpb_control", arguments)),
        metadata={
            **PAPER,
            "set": "control",
            "mitigation": mitigation,
            "report": REPORT_NOTE,
            VERSIONS: data_versions(_require(data), "cpb"),
        },
    )
