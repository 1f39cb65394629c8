"""MedSP1000 (arXiv 2606.05112): a clinical agent (the model under test) runs standardized-patient
encounters in closed loop with a patient agent and an environment controller, and is scored against
frozen ACGME rubrics by an evaluator.

    inspect eval tasks/medsp.py --model openai/gpt-5.5 \
        --model-role patient=... --model-role environment=... --model-role grader=...

Parameters (``-T``): ``data`` scenario folder ``<root>/<case_id>/<scenarioN>/<role>/`` (default: the
synthetic demo set); ``rubrics`` separate rubric folder (``<case_id>_<scenarioN>.json``);
``subset`` ``q100`` (MedSP1000-Q100, from the release's ``subset.json``) or a subset file path;
``max_turns`` examinee turns (12); ``scaling`` ``none`` | ``best_of_n`` | ``panel`` with ``n``
samples (5) or ``panel_size`` specialists (5); ``parse_retries`` and ``judge_retries`` for
unreadable replies; ``judge_batch_size`` rubric items per evaluator call (40).
"""

from inspect_ai import Task, task

from bedside.samples.medsp import medsp_dataset
from bedside.scorers.medsp import medsp_rubric
from bedside.solvers.medsp import medsp_encounter


@task
def medsp(
    data: str | None = None,
    rubrics: str | None = None,
    subset: str | None = None,
    max_turns: int = 12,
    scaling: str = "none",
    n: int = 5,
    panel_size: int = 5,
    parse_retries: int = 2,
    judge_retries: int = 2,
    judge_batch_size: int = 40,
) -> Task:
    dataset, report = medsp_dataset(data, rubrics=rubrics, subset=subset)
    return Task(
        dataset=dataset,
        solver=medsp_encounter(
            max_turns=max_turns, scaling=scaling, n=n, panel_size=panel_size, parse_retries=parse_retries
        ),
        scorer=[medsp_rubric(retries=judge_retries, batch_size=judge_batch_size)],
        metadata={"benchmark": "MedSP1000", "paper": "arXiv:2606.05112", "data_report": report.model_dump()},
    )
