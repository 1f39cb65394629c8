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
role bound to ``MODEL``, through Inspect's :func:`inspect_ai.score` (``action="overwrite"``: the
new scores and metrics replace the old ones). The result is written to ``DIR/<same file name>``; the
source log is never modified. A sharded run (``bedside scale``) is re-judged as one run, written as one log
``DIR/<the run's folder name>.eval``.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import yaml
from inspect_ai import score
from inspect_ai.log import read_eval_log, write_eval_log, write_eval_log_async
from inspect_ai.model import BatchConfig, GenerateConfig, Model, get_model
from inspect_ai.util import registry_create

from bedside import benchmarks, sample_usage
from bedside.cli import add_command, bad_input, tools_of
from bedside.compat import PrerequisiteError, model_to_model_config, platform_init, resolve_scorers
from bedside.parts import parts_of
from bedside.reporting.load import read_runs
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
) -> list[Path]:
    """Re-judge every log of ``paths`` with ``grader`` and/or check its simulated patient again with
    ``simulator_checker`` (module docstring); returns the written logs. A log whose recorded
    prompt set differs from today's (the judges would read other prompts than the run's) is refused
    before any call, unless ``allow_different_data``; so is a log whose data may not go to ``grader``
    (its benchmark's ``rescore_guard``, e.g. patient data under a data-use agreement and a
    grader that is not local), unless ``zero_retention`` (recorded in the written log). Every log is read and
    checked before the first call, then all are judged at once (:func:`judged_together`)."""
    import bedside._registry  # noqa: F401  (bedside's scorers, under the names Inspect writes into logs)

    roles = {role: model for role, model in (("grader", grader), (CHECKER, simulator_checker)) if model is not None}
    if not roles:
        raise ValueError("give --grader, --simulator-checker or both")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # every log whole (Inspect's scorer takes an EvalLog); a sharded or retried run: one log, its path the run's
    runs = [(run.path, run.whole()) for run in read_runs(paths)]  # folder (sharded) or its latest attempt
    targets = [out / _file_name(source) for source, _ in runs]
    finished = {t for (s, _), t in zip(runs, targets) if judged_already(t, s, roles)}
    if clash := [str(t) for t in targets if (t.exists() and t not in finished) or targets.count(t) > 1]:
        raise FileExistsError(f"{clash[0]}: already exists or two inputs share this file name; choose another --out")
    jobs = []  # every log read and checked first: a refusal comes before any call
    for (source, log), target in zip(runs, targets):
        if target in finished:
            continue
        if not log.samples:
            raise ValueError(f"{source}: the log holds no samples to re-judge")
        prompts = check_prompts(log, str(source), allow_different_data)
        for role, model in roles.items():
            check_data_use(log, str(source), role, model, zero_retention)
        if grader is not None:
            check_scorers(log, str(source))
        checked = simulated_patient(log, str(source)) if simulator_checker is not None else None
        record: dict[str, Any] = {"source": str(source)}
        for role, model in roles.items():
            record[f"previous_{role}"] = grader_name((log.eval.model_roles or {}).get(role)) or None
            record[role] = grader_name(model_to_model_config(model))
        record.update(prompts=prompts, zero_retention=zero_retention)
        jobs.append(Job(log, target, record, checked))
    if any(str(model) == "bedside/human" for model in roles.values()):  # a person, in the browser: a run per log
        return judged_by_person(jobs, roles)
    return judged_together(jobs, roles)


CHECKER = "simulator_checker"
#: the scorer of the simulated patient's own errors, as logs name it
SIMULATOR_SCORER = "simulator_check"


@dataclass
class Job:
    """One log to re-judge: the log, where its re-judged copy goes, its ``bedside_rescore`` record and, when
    its simulated patient is checked again, its benchmark's name."""

    log: Any
    target: Path
    record: dict[str, Any]
    checked: str | None = None


def simulated_patient(log: Any, source: str) -> str:
    """The name of the log's benchmark, whose simulated patient ``--simulator-checker`` checks; ``ValueError``
    (one line) when the log's task has none."""
    benchmark = benchmarks.of_task(log.eval.task)
    if benchmark is None or parts_of(benchmark).simulator is None:
        raise ValueError(f"{source}: task {log.eval.task} has no simulated patient to check (--simulator-checker)")
    return benchmark.name


