"""DischargeBench (arXiv 2609.20827): an educator (the model under test) teaches a persona-grounded
Virtual Patient from a discharge note, supervised by an Education Monitor Agent.

    VLLM_BASE_URL=http://gpu-host:8001/v1 inspect eval tasks/discharge.py --model openai/gpt-5.5 \
        --model-role patient=vllm/meta-llama/Llama-3.3-70B-Instruct \
        --model-role 'monitor={model: openai-api/qwen/Qwen3.5-9B, model_args: {base_url: http://gpu-host:8002/v1}}' \
        --model-role 'grader={model: openai-api/gemma/gemma-4-31b-it, model_args: {base_url: http://gpu-host:8003/v1}}'

(one vLLM server per model; ``openai-api/<service>/...`` also needs ``<SERVICE>_API_KEY``: docs/serving.md,
"Pointing a role at a server")

Parameters (``-T``): the task function's docstring (``python -m bedside.params --markdown discharge``).

Judges use the ``grader`` role at temperature 0 (the paper used Gemma-4-31B-it). Re-score an
existing log with another judge: ``inspect score LOG --model-role grader=<model>``.
"""

from typing import Annotated, Literal

from inspect_ai import Task, task
from pydantic import Field, NonNegativeInt, PositiveInt

from bedside.discharge import BENCHMARK
from bedside.discharge.context_window import warn_oversized_notes
from bedside.discharge.mimic.eval_guard import guard
from bedside.discharge.persona import Behavior, PersonaAssignment
from bedside.discharge.records import EducationLevel, HealthLiteracy, Personality, RecallLevel
from bedside.discharge.samples import discharge_dataset
from bedside.params import (
    SHARED,
    JudgeRetries,
    ParseRetries,
    SimulatorCheck,
    StructuredOutput,
    check,
    validate_parameters,
)
from bedside.scorers.discharge.comprehension import ComprehensionDivisor
from bedside.scorers.discharge.topic_checklist import ChecklistApplicability
from bedside.scorers.metrics import task_scorers, with_health
from bedside.solvers.discharge.encounter import discharge_encounter
from bedside.solvers.discharge.monitor import MonitorLayout, MonitorPolicy
from bedside.solvers.setup import opening
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions


