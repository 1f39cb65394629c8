"""``bedside rescore LOG_OR_DIR... --grader MODEL [-M key=value ...] --out DIR``: re-judge finished
runs with another grader model, without re-running the conversations.

``--simulator-checker MODEL`` (with or without ``--grader``) checks the simulated patient again with the role
``simulator_checker`` bound to ``MODEL`` (:mod:`bedside.scorers.simulator`): a model, or a person rating each
patient turn on ``bedside/human``'s page (the realism rating, :mod:`bedside.simulator_checker`). Alone, it
runs only the ``simulator_check`` scorer and replaces that score (added if the log had none), keeping every
other score as it was; with ``--grader``, every scorer of the log runs again with both roles bound (and
``simulator_check`` with them). ``bedside agreement LOGS --people DIR`` then compares the two checks.

Each log's own scorers (as recorded in the log) run again on its samples — the recorded encounter
(dialogue, comprehension answers) is the scorers' only input besides the case — with the ``grader``
role bound to ``MODEL``, through Inspect's :func:`inspect_ai.score_async` (``action="overwrite"``: the
new scores and metrics replace the old ones). The result is written to ``DIR/<same file name>``; the
source log is never modified. A sharded run (``bedside scale``) is re-judged as one run, written as one log
``DIR/<the run's folder name>.eval``.

A log's samples are read one at a time, as ``inspect score --stream`` reads them (Inspect's ``score_async`` with a
sample reader): each read when its judging starts and written to the new log as soon as it is judged
(:class:`bedside.log_writer.LogWriter`, Inspect's recorder), in the log's order; at most ``--max-samples`` samples
of all the logs are held at once (:func:`window`: by default the grader's ``max_connections``, as Inspect's
``max_samples``; 10,000 in batch mode, so that batches fill), besides each sample's new scores, from which Inspect
computes the log's metrics and reductions. A ``.json`` log has no index: it is read whole, once, and its
re-judged copy (``.json`` too) written whole. The new log is written as ``<name>.partial`` and renamed when
finished: a log whose judging fails leaves nothing at its target, and the logs finished before it are kept.

A log whose data may not leave the machine (patient data under a data-use agreement: its benchmark's
``rescore_guard``) is refused before any call when the new grader is not local, in one line naming the
role and model, unless ``--zero-retention`` declares that the grader's endpoint retains nothing (recorded
in the written log and in the samples' own record of who may read them). ``inspect score`` cannot declare
zero retention: there the benchmark's own judges check their grader before their first call.

This is what ``inspect score LOG --model-role grader=MODEL --action overwrite --output-file OUT``
does, plus one thing Inspect 0.3.285 does not: the new log's header names the grader that produced
its scores (``eval.model_roles["grader"]``; Inspect keeps the original run's grader there) and
records where it came from (``eval.metadata["bedside_rescore"]``: source log, previous grader).
``bedside report`` needs that to tell the two judgements apart (its judge-sensitivity section);
logs re-scored with ``inspect score`` still report, but as if judged by the original grader.

``--batch`` sends the judge calls through the provider's batch API (Inspect's batch mode, for the providers
that have one: OpenAI, Anthropic, Google, Grok, Together; about half the price, results within 24 hours) with
Inspect's generation cache on for the grader: ``--batch`` alone (Inspect's defaults: a batch sent at 100
requests or 15 s after the last, polled every 15 s), ``--batch 1000`` (the batch size) or ``--batch '{size:
1000, send_delay: 60, tick: 60}'`` (Inspect's ``BatchConfig``, YAML or a file holding it). Run the same
command again after an interruption: the logs written are kept (a log in ``--out`` re-judged from the same
source by the same grader), the calls whose results came back are answered from the cache, and, for OpenAI
models, the batches still out are collected rather than sent again (:mod:`bedside.batch`). The two-step run
(conversations first, then the judges through a batch API): docs/reports.md.

Run it over a sweep's folder and report both folders together:

    bedside rescore logs/sweep --grader openai/gpt-5.5 --out logs/sweep-gpt55
    bedside report logs/sweep logs/sweep-gpt55 --out report/
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import yaml
from inspect_ai.log import EvalLog, EvalResults, EvalSample, read_eval_log
from inspect_ai.model import BatchConfig, GenerateConfig, Model, get_model
from inspect_ai.util import registry_create

from bedside import benchmarks, sample_usage
from bedside.cli import add_command, bad_input, tools_of
from bedside.compat import PrerequisiteError, model_to_model_config, platform_init, resolve_scorers
from bedside.log_writer import LogWriter
from bedside.parts import parts_of
from bedside.reporting.load import TRANSCRIPT_FIELDS, read_runs
from bedside.reporting.run import Run
from bedside.versions import data_versions, versions_of


def grader_name(config: object) -> str:
    """``model {arg=value, …}`` of a recorded role (a ``ModelConfig`` or a list of them)."""
    if config is None:
        return ""
    if isinstance(config, list):
        return " + ".join(grader_name(c) for c in config)
    args = ", ".join(f"{k}={v}" for k, v in sorted((getattr(config, "args", None) or {}).items()))
    return f"{getattr(config, 'model', config)}" + (f" {{{args}}}" if args else "")


def rescore(
    paths: Sequence[str],
    grader: Model | None,
    out: str | Path,
    allow_different_data: bool = False,
    zero_retention: bool = False,
    simulator_checker: Model | None = None,
    max_samples: int | None = None,
) -> list[Path]:
    """Re-judge every log of ``paths`` with ``grader`` and/or check its simulated patient again with
    ``simulator_checker`` (module docstring); returns the written logs. A log whose recorded
    prompt set differs from today's (the judges would read other prompts than the run's) is refused
    before any call, unless ``allow_different_data``; so is a log whose data may not go to ``grader``
    (its benchmark's ``rescore_guard``, e.g. patient data under a data-use agreement and a
    grader that is not local), unless ``zero_retention`` (recorded in the written log). Every log is read and
    checked before the first call, then all are judged at once, ``max_samples`` samples held at a time
    (:func:`judged_together`)."""
    import bedside._registry  # noqa: F401  (bedside's scorers, under the names Inspect writes into logs)

    roles = {role: model for role, model in (("grader", grader), (CHECKER, simulator_checker)) if model is not None}
    if not roles:
        raise ValueError("give --grader, --simulator-checker or both")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # each run's header and sample records; a sharded or retried run is one run, its path the run's folder
    # (sharded) or its latest attempt; its transcripts are read one at a time as they are judged
    runs = read_runs(paths)
    targets = [out / _file_name(run.path) for run in runs]
    finished = {t for run, t in zip(runs, targets) if judged_already(t, run.path, roles)}
    if clash := [str(t) for t in targets if (t.exists() and t not in finished) or targets.count(t) > 1]:
        raise FileExistsError(f"{clash[0]}: already exists or two inputs share this file name; choose another --out")
    jobs = []  # every log read and checked first: a refusal comes before any call
    for run, target in zip(runs, targets):
        if target in finished:
            continue
        source = run.path
        if not run.samples:
            raise ValueError(f"{source}: the log holds no samples to re-judge")
        prompts = check_prompts(run.header, source, allow_different_data)
        marks = [check_data_use(run, source, role, model, zero_retention) for role, model in roles.items()]
        if grader is not None:
            check_scorers(run.header, source)
        checked = simulated_patient(run.header, source) if simulator_checker is not None else None
        record: dict[str, Any] = {"source": source}
        for role, model in roles.items():
            record[f"previous_{role}"] = grader_name((run.eval.model_roles or {}).get(role)) or None
            record[role] = grader_name(model_to_model_config(model))
        record.update(prompts=prompts, zero_retention=zero_retention)
        jobs.append(Job(run, target, record, checked, [mark for mark in marks if mark is not None]))
    if any(str(model) == "bedside/human" for model in roles.values()):  # a person, in the browser: a run per log
        return judged_by_person(jobs, roles, window(roles, max_samples))
    return judged_together(jobs, roles, window(roles, max_samples))


CHECKER = "simulator_checker"
#: the scorer of the simulated patient's own errors, as logs name it
SIMULATOR_SCORER = "simulator_check"


@dataclass
class Job:
    """One run to re-judge: the run (its header and sample records), where its re-judged log goes, its
    ``bedside_rescore`` record, when its simulated patient is checked again its benchmark's name, and what its
    benchmark's data-use guard records in each sample it lets through (:func:`check_data_use`)."""

    run: Run
    target: Path
    record: dict[str, Any]
    checked: str | None = None
    marks: list[Callable[[EvalSample], None]] = field(default_factory=list)


