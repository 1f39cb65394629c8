"""MedSP1000 (arXiv 2606.05112): a clinical agent (the model under test) runs standardized-patient
encounters in closed loop with a patient agent and an environment controller, and is scored against
frozen ACGME rubrics by an evaluator.

    inspect eval tasks/medsp.py --model openai/gpt-5.5 \
        --model-role patient=... --model-role environment=... --model-role grader=...

Parameters (``-T``): the task function's docstring (``python -m bedside.params --markdown medsp``).
"""

from inspect_ai import Task, task
from pydantic import NonNegativeInt, PositiveInt

from bedside.medsp import BENCHMARK
from bedside.medsp.samples import medsp_dataset
from bedside.params import (
    BadParameter,
    JudgeRetries,
    ParseRetries,
    Reading,
    SimulatorCheck,
    StructuredOutput,
    validate_parameters,
)
from bedside.scorers.metrics import task_scorers, with_health
from bedside.solvers.medsp import BonSelector, OfficialPromptsError, Scaling, load_prompt_set, medsp_encounter
from bedside.solvers.setup import opening
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions


@task
@validate_parameters
def medsp(
    data: str | None = None,
    rubrics: str | None = None,
    subset: str | None = None,
    max_turns: PositiveInt = 12,
    scaling: Scaling = "none",
    n: PositiveInt = 5,
    panel_size: PositiveInt = 5,
    panel_rounds: NonNegativeInt = 1,
    bon_selector: BonSelector = "self_critic",
    prompts: str | None = None,
    parse_retries: ParseRetries = 2,
    judge_retries: JudgeRetries = 2,
    judge_batch_size: PositiveInt | None = None,
    structured_output: StructuredOutput = None,
    reading: Reading = "official",
    simulator_check: SimulatorCheck = False,
) -> Task:
    """MedSP1000: one closed-loop standardized-patient encounter per scenario, scored on its frozen rubric.

    Args:
        data: scenario folder ``<root>/<case_id>/<scenarioN>/{examinee,sp_actor,environment_controller,evaluator}/``
            (folders that do not follow it are reported by name); unset: the shipped synthetic demo set.
        rubrics: separate folder of frozen rubrics ``<case_id>_<scenarioN>.json`` (as in the release);
            unset: next to the scenarios.
        subset: ``q100`` (MedSP1000-Q100, from the release's ``subset.json``) or the path of a subset
            file; unset: every scenario.
        max_turns: examinee turns in all (all scenario states together; the examinee is not told).
        scaling: test-time scaling of the examinee: ``none`` (the model's own settings), ``single`` (the
            official control: temperature 0), ``best_of_n`` (``n`` candidates, one picked by
            ``bon_selector``) or ``panel`` (``panel_size`` specialists voting for ``panel_rounds`` rounds).
        n: candidates per turn under ``scaling=best_of_n``.
        panel_size: specialists under ``scaling=panel``.
        panel_rounds: voting rounds under ``scaling=panel``.
        bon_selector: how ``best_of_n`` picks: ``self_critic`` (the official selector call: the examinee
            model chooses among the candidates) or ``majority`` (bedside's self-consistency vote over the
            candidates' actions).
        prompts: path of a clone of the official repository (MAGIC-AI4Med/MedSP1000): use its prompt
            texts; unset: bedside's wording.
        parse_retries: the agents' replies (examinee, patient, environment).
        judge_retries: the evaluator's replies.
        judge_batch_size: rubric items per evaluator call; unset: the whole rubric in one call, as in the
            official code.
        reading: ``official``: the evaluator's keys counted as the official counter counts them;
            ``strict``: every rubric item must be judged.
    """
    arguments = dict(locals())  # its scorers take theirs by name (scorers/medsp/: each one's declaration)
    # the opening, then the prompt set (the annotations are checked already)
    setup = opening("medsp", BENCHMARK, structured_output, reading)
    try:
        load_prompt_set(prompts)
    except OfficialPromptsError as ex:
        raise BadParameter("prompts", str(ex)) from ex
    dataset, report = medsp_dataset(data, rubrics=rubrics, subset=subset)
    return Task(
        dataset=dataset,
        setup=setup,
        solver=medsp_encounter(
            max_turns=max_turns,
            scaling=scaling,
            n=n,
            panel_size=panel_size,
            panel_rounds=panel_rounds,
            bon_selector=bon_selector,
            parse_retries=parse_retries,
            prompts=prompts,
        ),
        scorer=with_health(task_scorers(BENCHMARK, "medsp", arguments)),
        metadata={
            "benchmark": "MedSP1000",
            "paper": "arXiv:2606.05112",
            "data_report": report.model_dump(),
            "prompts": load_prompt_set(prompts).name,
            VERSIONS: data_versions(report.data, "medsp", rubrics=report.rubrics, subset=report.subset_file),
        },
    )
