"""DischargeBench (arXiv 2609.20827): an educator (the model under test) teaches a persona-grounded
Virtual Patient from a discharge note, supervised by an Education Monitor Agent.

    inspect eval tasks/discharge.py --model openai/gpt-5.5 \
        --model-role patient=vllm/meta-llama/Llama-3.3-70B-Instruct \
        --model-role monitor=vllm/Qwen/Qwen3.5-9B --model-role grader=...

Parameters (``-T``): ``data`` JSONL case file (default: the synthetic demo set); ``seed`` for the
persona draw; ``personality`` / ``education_level`` / ``health_literacy`` / ``recall_level`` to
fix a persona stratum; ``min_turns`` (10), ``max_turns`` (100), ``max_retries`` (2) as in the
paper; ``parse_retries`` for unreadable JSON replies.
"""

from inspect_ai import Task, task

from bedside.samples.discharge import discharge_dataset
from bedside.scorers.encounter_outcome import encounter_outcome
from bedside.solvers.discharge import discharge_encounter


@task
def discharge(
    data: str | None = None,
    seed: int = 0,
    personality: str | None = None,
    education_level: str | None = None,
    health_literacy: str | None = None,
    recall_level: str | None = None,
    min_turns: int = 10,
    max_turns: int = 100,
    max_retries: int = 2,
    parse_retries: int = 2,
) -> Task:
    overrides = {
        "personality": personality,
        "education_level": education_level,
        "health_literacy": health_literacy,
        "recall_level": recall_level,
    }
    return Task(
        dataset=discharge_dataset(data, seed=seed, overrides=overrides),
        solver=discharge_encounter(
            min_turns=min_turns, max_turns=max_turns, max_retries=max_retries, parse_retries=parse_retries
        ),
        scorer=[encounter_outcome()],
        metadata={"benchmark": "DischargeBench", "paper": "arXiv:2609.20827"},
    )