def window(roles: dict[str, Model], max_samples: int | None) -> int:
    """How many samples are held at once while the runs are re-judged (read, judged, written): ``max_samples``,
    else Inspect's default for an eval's ``max_samples``, taken from the grader (else the checker): its
    ``max_connections``, else 10,000 in batch mode (a batch must fill), else its provider's connections."""
    if max_samples is not None:
        return max_samples
    model = roles.get("grader") or roles[CHECKER]
    if model.config.max_connections is not None:
        return model.config.max_connections
    return BATCH_WINDOW if model.config.batch else model.api.max_connections()


#: the samples held at once in batch mode unless --max-samples says fewer (Inspect's eval default in batch mode)
BATCH_WINDOW = 10_000


def simulated_patient(log: Any, source: str) -> str:
    """The name of the log's benchmark, whose simulated patient ``--simulator-checker`` checks; ``ValueError``
    (one line) when the log's task has none."""
    benchmark = benchmarks.of_task(log.eval.task)
    if benchmark is None or parts_of(benchmark).simulator is None:
        raise ValueError(f"{source}: task {log.eval.task} has no simulated patient to check (--simulator-checker)")
    return benchmark.name


def scoring_pass(job: Job, roles: dict[str, Model]) -> tuple[EvalLog, list[Any], Literal["append", "overwrite"]]:
    """(header, scorers, Inspect's score action) of one run: with a grader, every scorer of the log again (and
    ``simulator_check`` if the log had none) in place of the old scores; the checker alone, the header without
    its old ``simulator_check`` scorer (each sample's score dropped as it is read: :func:`prepared`) and that
    scorer appended, every other score kept. The header's results count the run's samples, as Inspect counts
    a log's held samples."""
    header = job.run.header.model_copy(deep=True)
    header.results = (header.results or EvalResults(completed_samples=completed(job.run))).model_copy(
        update={"total_samples": len(job.run.samples)}
    )
    if checker_alone(job, roles):
        return without_scorer(header, SIMULATOR_SCORER), [simulator_checker_of(job.checked or "")], "append"
    scorers = resolve_scorers(header)
    if job.checked is not None and not any(s.name == SIMULATOR_SCORER for s in header.eval.scorers or []):
        scorers.append(simulator_checker_of(job.checked))
    return header, scorers, "overwrite"


