"""Build MIMIC-IV-Ext-DischargeBench case records from a cohort file (paper Appendix A.1, "Profile and
discharge-information extraction"): one model call per discharge note extracts the seven profile
fields and the six discharge-information fields; bedside assembles and validates the
:class:`DischargeCase` record, derives the applicable Topic-Checklist questions, and writes the case
file plus an audit of every field beside the note section it came from.

    bedside build-cases --mimic MIMIC_DIR --note NOTE_DIR --out cases.jsonl --cohort-only
    inspect eval tasks/discharge_build_cases.py --model vllm/Qwen/Qwen3-32B \
        -T cohort=cases.cohort.jsonl -T out=cases.jsonl

(``bedside build-cases ... --model M`` does both steps.) Parameters (``-T``): the task function's
docstring (``python -m bedside.params --markdown build_discharge_cases``).

**Data use.** MIMIC-IV-Note is credentialed data (PhysioNet Credentialed Health Data Use Agreement
1.5.0). The task refuses, before any model call, to send note text to a model that is not local
(``bedside/local``, ``bedside/scripted``, ``vllm/``, ``hf/``, ``llama-cpp-python/``, ``ollama/``, or
any provider whose base URL is on localhost / 127.0.0.1 / ::1) unless ``-T zero_retention=true``
states that the endpoint retains nothing. Inspect's logs of this task hold note text: keep them
where the data may be.

Outputs (next to ``out``): ``cases.jsonl`` (valid records, loadable with ``load_cases``),
``cases.audit.csv``, ``cases.invalid.csv`` (records that failed, with the reason; never dropped
silently), ``cases.summary.json`` / ``.csv`` (Table 2 of the cases). The score ``valid`` is the share
of records that became valid cases.

**Versions.** The log's ``data_versions`` record (:mod:`bedside.versions`) hashes the task's input: its
``cases`` entry is the hash of the cohort file (the notes and fields the cases are extracted from; the case
file written is the output, not an input), ``prompts`` the DischargeBench prompt set, which holds the
extraction prompt. Two extraction logs with the same ``cases`` and ``prompts`` read the same notes with the
same instructions.
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from pydantic import NonNegativeInt

from bedside.compat import active_model, resolving_eval_tasks
from bedside.discharge import BENCHMARK
from bedside.discharge.mimic.data_use import check_endpoint
from bedside.discharge.mimic.extract import CaseWriter
from bedside.params import BadParameter, validate_parameters
from bedside.paths import user_output_path, user_path
from bedside.scorers.discharge.build_cases import build_cases
from bedside.solvers.discharge.build_cases import data_use_guard, extract_case
from bedside.solvers.setup import opening
from bedside.versions import KEY as VERSIONS
from bedside.versions import data_versions


def default_out(cohort: str | Path) -> Path:
    cohort = Path(cohort)
    name = cohort.name
    if name.endswith(".cohort.jsonl"):
        return cohort.with_name(name[: -len(".cohort.jsonl")] + ".jsonl")
    return cohort.with_name(cohort.stem + ".cases.jsonl")


@task
@validate_parameters
def build_discharge_cases(
    cohort: str,
    out: str | None = None,
    zero_retention: bool = False,
    retries: NonNegativeInt = 2,
    cache: bool = False,
    structured_output: bool = False,
) -> Task:
    """MIMIC-IV-Ext-DischargeBench field extraction: one model call per discharge note of the cohort.

    Args:
        cohort: the intermediate cohort JSONL (``bedside build-cases ... --cohort-only`` writes it).
        out: the case file to write; unset: the cohort path with ``.cohort`` removed, else
            ``<cohort>.cases.jsonl``.
        zero_retention: declare that a non-local endpoint retains no data; ``false``: only local models
            may read the notes (PhysioNet's data use agreement).
        retries: fresh samples asked for when a reply is unreadable.
        cache: use Inspect's generation cache for the extraction calls.
        structured_output: request the reply schema through Inspect's structured output
            (``ResponseSchema``), the server probed first.
    """
    setup = opening("build_discharge_cases", None, structured_output)  # the extraction: the model under test only
    _guard_active_model(zero_retention)  # before the cohort (and its notes) is even read
    from bedside.discharge.mimic.cohort import read_cohort  # pandas: only for this task, not at registration

    cohort = str(user_path(cohort))  # relative to the shell's folder (inspect eval runs the task from tasks/)
    records = read_cohort(cohort)
    target = user_output_path(out) if out else default_out(cohort)
    if target.resolve() == Path(cohort).resolve():
        raise BadParameter("out", f"must differ from the cohort file {cohort}")
    samples = [
        Sample(
            id=record["case_id"],
            input=f"Extract the DischargeBench fields of discharge note {record.get('note_id', record['case_id'])}.",
            metadata=record,
        )
        for record in records
    ]
    return Task(
        dataset=MemoryDataset(samples, name="mimic-iv-ext-dischargebench-cohort", location=str(cohort)),
        setup=[data_use_guard(zero_retention), setup],
        solver=extract_case(retries=retries, cache=cache),
        scorer=build_cases(),
        early_stopping=CaseWriter(target),
        epochs=1,
        metadata={
            "benchmark": "DischargeBench",
            "paper": "arXiv:2609.20827",
            "step": "MIMIC-IV-Ext-DischargeBench field extraction (Appendix A.1)",
            "out": str(target),
            "zero_retention": zero_retention,
            # what the cases written depend on: the cohort read (its hash is "cases") and the extraction prompt
            VERSIONS: data_versions(cohort, BENCHMARK.name),
        },
    )


def _guard_active_model(zero_retention: bool) -> None:
    """``inspect eval`` (and ``eval(build_discharge_cases, ...)``) create the task with the model
    already active: refuse here, before anything is read. A ``Task`` built in Python outside an eval's
    task building (Inspect leaves the last eval's model active afterwards) is not checked here;
    ``data_use_guard`` checks every sample then."""
    model = active_model() if resolving_eval_tasks() else None
    if model is not None:
        check_endpoint(model, zero_retention)