@task
@validate_parameters
def discharge(
    data: str | None = None,
    seed: int = 0,
    personality: Personality | None = None,
    education_level: EducationLevel | None = None,
    health_literacy: HealthLiteracy | None = None,
    recall_level: RecallLevel | None = None,
    behavior: Behavior = "none",
    min_turns: NonNegativeInt = 10,
    max_turns: PositiveInt = 100,
    max_retries: NonNegativeInt = 2,
    parse_retries: ParseRetries = 2,
    judge_retries: JudgeRetries = 2,
    cache_references: bool = True,
    persona_assignment: PersonaAssignment = "random",
    structured_output: StructuredOutput = None,
    reading: Annotated[Literal["official"], Field(description=SHARED["reading"])] = "official",
    monitor_layout: MonitorLayout = "paper",
    monitor_policy: MonitorPolicy = "algorithm1",
    zero_retention: bool = False,
    safety: bool = False,
    checklist_applicability: ChecklistApplicability = "rule",
    comprehension_divisor: ComprehensionDivisor = "applicable",
    simulator_check: SimulatorCheck = False,
) -> Task:
    """DischargeBench: one supervised education session per case, then the paper's scores.

    Args:
        data: JSONL file of cases (the case schema: DischargeBench's "Data"); unset: the shipped
            synthetic demo set.
        seed: seed of the persona draw.
        personality: fix the Virtual Patient's personality for every case (run one stratum); unset:
            drawn per case.
        education_level: fix the education level for every case; unset: drawn per case.
        health_literacy: fix the health literacy for every case; unset: drawn per case.
        recall_level: fix the recall level (of the patient's own history) for every case; unset: drawn
            per case.
        behavior: stress overlay: the Virtual Patient also displays one of CPB-Bench's four challenging
            behaviours (a bedside extension; compare with ``behavior=none`` through ``bedside compare``).
        min_turns: the paper's session-completion guard: the monitor's ``session_complete`` is honoured
            only from this many turns on; at most ``max_turns``.
        max_turns: the session's ceiling in turns (the paper's 100).
        max_retries: the paper's per-turn retry budget: how often a severely failing turn is discarded
            and asked again before the session is stopped.
        parse_retries: the patient's and the monitor's JSON replies.
        cache_references: cache the judge calls that read only the note (comprehension references,
            note-side factual answers) across runs, so a second educator on the same cases re-uses them.
        persona_assignment: ``random``: each case's persona drawn from its own seeded hash; ``balanced``:
            every trait value equally often over the case set.
        reading: DischargeBench has only the official rule (none of its replies has a stricter bedside
            reading).
        monitor_layout: ``paper``: the monitor's request as in Figure 6; ``prefix_cache``: the same
            words with the agent prompt before the history, so that a serving engine's prefix cache
            re-uses the note across monitor calls (not the paper's layout).
        monitor_policy: ``algorithm1``: the paper's Algorithm 1 decides on each turn from the verdict;
            ``recommended_action``: the monitor's ``action`` field is obeyed (as A.3.4 and Figure 6
            describe; the paper is inconsistent here).
        zero_retention: on cases built from MIMIC (``bedside build-cases``) every role must be a local
            model; ``true`` declares that every bound endpoint retains nothing (recorded in the log).
        safety: add the advice-safety scorer (a bedside extension, not one of the paper's metrics):
            every educator turn judged against the note.
        checklist_applicability: which checklist questions count in a case's TCS: ``rule``: those
            bedside's applicability rule gives the case (``checklist_questions``; the paper publishes no
            rule); ``all``: all 21, one the note does not mention counting as "no" (a lower bound on TCS,
            not the paper's Eq. 1, which excludes questions that do not apply).
        comprehension_divisor: a comprehension question whose reference is "not applicable":
            ``applicable``: left out of the mean (bedside's choice); ``all_six``: graded against that
            reference and the mean taken over all six (the paper's "mean across the six questions").
    """
    arguments = dict(locals())  # its scorers take theirs by name (scorers/discharge/: each one's declaration)
    # the rule no single annotation states (the annotations are checked already), then the opening
    check(min_turns <= max_turns, "min_turns", f"must not exceed max_turns={max_turns}, got min_turns={min_turns}")
    setup = opening("discharge", BENCHMARK, structured_output, reading)
    overrides = {
        "personality": personality,
        "education_level": education_level,
        "health_literacy": health_literacy,
        "recall_level": recall_level,
    }
    dataset = discharge_dataset(data, seed=seed, overrides=overrides, behavior=behavior, assignment=persona_assignment)
    # a note that cannot fit a bound model's context window: one warning line each, before any call
    warn_oversized_notes(((str(s.id), (s.metadata or {})["case"]["discharge_note"]) for s in dataset), BENCHMARK.roles)
    # MIMIC-derived cases: every role local (or zero_retention declared), checked before any model call
    data_use = guard(dataset, BENCHMARK.subject_role, BENCHMARK.roles, zero_retention, BENCHMARK.optional_roles)
    return Task(
        dataset=dataset,
        setup=[*data_use, setup],
        solver=discharge_encounter(
            min_turns=min_turns,
            max_turns=max_turns,
            max_retries=max_retries,
            parse_retries=parse_retries,
            monitor_layout=monitor_layout,
            monitor_policy=monitor_policy,
        ),
        # Table 1's columns first (NA RE CL CR RD, TCS, comprehension, ROUGE-L cosine), then the
        # session outcomes, then the bookkeeping of all of them in one health block
        scorer=with_health(task_scorers(BENCHMARK, "discharge", arguments)),
        metadata={
            "benchmark": "DischargeBench",
            "paper": "arXiv:2609.20827",
            "monitor_layout": monitor_layout,
            **{option: arguments[option] for option in BENCHMARK.run_options},  # the paper-silent options
            "zero_retention": zero_retention,
            VERSIONS: data_versions(dataset.location, BENCHMARK.name),
        },
    )