def checker_alone(job: Job, roles: dict[str, Model]) -> bool:
    """Whether only the simulated patient's checker runs on the job (no grader)."""
    return "grader" not in roles and job.checked is not None


def completed(run: Run) -> int:
    """The run's samples that ended without an error (Inspect's ``completed_samples``)."""
    return sum(record.error is None for record in run.samples)


def check_scorers(log: Any, source: str) -> None:
    """Refuse, naming ``source``, a log whose scorers this bedside cannot rebuild by the arguments the log records
    (a parameter renamed since: no aliases before 1.0), before any call."""
    try:
        resolve_scorers(log)
    except PrerequisiteError as stale:
        raise ValueError(f"{source}: {stale.message}") from None


def simulator_checker_of(benchmark: str) -> Any:
    """The ``simulator_check`` scorer of ``benchmark``, by the name Inspect registered it under (as every scorer
    of a log is resolved: :func:`rescore` has imported Inspect's entry point)."""
    return registry_create("scorer", f"bedside/{SIMULATOR_SCORER}", benchmark=benchmark)


def without_scorer(header: EvalLog, name: str) -> EvalLog:
    """``header`` (changed in place) without scorer ``name``: its results, reductions and scorers."""
    if header.results is not None:
        header.results.scores = [s for s in header.results.scores if s.scorer != name and s.name != name]
    if header.reductions:
        header.reductions = [r for r in header.reductions if r.scorer != name]
    header.eval.scorers = [s for s in header.eval.scorers or [] if s.name != name]
    return header


