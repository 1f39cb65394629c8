"""Reading eval logs for the readers: each run as a light :class:`Run` (its header and one record per sample,
never its transcripts), and tidy pandas frames (one row per sample × score key).

What every reader gets, and the API other modules use:

- :func:`read_runs` (``paths``: files, folders read recursively, or URLs such as ``s3://bucket/prefix``) ->
  one :class:`Run` per run; :func:`read_run` the one run at a path; :func:`load` the runs labelled for the
  report (:class:`LoadedLog`); :func:`scores_frame` their scores, one row per (run, sample, epoch, scorer, key).
- A :class:`~bedside.reporting.run.Run` holds its log's header (``run.eval``, ``run.status``, ``run.stats``: Inspect's
  ``read_eval_log(header_only=True)``) and, in ``run.samples``, one record per (sample id, epoch): Inspect's
  :class:`~inspect_ai.log.EvalSampleSummary` (id, epoch, scores, metadata, usage, times, error), read from the
  log's sample summaries (:func:`inspect_ai.log.read_eval_log_sample_summaries`) in the order Inspect reads a
  log's samples back (epoch, then id). Inspect thins a summary's metadata (a value over 1k is dropped); a
  sample whose score metadata was thinned gets its scores and metadata from the sample itself (read without
  its messages and events), so a record's scores are the sample's. Sample metadata over 1k (a case record)
  stays out of the record.
- A transcript is read only where a command shows or judges it, or counts the model calls of a sample its summary
  holds no record of (:mod:`bedside.sample_usage`): ``run.transcripts()``
  reads the samples whole, one at a time (a ``.json`` log has no index: it is read whole, once);
  ``run.sample_async`` one sample in a running event loop (``bedside rescore``).

**A retried run is one run.** ``inspect eval-retry``, an ``eval-set``'s retry and a ``bedside scale`` unit's
next attempt write a new log of the same eval (the same ``eval.task_id``, another ``eval_id``) holding the
samples the earlier attempt finished and the ones it runs; the earlier log stays beside it. Logs of one
task id, model and roles are the attempts of one run (:func:`attempts`): each (sample id, epoch) is read once,
from the latest attempt that finished it (no error), else from the latest that holds it; the run's header is
its latest attempt's. The superseded logs are named in one line on stderr. A run none of whose attempts ended
``success`` (a log still being written, an interrupted run never retried) is reported in one line as
unfinished, with the samples it finished.

The logs of a sharded run (``bedside scale``) are read as one run, with the numbers of the unsharded run
(:mod:`bedside.scale.merge`): every reader takes a run's folder (or its units' logs) as one run, and refuses a
missing or duplicated shard, or shards of different runs, in one line naming the shard.

Which benchmark a log belongs to, its strata, bookkeeping keys and variant arguments come from the
benchmark descriptors (:mod:`bedside.benchmarks`). Each run gets a *label*: the model under test, plus the
task arguments that change what is measured (each benchmark's descriptor's ``variant_args``) when they are
not the default. Runs with the same label are pooled.

A file that is not a readable log (a truncated ``.eval``, a half-written JSON) is refused in one line naming it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from inspect_ai.log import (
    EvalLog,
    EvalSampleSummary,
    list_eval_logs,
    read_eval_log,
    read_eval_log_sample,
    read_eval_log_sample_summaries,
)

from bedside import benchmarks
from bedside.benchmarks import DERIVED_SCORERS
from bedside.reporting.run import Run, inspect_order
from bedside.reporting.scores import as_float
from bedside.scale.merge import ShardError, merge_runs

#: values of a variant argument that mean "the default run" (left out of a log's label)
NEUTRAL = (None, "none", "", 0, "0")


#: what Inspect writes in place of a summary's metadata value over 1k
THINNED = "Key removed from summary (> 1k)"
SAMPLE, ANY_SCORER = "(sample)", "(any scorer)"
#: the metadata values the readers read, of the sample and of a score (by scorer): a record whose summary lost
#: one of them (over 1k) reads its sample's scores and metadata; any other value over 1k stays out of it
READ: dict[str, frozenset[str]] = {
    SAMPLE: frozenset({"probe"}),  # the advice-safety probe's planted turns (bedside safety)
    ANY_SCORER: frozenset(
        {
            "panel",  # a judge panel's votes (bedside.reporting.panels)
            "items",  # a rubric's items (epochs' verdict units)
            "counts",  # competency counts, the advice-safety counts
            "turns",  # the advice-safety verdicts per turn
            "role_fallbacks",
        }
    ),
    "topic_checklist": frozenset({"answers"}),  # the checklist's answers (epochs, ratings)
    "encounter_outcome": frozenset({"char_break_turns"}),  # the clean-complete audit
    "simulator_check": frozenset({"persona", "patient_turns", "checked_by", "findings", "checker_error"}),
}
#: the parts of a sample a record is read from when its summary was thinned (its transcript left out)
TRANSCRIPT_FIELDS = {"messages", "events", "attachments", "store", "timelines", "events_data"}


class LogError(ValueError):
    """A file that is not a readable eval log (one line naming it)."""


@dataclass
class LoadedLog:
    """A run of the report, with its label and benchmark."""

    path: str
    log: Run
    label: str
    benchmark: str


def expand(paths: Iterable[str]) -> list[str]:
    """Files given, and the logs found (recursively) in directories given, in a stable order (local paths
    or URLs such as ``s3://bucket/prefix``)."""
    from fsspec.core import url_to_fs

    out: list[str] = []
    for p in map(str, paths):
        fs, inner = url_to_fs(p)
        if fs.isdir(inner):
            found = sorted(info.name.removeprefix("file://") for info in list_eval_logs(p))
            if not found:
                raise FileNotFoundError(f"{p}: no eval log (.eval or .json) in this directory")
            out.extend(found)
        elif fs.exists(inner):
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    return out


def read_header(path: str) -> EvalLog:
    """A log's header (no sample); :class:`LogError`, one line, for a file that is not a readable log."""
    try:
        return read_eval_log(path, header_only=True)
    except Exception as error:  # a zip cut short, JSON half written, not a log at all
        raise LogError(f"{path}: not a readable eval log ({_first_line(error)})") from None


def read_records(path: str, header: EvalLog) -> list[EvalSampleSummary]:
    """One record per sample of the log at ``path`` (module docstring), in Inspect's order (epoch, then id)."""
    try:
        summaries = read_eval_log_sample_summaries(path)
    except Exception as error:
        raise LogError(f"{path}: its samples cannot be read ({_first_line(error)})") from None
    return sorted((_whole_scores(path, s) if _thinned(s) else s for s in summaries), key=inspect_order)


def _thinned(summary: EvalSampleSummary) -> bool:
    """Whether Inspect dropped from the summary (over 1k) a metadata value a reader reads (:data:`READ`)."""
    if any(summary.metadata.get(key) == THINNED for key in READ[SAMPLE]):
        return True
    for scorer, score in (summary.scores or {}).items():
        metadata = score.metadata or {}
        if any(metadata.get(key) == THINNED for key in READ[ANY_SCORER] | READ.get(scorer, frozenset())):
            return True
    return False


def _whole_scores(path: str, summary: EvalSampleSummary) -> EvalSampleSummary:
    sample = read_eval_log_sample(path, summary.id, summary.epoch, exclude_fields=TRANSCRIPT_FIELDS)
    return summary.model_copy(update={"scores": sample.scores, "metadata": sample.metadata})


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def read_runs(paths: Iterable[str], say: bool = True) -> list[Run]:
    """Each run in ``paths`` (files or folders, :func:`expand`): a retried run's attempts as one run, a
    sharded run's units as one run whose path is the run's folder (:func:`bedside.scale.merge.merge_runs`;
    ``ShardError``, one line naming the shard, for a missing or duplicated shard or shards of different
    runs); with ``say``, the superseded and unfinished logs in one line each on stderr (module docstring)."""
    headers = [(path, read_header(path)) for path in expand(paths)]
    merge_runs([Run(path, header, []) for path, header in headers])  # refused before any sample is read
    runs = merge_runs([read_attempts(group) for group in attempts(headers)])
    if say:
        for run in runs:
            for line in notes(run):
                print(line, file=sys.stderr, flush=True)
    return runs


def read_run(path: str) -> Run:
    """The one run at ``path`` (a log file, or a folder holding one run's logs: sharded, retried or not); a
    folder of several runs, or one shard's log alone, is refused in one line."""
    runs = read_runs([path])
    if len(runs) != 1:
        raise ShardError(f"{path}: holds {len(runs)} runs ({', '.join(r.path for r in runs)}); pass one run")
    return runs[0]


def as_run(log: str | Run | EvalLog) -> Run:
    """A run given by its path (:func:`read_run`), read already, or held in memory (:meth:`Run.of`)."""
    if isinstance(log, str):
        return read_run(log)
    return log if isinstance(log, Run) else Run.of(log)


def attempts(headers: Sequence[tuple[str, EvalLog]]) -> list[list[tuple[str, EvalLog]]]:
    """The logs grouped into runs, each group the attempts of one run oldest first (module docstring): logs
    of one ``task_id``, model and roles with distinct ``eval_id`` s. Copies of one log (the same ``eval_id``
    twice: a re-judged copy has other roles) and logs without a task id stay runs of their own."""
    groups: dict[tuple[str, str, str], list[tuple[str, EvalLog]]] = {}
    out: list[list[tuple[str, EvalLog]]] = []
    for path, header in headers:
        spec = header.eval
        if not spec.task_id:
            out.append([(path, header)])
            continue
        roles = str(sorted((spec.model_roles or {}).items()))
        key = (spec.task_id, spec.model, roles)
        if key not in groups:
            groups[key] = []
            out.append(groups[key])
        groups[key].append((path, header))
    split: list[list[tuple[str, EvalLog]]] = []
    for group in out:
        if len({h.eval.eval_id for _, h in group}) < len(group):  # copies, not attempts
            split += [[member] for member in group]
        else:
            split.append(sorted(group, key=lambda m: m[1].eval.created))
    return split


def read_attempts(group: list[tuple[str, EvalLog]]) -> Run:
    """One run of its attempts (oldest first): each (sample id, epoch) from the latest attempt that finished
    it, else the latest that holds it; the latest attempt's header."""
    path, header = group[-1]
    if len(group) == 1:
        records = read_records(path, header)
        return Run(path, header, records, {(str(s.id), s.epoch): path for s in records})
    chosen: dict[tuple[str, int], tuple[bool, str, EvalSampleSummary]] = {}
    for source, attempt in group:  # a later attempt's sample replaces one the earlier did not finish
        for record in read_records(source, attempt):
            key = (str(record.id), record.epoch)
            finished = record.error is None and bool(record.scores)
            if key not in chosen or finished or not chosen[key][0]:
                chosen[key] = (finished, source, record)
    records = sorted((c[2] for c in chosen.values()), key=inspect_order)
    used = {source for _, source, _ in chosen.values()}
    superseded = [source for source, _ in group if source not in used]
    return Run(path, header, records, {k: source for k, (_, source, _) in chosen.items()}, superseded)


def notes(run: Run) -> list[str]:
    """The lines a reader says about a run: its superseded attempts, and that it is unfinished."""
    lines = []
    if run.superseded:
        lines.append(
            f"note: {run.path} is a retry of {', '.join(run.superseded)}: "
            f"read as one run, each sample from the latest attempt that finished it"
        )
    if run.status != "success":
        lines.append(
            f"warning: {run.path} is unfinished (status {run.status!r}; {len(run.samples)} of "
            f"{_planned(run)} samples): reporting the samples it holds; finish it with inspect eval-retry"
        )
    return lines


def _planned(run: Run) -> int:
    spec = run.eval
    ids = spec.dataset.sample_ids
    return (len(ids) if ids is not None else spec.dataset.samples or 0) * (spec.config.epochs or 1)


def benchmark_of(log: EvalLog | Run) -> str:
    """The registered benchmark's name (:func:`bedside.benchmarks.of_task`), else the task's name."""
    benchmark = benchmarks.of_task(log.eval.task)
    return benchmark.name if benchmark else log.eval.task.split("/")[-1]


#: the label of a run whose model under test is a person (``--model bedside/human``)
HUMAN_LABEL = "human"


def label_of(log: EvalLog | Run) -> str:
    """The model under test and any non-default variant argument (each benchmark declares its own,
    :attr:`bedside.benchmarks.Benchmark.variant_args`; module docstring)."""
    args = log.eval.task_args or {}
    variants = [f"{k}={args[k]}" for k in benchmarks.variant_args() if args.get(k) not in NEUTRAL]
    model = HUMAN_LABEL if log.eval.model == "bedside/human" else log.eval.model  # a person: the human baseline
    return model + (f" ({', '.join(variants)})" if variants else "")


def load(paths: Sequence[str]) -> list[LoadedLog]:
    """The runs in ``paths`` (:func:`read_runs`), labelled for the report (:func:`disambiguate`)."""
    out = [LoadedLog(run.path, run, label_of(run), benchmark_of(run)) for run in read_runs(paths)]
    disambiguate(out)
    return out


def disambiguate(logs: list[LoadedLog]) -> None:
    """Logs with the same label are pooled (shards of one run) unless they hold the same (sample id,
    epoch): then they are separate runs (e.g. a baseline and a candidate of the same model). Their
    labels get the model's ``-M`` arguments when those differ (``bedside/scripted {educator_topics=2}``,
    e.g. the models of an ``eval-set`` sweep), else the log's folder name (``model [baseline]``), or
    its file name if the folders agree."""
    for key in (_model_args, _folder_or_file):
        groups: dict[tuple[str, str], list[LoadedLog]] = {}
        for item in logs:
            groups.setdefault((item.benchmark, item.label), []).append(item)
        for members in groups.values():
            cases = [{(str(s.id), s.epoch) for s in m.log.samples or []} for m in members]
            if len(members) < 2 or not any(a & b for i, a in enumerate(cases) for b in cases[i + 1 :]):
                continue
            for member, suffix in zip(members, key(members)):
                member.label = f"{member.label} {suffix}" if suffix else member.label


def _model_args(members: list[LoadedLog]) -> list[str]:
    args = [", ".join(f"{k}={v}" for k, v in sorted((m.log.eval.model_args or {}).items())) for m in members]
    return [f"{{{a}}}" if a else "" for a in args] if len(set(args)) > 1 else [""] * len(members)


def _folder_or_file(members: list[LoadedLog]) -> list[str]:
    folders = [Path(m.path).parent.name for m in members]
    names = folders if len(set(folders)) == len(folders) else [Path(m.path).name for m in members]
    return [f"[{name}]" for name in names]


def _flat(value: object) -> bool:
    return isinstance(value, str | int | float | bool) and not (isinstance(value, float) and math.isnan(value))


def sample_meta(sample) -> dict[str, object]:
    """The strata of a sample: sample metadata, else score metadata (e.g. the end reason)."""
    strata = benchmarks.strata()
    meta: dict[str, object] = {}
    for score in (sample.scores or {}).values():
        for key, value in (score.metadata or {}).items():
            if key in strata and _flat(value):
                meta.setdefault(key, value)
    for key, value in (sample.metadata or {}).items():
        if key in strata and _flat(value):
            meta[key] = value
    for scorer in _end_reason_scorers():  # a benchmark stratified by end reason: its scorer's answer
        outcome = (sample.scores or {}).get(scorer)
        if outcome is not None and outcome.answer:
            meta.setdefault("end_reason", outcome.answer)
    return meta


def _end_reason_scorers() -> list[str]:
    """The scorers whose answer is the end reason, of the benchmarks that have it as a stratum."""
    return [
        b.end_reason_scorer for b in benchmarks.all_benchmarks() if b.end_reason_scorer and "end_reason" in b.strata
    ]


def scores_frame(logs: Sequence[LoadedLog]) -> pd.DataFrame:
    """One row per (log, sample id, epoch, scorer, key): the float value (NaN = unscored) and the
    sample's strata as columns (every registered benchmark's, :func:`bedside.benchmarks.strata`)."""
    strata, skip = benchmarks.strata(), benchmarks.skip_keys()
    rows = []
    for item in logs:
        for sample in item.log.samples or []:
            meta = sample_meta(sample)
            for scorer, score in (sample.scores or {}).items():
                if scorer in DERIVED_SCORERS:  # the health block copies other scorers' keys
                    continue
                values = score.value if isinstance(score.value, dict) else {scorer: score.value}
                for key, value in values.items():
                    if key in skip or isinstance(value, str) or value is None:
                        continue
                    rows.append(
                        {
                            "label": item.label,
                            "benchmark": item.benchmark,
                            "log": item.path,
                            "id": str(sample.id),
                            "epoch": sample.epoch,
                            "scorer": scorer,
                            "key": key,
                            "value": as_float(value),
                            **{k: str(v) for k, v in meta.items()},
                        }
                    )
    columns = ["label", "benchmark", "log", "id", "epoch", "scorer", "key", "value", *strata]
    frame = pd.DataFrame(rows)
    for column in columns:
        if column not in frame:
            frame[column] = pd.Series(dtype=object if column in strata else float)
    return frame[columns]


def per_case(frame: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Epochs reduced to one value per case (their mean, NaN epochs left out), as Inspect reduces
    epochs before computing metrics: one row per (label, id, scorer, key, *by)."""
    keys = ["label", "id", "scorer", "key", *by]
    return frame.groupby(keys, dropna=False, sort=False)["value"].mean().reset_index()
