"""DischargeBench (arXiv 2609.20827): an educator (the model under test) teaches a persona-grounded
Virtual Patient from a discharge note, supervised by an Education Monitor Agent.

    VLLM_BASE_URL=http://gpu-host:8001/v1 inspect eval tasks/discharge.py --model openai/gpt-5.5 \
        --model-role patient=vllm/meta-llama/Llama-3.3-70B-Instruct \
        --model-role 'monitor={model: openai-api/qwen/Qwen3.5-9B, model_args: {base_url: http://gpu-host:8002/v1}}' \
        --model-role 'grader={model: openai-api/gemma/gemma-4-31b-it, model_args: {base_url: http://gpu-host:8003/v1}}'

(one vLLM server per model; ``openai-api/<service>/...`` also needs ``<SERVICE>_API_KEY``: the README's
"Pointing a role at a server")

Parameters (``-T``): ``data`` JSONL case file (default: the synthetic demo set); ``seed`` for the
persona draw; ``personality`` / ``education_level`` / ``health_literacy`` / ``recall_level`` to
fix a persona stratum; ``behavior`` (``none`` | ``contradiction`` | ``false_belief`` |
``self_diagnosis`` | ``care_resistance``) makes the patient display one of CPB-Bench's challenging
behaviours (a bedside extension; compare with ``behavior=none`` via ``bedside compare``);
``persona_assignment`` ``random`` (per-case seeded draw, default) or ``balanced`` (every trait value
equally often; :mod:`bedside.discharge.persona`); ``structured_output`` requests JSON replies through Inspect's
``ResponseSchema`` (for API models that support it); ``monitor_layout`` ``paper`` (Figure 6 as
published, default) or ``prefix_cache`` (the agent prompt before the history, same words: a
serving engine's prefix cache then re-uses the note across monitor calls; not the paper's layout);
``monitor_policy`` ``algorithm1`` (default: the paper's Algorithm 1 decides) or ``recommended_action``
(the monitor's ``action`` field is obeyed, as A.3.4 and Figure 6 describe); on cases built from MIMIC
(``bedside build-cases``) every role must be local unless ``zero_retention=true`` declares that the
endpoints retain nothing (:mod:`bedside.discharge.mimic.eval_guard`);
``min_turns`` (10), ``max_turns`` (100), ``max_retries`` (2) as in the
paper; ``parse_retries`` for unreadable JSON replies; ``judge_retries`` for unreadable judge
replies (then the sub-score is unscored and counted); ``cache_references`` caches the judge calls
that read only the note (comprehension references, note-side factual answers) across runs.
``safety`` (default false) adds the advice-safety scorer (a bedside extension, not one of the
paper's metrics: every educator turn judged against the note, :mod:`bedside.scorers.discharge.advice_safety`).

Judges use the ``grader`` role at temperature 0 (the paper used Gemma-4-31B-it). Re-score an
existing log with another judge: ``inspect score LOG --model-role grader=<model>``.
"""

from inspect_ai import Task, task

from bedside.discharge import BENCHMARK
from bedside.discharge.context_window import warn_oversized_notes
from bedside.discharge.mimic.eval_guard import guard
from bedside.discharge.samples import discharge_dataset
from bedside.params import bool_param, check, int_param
from bedside.roles import check_roles
from bedside.scorers.discharge.advice_safety import advice_safety
from bedside.scorers.discharge.comprehension import comprehension
from bedside.scorers.discharge.conversation_quality import conversation_quality
from bedside.scorers.discharge.encounter_outcome import encounter_outcome
from bedside.scorers.discharge.factual_consistency import factual_consistency
from bedside.scorers.discharge.topic_checklist import topic_checklist
from bedside.scorers.metrics import health
from bedside.solvers.discharge.encounter import behavior_overlay, discharge_encounter
from bedside.solvers.discharge.monitor import POLICIES as MONITOR_POLICIES
from bedside.solvers.discharge.monitor import EducationMonitor
from bedside.solvers.setup import reply_format
from bedside.structured import check_run_models
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions


@task
def discharge(
    data: str | None = None,
    seed: int = 0,
    personality: str | None = None,
    education_level: str | None = None,
    health_literacy: str | None = None,
    recall_level: str | None = None,
    behavior: str = "none",
    min_turns: int = 10,
    max_turns: int = 100,
    max_retries: int = 2,
    parse_retries: int = 2,
    judge_retries: int = 2,
    cache_references: bool = True,
    persona_assignment: str = "random",
    structured_output: bool | None = None,
    reading: str = "official",
    monitor_layout: str = "paper",
    monitor_policy: str = "algorithm1",
    zero_retention: bool = False,
    safety: bool = False,
) -> Task:
    # reject bad -T values and role names (one-line message, no traceback) before the data is read or a model called
    check_roles("discharge", BENCHMARK.roles, BENCHMARK.subject_role)
    seed = int_param("seed", seed)
    min_turns = int_param("min_turns", min_turns, minimum=0)
    max_turns = int_param("max_turns", max_turns, minimum=1)
    check(min_turns <= max_turns, "min_turns", f"must not exceed max_turns={max_turns}, got min_turns={min_turns}")
    max_retries = int_param("max_retries", max_retries, minimum=0)
    parse_retries = int_param("parse_retries", parse_retries, minimum=0)
    judge_retries = int_param("judge_retries", judge_retries, minimum=0)
    cache_references = bool_param("cache_references", cache_references)
    safety = bool_param("safety", safety)
    zero_retention = bool_param("zero_retention", zero_retention)
    structured_output = None if structured_output is None else bool_param("structured_output", structured_output)
    # no DischargeBench protocol has a stricter reading than the paper's: only the official rule exists here
    check(reading == "official", "reading", f"DischargeBench has only the official reading, got reading={reading!r}")
    if structured_output:
        check_run_models()  # a server that rejects the JSON-schema format: one line, now
    check(
        monitor_layout in EducationMonitor.LAYOUTS,
        "monitor_layout",
        f"use one of {list(EducationMonitor.LAYOUTS)}, got monitor_layout={monitor_layout!r}",
    )
    check(
        monitor_policy in MONITOR_POLICIES,
        "monitor_policy",
        f"use one of {list(MONITOR_POLICIES)}, got monitor_policy={monitor_policy!r}",
    )
    overrides = {
        "personality": personality,
        "education_level": education_level,
        "health_literacy": health_literacy,
        "recall_level": recall_level,
    }
    behavior_overlay(behavior)  # validates the name before anything runs
    dataset = discharge_dataset(data, seed=seed, overrides=overrides, behavior=behavior, assignment=persona_assignment)
    # a note that cannot fit a bound model's context window: one warning line each, before any call
    warn_oversized_notes(((str(s.id), (s.metadata or {})["case"]["discharge_note"]) for s in dataset), BENCHMARK.roles)
    # MIMIC-derived cases: every role local (or zero_retention declared), checked before any model call
    data_use = guard(dataset, BENCHMARK.subject_role, BENCHMARK.roles, zero_retention)
    return Task(
        dataset=dataset,
        setup=[*data_use, reply_format(structured_output, reading)]
        if data_use
        else reply_format(structured_output, reading),
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
        scorer=[
            conversation_quality(judge_retries=judge_retries),
            topic_checklist(judge_retries=judge_retries),
            comprehension(judge_retries=judge_retries, cache_references=cache_references),
            factual_consistency(judge_retries=judge_retries, cache_references=cache_references),
            encounter_outcome(),
            *([advice_safety(judge_retries=judge_retries)] if safety else []),
            health(),
        ],
        metadata={
            "benchmark": "DischargeBench",
            "paper": "arXiv:2609.20827",
            "monitor_layout": monitor_layout,
            "monitor_policy": monitor_policy,
            "zero_retention": zero_retention,
            VERSIONS: data_versions(dataset.location, BENCHMARK.name),
        },
    )