def scoring_pass(job: Job, roles: dict[str, Model]) -> tuple[Any, list[Any], Literal["append", "overwrite"]]:
    """(log, scorers, Inspect's score action) of one log: with a grader, every scorer of the log again (and
    ``simulator_check`` if the log had none) in place of the old scores; the checker alone, the log without its
    old ``simulator_check`` score and that scorer appended, every other score kept."""
    if "grader" not in roles and job.checked is not None:  # the checker alone
        return without_scorer(job.log, SIMULATOR_SCORER), [simulator_checker_of(job.checked)], "append"
    scorers = resolve_scorers(job.log)
    if job.checked is not None and not any(s.name == SIMULATOR_SCORER for s in job.log.eval.scorers or []):
        scorers.append(simulator_checker_of(job.checked))
    return job.log, scorers, "overwrite"


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


def without_scorer(log: Any, name: str) -> Any:
    """``log`` (changed in place) without scorer ``name``: its sample scores, results, reductions and header."""
    for sample in log.samples or []:
        if sample.scores:
            sample.scores.pop(name, None)
    if log.results is not None:
        log.results.scores = [s for s in log.results.scores if s.scorer != name and s.name != name]
    if log.reductions:
        log.reductions = [r for r in log.reductions if r.scorer != name]
    log.eval.scorers = [s for s in log.eval.scorers or [] if s.name != name]
    return log


def judged_together(jobs: list[Job], roles: dict[str, Model]) -> list[Path]:
    """Every log's judges at once, in one event loop (Inspect's ``score_async`` per log), each log written as
    soon as its judging ends: with the grader in batch mode one batch pass serves all the logs, where a log
    at a time would wait for its batches' turnarounds one log after another."""
    from inspect_ai import score_async

    platform_init()  # as inspect_ai.score() does: Inspect's hooks
    written: list[Path] = []

    async def judge(job: Job) -> None:
        log, scorers, action = scoring_pass(job, roles)
        scored = await score_async(log, scorers, model_roles=dict(roles), action=action, display="none")
        # the async writer: Inspect's write_eval_log, called in a running event loop, re-enters the loop
        # (nest_asyncio, applied then for the first time in the process) from inside one of its steps, and
        # the step's other ready callbacks are gone when it resumes: IndexError: pop from an empty deque
        await write_eval_log_async(rescored(scored, job, roles), str(job.target))
        written.append(job.target)

    async def every() -> None:
        async with anyio.create_task_group() as group:
            for job in jobs:
                group.start_soon(judge, job)

    anyio.run(every)
    return sorted(written, key=[job.target for job in jobs].index)


def rescored(scored: Any, job: Job, roles: dict[str, Model]) -> Any:
    """A re-judged log with its header naming the new grader (and checker) and where it came from (module
    docstring), each sample's usage recorded again from its events as written (:mod:`bedside.sample_usage`)."""
    bound = {role: model_to_model_config(model) for role, model in roles.items()}
    for sample in scored.samples or []:  # its calls as written now (the old judges' replaced or kept)
        recorded = (sample.scores or {}).get(sample_usage.HOLDER)
        if recorded is not None:
            usage = sample_usage.of_events(sample.events, sample.scores or {})
            recorded.metadata = {**(recorded.metadata or {}), sample_usage.KEY: usage}
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


def judged_by_person(jobs: list[Job], roles: dict[str, Model]) -> list[Path]:
    """A person re-judging the logs in the browser: one log after another, each a run of its own
    (:func:`bedside.providers.human.scoring`)."""
    from bedside.providers.human import finish, scoring

    written = []
    for job in jobs:
        with scoring(job.target, job.log.eval.task):
            log, scorers, action = scoring_pass(job, roles)
            scored = score(log, scorers, model_roles=dict(roles), action=action, display="none")
        write_eval_log(rescored(scored, job, roles), str(job.target))
        written.append(job.target)
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


def check_data_use(log: Any, source: str, role: str, model: Model, zero_retention: bool) -> None:
    """The log's benchmark's ``rescore_guard`` (none: nothing to check); its refusal prefixed with the log."""
    benchmark = benchmarks.of_task(log.eval.task, preparation=True)
    guard = tools_of(benchmark).rescore_guard if benchmark is not None else None
    if guard is None:
        return
    try:
        guard(log, role, model, zero_retention)
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
        written = rescore(args.logs, grader, args.out, args.allow_different_data, args.zero_retention, checker)
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
        "--zero-retention",
        action="store_true",
        help="declare that the grader's endpoint retains nothing: lets a grader that is not local re-judge logs "
        "of data under a data-use agreement (recorded in the written log)",
    )
