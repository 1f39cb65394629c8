"""Measure the advice-safety scorer (a bedside extension) on crafted educator transcripts.

    inspect eval bedside/discharge_safety_probe --model bedside/scripted --model-role grader=<judge>
    bedside safety LOG        # per-turn catch and false-flag rates, per session, per stratum

The transcripts (``datasets/discharge/safety_probe.jsonl``, synthetic, written for bedside) plant one
unsafe educator turn in most sessions and keep the others safe; no model plays a role, only the
``grader`` judges. On transcripts whose notes come from MIMIC-derived cases (``-T cases=<cases built by
bedside build-cases>``), the grader (unbound: the model under test, which judges in its place) must be a
local model, checked before any model call, as in a ``discharge`` run (``-T zero_retention=true``: the
user declares that the endpoint retains nothing; recorded in the log). Parameters (``-T``): the task
function's docstring (``python -m bedside.params --markdown discharge_safety_probe``).
"""

from inspect_ai import Task, task

from bedside.discharge import BENCHMARK
from bedside.discharge.mimic.eval_guard import guard
from bedside.discharge.safety_probe import case_file, probe_file, safety_probe_dataset
from bedside.params import JudgeRetries, StructuredOutput, validate_parameters
from bedside.scorers.metrics import task_scorers
from bedside.solvers.discharge.safety_probe import replay_transcript
from bedside.solvers.setup import opening
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions


@task
@validate_parameters
def discharge_safety_probe(
    data: str | None = None,
    cases: str | None = None,
    judge_retries: JudgeRetries = 2,
    structured_output: StructuredOutput = None,
    zero_retention: bool = False,
) -> Task:
    """The advice-safety scorer measured on crafted educator transcripts (their catch and false-flag rates).

    Args:
        data: the probe transcripts (JSONL); unset: the shipped ``datasets/discharge/safety_probe.jsonl``.
        cases: the case file the transcripts' discharge notes come from; unset: the shipped demo set.
        judge_retries: an unreadable verdict leaves its turn unscored.
        structured_output: the probe's judge has no official code: unset is ``false`` (JSON asked for in the
            prompt, as in the other DischargeBench judges).
        zero_retention: on cases built from MIMIC (``bedside build-cases``) the grader, the one role the
            probe calls, must be a local model; ``true`` declares that its endpoint retains nothing
            (recorded in the log).
    """
    arguments = dict(locals())  # its scorers take theirs by name (scorers/discharge/: each one's declaration)
    setup = opening("discharge_safety_probe", BENCHMARK, structured_output)
    dataset = safety_probe_dataset(data, cases)
    # notes of MIMIC-derived cases: the grader local (or zero_retention declared), checked before any model call;
    # the transcripts are replayed, so the model under test is called only as the unbound grader
    data_use = guard(dataset, None, ("grader",), zero_retention)
    return Task(
        dataset=dataset,
        setup=[*data_use, setup],
        solver=[replay_transcript()],
        scorer=task_scorers(BENCHMARK, "discharge_safety_probe", arguments),
        metadata={
            "benchmark": "DischargeBench (bedside extension: advice safety)",
            "zero_retention": zero_retention,
            # cases: the case file the notes come from (as a discharge run's); probes: the transcripts
            VERSIONS: data_versions(case_file(cases), BENCHMARK.name, probes=probe_file(data)),
        },
    )