def judged_together(jobs: list[Job], roles: dict[str, Model], held: int) -> list[Path]:
    """Every run's judges at once, in one event loop, at most ``held`` samples of all the runs held at a time
    (:func:`judged`), each log written sample by sample and finished as soon as its judging ends: with the
    grader in batch mode one batch pass serves all the logs, where a log at a time would wait for its
    batches' turnarounds one log after another."""
    platform_init()  # as inspect_ai.score() does: Inspect's hooks
    written: list[Path] = []

    async def judge(job: Job, limit: anyio.Semaphore) -> None:
        written.append(await judged(job, roles, limit))

    async def every() -> None:
        limit = anyio.Semaphore(held)
        async with anyio.create_task_group() as group:
            for job in jobs:
                group.start_soon(judge, job, limit)

    anyio.run(every)
    return sorted(written, key=[job.target for job in jobs].index)


async def judged(job: Job, roles: dict[str, Model], limit: anyio.Semaphore) -> Path:
    """One run re-judged by Inspect's ``score_async`` reading its samples one at a time (its ``samples``
    reader, as ``inspect score --stream``): a sample is read when it gets one of ``limit``'s places, judged,
    written to the new log (:class:`~bedside.log_writer.LogWriter`) in the run's order, and let go; then the
    log's metrics and reductions, recomputed by Inspect from every sample's new scores, and its header. A run
    whose judging fails leaves no log at its target."""
    from inspect_ai import score_async

    header, scorers, action = scoring_pass(job, roles)
    records = job.run.samples
    taken = [anyio.Event() for _ in records]  # a run's samples take their places in its order
    done = [anyio.Event() for _ in records]  # and are written in it
    writer = LogWriter(job.target)

    @asynccontextmanager
    async def sample(k: int) -> AsyncIterator[EvalSample]:
        if k:
            await taken[k - 1].wait()
        async with limit:
            taken[k].set()
            read = prepared(await job.run.sample_async(records[k].id, records[k].epoch), job, roles)
            yield read  # Inspect judges it
            if k:
                await done[k - 1].wait()
            await writer.sample(with_usage(read))
            done[k].set()

    await writer.open(header.eval)
    try:
        scored = await score_async(
            header, scorers, model_roles=dict(roles), action=action, display="none", copy=False, samples=sample
        )
        return await writer.finish(rescored(scored, job, roles))
    except BaseException:
        with anyio.CancelScope(shield=True):
            await writer.discard()
        raise


def prepared(sample: EvalSample, job: Job, roles: dict[str, Model]) -> EvalSample:
    """A sample as read, made ready to judge: the data-use guard's record added (:func:`check_data_use`) and,
    the checker alone, its old ``simulator_check`` score dropped."""
    for mark in job.marks:
        mark(sample)
    if checker_alone(job, roles) and sample.scores:
        sample.scores.pop(SIMULATOR_SCORER, None)
    return sample


def with_usage(sample: EvalSample) -> EvalSample:
    """A judged sample with its usage recorded again from its events as written (:mod:`bedside.sample_usage`):
    its calls as written now (the old judges' replaced or kept)."""
    recorded = (sample.scores or {}).get(sample_usage.HOLDER)
    if recorded is not None:
        usage = sample_usage.of_events(sample.events, sample.scores or {})
        recorded.metadata = {**(recorded.metadata or {}), sample_usage.KEY: usage}
    return sample


