"""Reading eval logs into tidy pandas frames (one row per sample × score key).

Which benchmark a log belongs to, its strata, bookkeeping keys and variant arguments come from the
benchmark descriptors (:mod:`bedside.benchmarks`). Logs are read with
:func:`inspect_ai.log.read_eval_log`; a directory is expanded with :func:`inspect_ai.log.list_eval_logs`
(``.eval`` and ``.json``, recursively). Each log gets a *label*: the model under test, plus the task
arguments that change what is measured (each benchmark's descriptor's ``variant_args``) when they
are not the default. Logs with the same label are pooled.

The logs of a sharded run (``bedside scale``) are read as one log, with the numbers of the unsharded run
(:func:`read_logs`, :mod:`bedside.scale.merge`): every reader takes a run's folder (or its units' logs) as one
run, and refuses a missing or duplicated shard, or shards of different runs, in one line naming the shard.
Paths may be local or URLs Inspect reads (``s3://...``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from inspect_ai.log import EvalLog, list_eval_logs, read_eval_log

from bedside import benchmarks
from bedside.benchmarks import DERIVED_SCORERS
from bedside.reporting.scores import as_float
from bedside.scale.merge import ShardError, merge_runs

#: values of a variant argument that mean "the default run" (left out of a log's label)
NEUTRAL = (None, "none", "", 0, "0")


@dataclass
class LoadedLog:
    path: str
    log: EvalLog
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


def read_logs(paths: Iterable[str], **read: Any) -> list[tuple[str, EvalLog]]:
    """(path, log) of each run in ``paths`` (files or folders, :func:`expand`): a sharded run's units merged
    into one log whose path is the run's folder (:func:`bedside.scale.merge.merge_runs`; ``ShardError``, one
    line naming the shard, for a missing or duplicated shard or shards of different runs). ``read``:
    arguments of :func:`inspect_ai.log.read_eval_log`."""
    headers = [(path, read_eval_log(path, header_only=True)) for path in expand(paths)]
    merge_runs(headers)  # a missing or twice-given shard, or shards of different runs: refused before the samples
    return merge_runs([(path, read_eval_log(path, **read)) for path, _ in headers])


def read_run(path: str, **read: Any) -> EvalLog:
    """The one run at ``path`` (a log file, or a folder holding one run's logs, sharded or not); a folder of
    several runs, or one shard's log alone, is refused in one line."""
    runs = read_logs([path], **read)
    if len(runs) != 1:
        raise ShardError(f"{path}: holds {len(runs)} runs ({', '.join(p for p, _ in runs)}); pass one run")
    return runs[0][1]


def benchmark_of(log: EvalLog) -> str:
    """The registered benchmark's name (:func:`bedside.benchmarks.of_task`), else the task's name."""
    benchmark = benchmarks.of_task(log.eval.task)
    return benchmark.name if benchmark else log.eval.task.split("/")[-1]


#: the label of a run whose model under test is a person (``--model bedside/human``)
HUMAN_LABEL = "human"


def label_of(log: EvalLog) -> str:
    """The model under test and any non-default variant argument (each benchmark declares its own,
    :attr:`bedside.benchmarks.Benchmark.variant_args`; module docstring)."""
    args = log.eval.task_args or {}
    variants = [f"{k}={args[k]}" for k in benchmarks.variant_args() if args.get(k) not in NEUTRAL]
    model = HUMAN_LABEL if log.eval.model == "bedside/human" else log.eval.model  # a person: the human baseline
    return model + (f" ({', '.join(variants)})" if variants else "")


def load(paths: Sequence[str]) -> list[LoadedLog]:
    out = []
    for path, log in read_logs(paths):
        if log.status != "success":
            print(f"warning: {path} has status {log.status!r}; reporting the samples it holds", flush=True)
        out.append(LoadedLog(path=path, log=log, label=label_of(log), benchmark=benchmark_of(log)))
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
