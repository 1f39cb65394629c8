"""MedSP1000 (arXiv 2606.05112): a clinical agent (the model under test) runs standardized-patient
encounters in closed loop with a patient agent and an environment controller, and is scored against
frozen ACGME rubrics by an evaluator.

    inspect eval tasks/medsp.py --model openai/gpt-5.5 \
        --model-role patient=... --model-role environment=... --model-role grader=...

Parameters (``-T``): ``data`` scenario folder ``<root>/<case_id>/<scenarioN>/<role>/`` (default: the
synthetic demo set); ``rubrics`` separate rubric folder (``<case_id>_<scenarioN>.json``);
``subset`` ``q100`` (MedSP1000-Q100, from the release's ``subset.json``) or a subset file path;
``max_turns`` examinee turns (12, all scenario states together); ``scaling`` ``none`` | ``single`` |
``best_of_n`` | ``panel`` with ``n`` candidates (5; ``bon_selector`` ``self_critic`` or ``majority``) or
``panel_size`` specialists (5) and ``panel_rounds`` voting rounds (1); ``prompts`` the path of a clone of
the official MedSP1000 repository to use its prompt texts instead of bedside's wording; ``parse_retries``
and ``judge_retries`` for unreadable replies; ``judge_batch_size`` rubric items per evaluator call (default:
the whole rubric in one call, as in the official code; 1 or more splits long rubrics);
``structured_output`` requests JSON replies through Inspect's structured output.
"""

from inspect_ai import Task, task

from bedside.medsp import BENCHMARK
from bedside.medsp.samples import medsp_dataset
from bedside.params import BadParameter, bool_param, check, int_param
from bedside.protocols import READINGS
from bedside.roles import check_roles
from bedside.scorers.medsp.rubric import medsp_rubric
from bedside.scorers.metrics import health
from bedside.solvers.medsp import SCALING, SELECTORS, OfficialPromptsError, load_prompt_set, medsp_encounter
from bedside.solvers.setup import reply_format
from bedside.structured import check_run_models
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions


@task
def medsp(
    data: str | None = None,
    rubrics: str | None = None,
    subset: str | None = None,
    max_turns: int = 12,
    scaling: str = "none",
    n: int = 5,
    panel_size: int = 5,
    panel_rounds: int = 1,
    bon_selector: str = "self_critic",
    prompts: str | None = None,
    parse_retries: int = 2,
    judge_retries: int = 2,
    judge_batch_size: int | None = None,
    structured_output: bool | None = None,
    reading: str = "official",
) -> Task:
    # reject bad -T values (one-line message, no traceback) before the data is read or a model called
    check_roles("medsp", BENCHMARK.roles, BENCHMARK.subject_role)
    max_turns = int_param("max_turns", max_turns, minimum=1)
    n = int_param("n", n, minimum=1)
    panel_size = int_param("panel_size", panel_size, minimum=1)
    parse_retries = int_param("parse_retries", parse_retries, minimum=0)
    judge_retries = int_param("judge_retries", judge_retries, minimum=0)
    if judge_batch_size is not None:  # None: the whole rubric in one evaluator call
        judge_batch_size = int_param("judge_batch_size", judge_batch_size, minimum=1)
    panel_rounds = int_param("panel_rounds", panel_rounds, minimum=0)
    check(scaling in SCALING, "scaling", f"scaling={scaling!r}: choose one of {list(SCALING)}")
    check(bon_selector in SELECTORS, "bon_selector", f"bon_selector={bon_selector!r}: choose one of {list(SELECTORS)}")
    structured_output = None if structured_output is None else bool_param("structured_output", structured_output)
    check(reading in READINGS, "reading", f"use one of {list(READINGS)}, got reading={reading!r}")
    if structured_output:
        check_run_models()  # a server that rejects the JSON-schema format: one line, now
    try:
        load_prompt_set(prompts)
    except OfficialPromptsError as ex:
        raise BadParameter("prompts", str(ex)) from ex
    dataset, report = medsp_dataset(data, rubrics=rubrics, subset=subset)
    return Task(
        dataset=dataset,
        setup=reply_format(structured_output, reading),
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
        scorer=[medsp_rubric(retries=judge_retries, batch_size=judge_batch_size or 0, prompts=prompts), health()],
        metadata={
            "benchmark": "MedSP1000",
            "paper": "arXiv:2606.05112",
            "data_report": report.model_dump(),
            "prompts": load_prompt_set(prompts).name,
            VERSIONS: data_versions(report.data, "medsp", rubrics=report.rubrics, subset=report.subset_file),
        },
    )
