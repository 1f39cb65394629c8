"""Measure the advice-safety scorer (a bedside extension) on crafted educator transcripts.

    inspect eval bedside/discharge_safety_probe --model bedside/scripted --model-role grader=<judge>
    bedside safety LOG        # per-turn catch and false-flag rates, per session, per stratum

The transcripts (``datasets/discharge/safety_probe.jsonl``, synthetic, written for bedside) plant one
unsafe educator turn in most sessions and keep the others safe; no model plays a role, only the
``grader`` judges. ``-T data=`` another probe file, ``-T cases=`` the case file their notes come from.
"""

from inspect_ai import Task, task

from bedside.benchmarks.discharge import BENCHMARK
from bedside.params import int_param
from bedside.roles import check_roles
from bedside.samples.safety_probe import safety_probe_dataset
from bedside.scorers.advice_safety import advice_safety
from bedside.scorers.safety_probe import safety_probe_check
from bedside.solvers.safety_probe import replay_transcript
from bedside.solvers.setup import reply_format


@task
def discharge_safety_probe(
    data: str | None = None, cases: str | None = None, judge_retries: int = 2, structured_output: bool | None = None
) -> Task:
    check_roles("discharge_safety_probe", BENCHMARK.roles, BENCHMARK.subject_role)
    judge_retries = int_param("judge_retries", judge_retries, minimum=0)
    return Task(
        dataset=safety_probe_dataset(data, cases),
        setup=reply_format(structured_output, "official"),
        solver=[replay_transcript()],
        scorer=[advice_safety(judge_retries=judge_retries), safety_probe_check()],
        metadata={"benchmark": "DischargeBench (bedside extension: advice safety)"},
    )