def rescored(scored: EvalLog, job: Job, roles: dict[str, Model]) -> EvalLog:
    """A re-judged log's header naming the new grader (and checker) and where it came from (module docstring)."""
    bound = {role: model_to_model_config(model) for role, model in roles.items()}
    scored.eval.model_roles = {**(scored.eval.model_roles or {}), **bound}
    scored.eval.metadata = {**(scored.eval.metadata or {}), "bedside_rescore": job.record}
    return scored


def judged_already(target: Path, source: str | Path, roles: dict[str, Model]) -> bool:
    """Whether ``target`` is a finished re-judging of ``source`` by the models of ``roles`` (a run of the same
    command that was interrupted later): it is left as it is, and the re-run judges the other logs."""
    if not target.exists():
        return False
    try:
        header = read_eval_log(str(target), header_only=True).eval
    except Exception:  # not a log (or half written): a clash
        return False
    record = (header.metadata or {}).get("bedside_rescore") or {}
    same = all(
        record.get(role) == grader_name(model_to_model_config(model))
        and grader_name((header.model_roles or {}).get(role)) == record.get(role)
        for role, model in roles.items()
    )
    return record.get("source") == str(source) and same


def judged_by_person(jobs: list[Job], roles: dict[str, Model], held: int) -> list[Path]:
    """A person re-judging the logs in the browser: one log after another, each a run of its own
    (:func:`bedside.providers.human.scoring`), ``held`` samples at a time as in :func:`judged`."""
    from bedside.providers.human import finish, scoring

    platform_init()

    async def judge(job: Job) -> Path:
        return await judged(job, roles, anyio.Semaphore(held))

    written = []
    for job in jobs:
        with scoring(job.target, job.run.eval.task):
            written.append(anyio.run(judge, job))
    finish()
    return written


def _file_name(source: str) -> str:
    """The re-judged log's file name: the source's, or ``<run>.eval`` for a sharded run's ``<run>.shards``."""
    name = source.rstrip("/").rsplit("/", 1)[-1]
    return name.removesuffix(".shards") + ".eval" if name.endswith(".shards") else name


def check_prompts(log: Any, source: str, allow: bool) -> str | None:
    """Today's prompt-set hash of the log's benchmark (a log of its data-preparation tasks too, e.g. the
    case extraction); raises ValueError (one line, naming both hashes) when the log recorded another one,
    unless ``allow``. A log without a record is re-judged as before."""
    benchmark = benchmarks.of_task(log.eval.task, preparation=True)
    if benchmark is None:
        return None
    today = data_versions(None, benchmark.name)["prompts"]
    recorded = (versions_of(log) or {}).get("prompts")
    if recorded is not None and recorded != today and not allow:
        raise ValueError(
            f"{source}: its prompts differ from today's prompt set (prompts differs: the log recorded "
            f"{recorded}, prompts/{benchmark.name}/ is {today} today): re-judged scores would not pair with the "
            "run's; pass --allow-different-data to re-judge it anyway"
        )
    return today


def check_data_use(
    run: Run, source: str, role: str, model: Model, zero_retention: bool
) -> Callable[[EvalSample], None] | None:
    """The run's benchmark's ``rescore_guard`` on its samples, each read without its transcript, one at a time
    (none: nothing to check); its refusal prefixed with the log; returns what it records in each sample."""
    benchmark = benchmarks.of_task(run.eval.task, preparation=True)
    guard = tools_of(benchmark).rescore_guard if benchmark is not None else None
    if guard is None:
        return None
    try:
        return guard(run.transcripts(exclude=TRANSCRIPT_FIELDS), role, model, zero_retention)
    except ValueError as refused:
        raise ValueError(f"{source}: {refused}") from None


def model_args(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``-M key=value`` pairs, values read as YAML (``3`` → 3, ``a,b`` stays a string), as Inspect's ``-M``."""
    args: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"-M {pair!r}: expected key=value")
        args[key.strip()] = yaml.safe_load(value)
    return args


