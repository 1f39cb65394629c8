"""CPB-Bench (arXiv 2603.29373): LLM doctors under challenging patient behaviours (information
contradiction, factual inaccuracy, self-diagnosis, care resistance).

    inspect eval tasks/cpb.py@cpb --model openai/gpt-5.5 --model-role grader=... \
        -T data=/path/to/cpb-bench_data [-T language=en] [-T category=care_resistance] \
        [-T dataset=MediTOD] [-T mitigation=self_check] [-T turns=5 --model-role patient=...]
    inspect eval tasks/cpb.py@cpb_control --model ... --model-role grader=... -T data=/path/to/cpb-bench_data

``cpb``: the 692 positive cases; the model under test writes the doctor's next reply to the
conversation segment; the ``grader`` judge decides failure → **failure rate** overall and by
category, dataset and language (lower is better). ``turns=k`` (1-10) continues failed replies with
a ``patient`` role and adds the **persistence rate**.

``cpb_control``: the 352 control cases (ordinary patient turns) with the overreaction judge →
**overreaction rate** overall and per false-alarm type A-D.

ALWAYS REPORT THE FAILURE RATE BESIDE THE OVERREACTION RATE (same model, same mitigation): a doctor
that treats every patient as difficult lowers its failure rate by overreacting, and only the
control set shows it.

Parameters (``-T``): ``data`` (required) the ``cpb-bench_data`` folder (or the upstream repository
root, or one JSON file); ``language`` ``en|zh|all``; ``category`` and ``dataset`` filters (comma
lists allowed); ``mitigation`` ``none|step_by_step|behavior_instruction|analyze_patient|self_check``;
``turns`` (``cpb`` only, 0 = single turn); ``parse_retries`` / ``judge_retries`` for unreadable replies.
"""

from inspect_ai import Task, task

from bedside.records.cpb import HOW_TO_OBTAIN, CPBDataError
from bedside.samples.cpb import control_dataset, positive_dataset
from bedside.scorers.cpb import cpb_failure, cpb_overreaction, cpb_persistence
from bedside.solvers.cpb import MAX_CONTINUATION_TURNS, cpb_continuation, cpb_reply, mitigation_name

PAPER = {"benchmark": "CPB-Bench", "paper": "arXiv:2603.29373"}
REPORT_NOTE = "Report the failure rate (task cpb) beside the overreaction rate (task cpb_control)."


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
) -> Task:
    turns = int(turns)
    if not 0 <= turns <= MAX_CONTINUATION_TURNS:
        raise ValueError(f"turns={turns}: use 0 (single turn) to {MAX_CONTINUATION_TURNS}")
    mitigation = mitigation_name(mitigation)
    solver = [cpb_reply(mitigation, parse_retries)]
    scorer = [cpb_failure(judge_retries)]
    if turns:
        solver.append(cpb_continuation(turns, parse_retries, judge_retries))
        scorer.append(cpb_persistence(judge_retries))
    return Task(
        dataset=positive_dataset(_require(data), language=language, category=category, dataset=dataset),
        solver=solver,
        scorer=scorer,
        metadata={**PAPER, "set": "positive", "mitigation": mitigation, "turns": turns, "report": REPORT_NOTE},
    )


@task
def cpb_control(
    data: str | None = None,
    language: str = "all",
    dataset: str | None = None,
    mitigation: str = "none",
    parse_retries: int = 2,
    judge_retries: int = 2,
) -> Task:
    mitigation = mitigation_name(mitigation)
    return Task(
        dataset=control_dataset(_require(data), language=language, dataset=dataset),
        solver=[cpb_reply(mitigation, parse_retries)],
        scorer=[cpb_overreaction(judge_retries)],
        metadata={**PAPER, "set": "control", "mitigation": mitigation, "report": REPORT_NOTE},
    )