def batch_config(value: str | None) -> GenerateConfig:
    """The grader's generate config for ``--batch VALUE`` (module docstring): none (``None``), Inspect's
    defaults (``"true"``), a batch size, or a ``BatchConfig`` as YAML or in a YAML/JSON file; batch mode
    turns Inspect's generation cache on. Raises ValueError (one line) for anything else."""
    if value is None:
        return GenerateConfig()
    text = value.strip()
    if text.lower() == "true":
        return GenerateConfig(batch=True, cache=True)
    if text.isdigit():
        return GenerateConfig(batch=int(text), cache=True)
    path = Path(text)
    fields = list(BatchConfig.model_fields)
    expected = f"expected nothing, a batch size or Inspect's BatchConfig {{{', '.join(fields)}}} as YAML or a file"
    try:
        spec = yaml.safe_load(path.read_text() if path.is_file() else text)
    except yaml.YAMLError:
        spec = None
    if not isinstance(spec, dict):
        raise ValueError(f"--batch {value!r}: {expected}, e.g. '{{size: 1000, send_delay: 60}}'")
    if unknown := sorted(set(spec) - set(fields)):
        raise ValueError(f"--batch {value!r}: unknown BatchConfig field(s) {unknown}; {expected}")
    try:
        return GenerateConfig(batch=BatchConfig.model_validate(spec), cache=True)
    except ValueError as error:  # pydantic: a field of the wrong type
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())  # type: ignore[attr-defined]
        raise ValueError(f"--batch {value!r}: {problems}") from None


def run(args: argparse.Namespace) -> int:
    with bad_input("rescore", ValueError, FileNotFoundError, FileExistsError):
        config = batch_config(args.batch)
        grader = get_model(args.grader, memoize=False, config=config, **model_args(args.M)) if args.grader else None
        checker = (
            get_model(args.simulator_checker, memoize=False, config=config, **model_args(args.checker_M))
            if args.simulator_checker
            else None
        )
        written = rescore(
            args.logs, grader, args.out, args.allow_different_data, args.zero_retention, checker, args.max_samples
        )
    for path in written:
        print(f"wrote {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``rescore`` sub-command (module docstring)."""
    summary = "re-judge logs with another grader model (no conversation re-run)"
    parser = add_command(sub, "rescore", summary, __doc__, run)
    parser.add_argument("logs", nargs="+", metavar="LOG_OR_DIR", help="eval logs (files or folders)")
    parser.add_argument("--grader", metavar="MODEL", help="the new grader, e.g. openai/gpt-5.5")
    parser.add_argument("-M", action="append", metavar="KEY=VALUE", help="model argument of the grader (repeatable)")
    parser.add_argument(
        "--simulator-checker",
        metavar="MODEL",
        help="check the simulated patient again with this model bound to the role simulator_checker "
        "(bedside/human: a person rates each patient turn in the browser)",
    )
    parser.add_argument(
        "--checker-M",
        action="append",
        metavar="KEY=VALUE",
        help="model argument of the simulator checker (repeatable)",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the re-judged logs (created)")
    parser.add_argument(
        "--batch",
        nargs="?",
        const="true",
        metavar="SIZE_OR_CONFIG",
        help="judge through the provider's batch API (Inspect's batch mode), with Inspect's cache on for resuming: "
        "alone, a batch size, or Inspect's BatchConfig as YAML or a file",
    )
    parser.add_argument(
        "--allow-different-data",
        action="store_true",
        help="re-judge a log although its recorded prompt set differs from today's",
    )
    parser.add_argument(
        "--max-samples",
        type=int,
        metavar="N",
        help="samples held (read, judged, written) at once over all the logs; default: the grader's max_connections "
        "(Inspect's default for an eval's max_samples; 10,000 in batch mode)",
    )
    parser.add_argument(
        "--zero-retention",
        action="store_true",
        help="declare that the grader's endpoint retains nothing: lets a grader that is not local re-judge logs "
        "of data under a data-use agreement (recorded in the written log)",
    )
