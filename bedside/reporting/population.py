"""Which samples a report averages: ``bedside report`` / ``bedside strata`` ``--population NAME``.

A benchmark whose paper names several populations declares them in its tools
(:attr:`bedside.cli.Tools.populations`: a module with ``POPULATIONS``, its default first, and
``in_population(sample, name)``). A log of a benchmark that declares ``NAME`` keeps only the samples of
that population; its default population, and the logs of benchmarks that do not declare ``NAME``, are
kept as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from bedside import benchmarks
from bedside.benchmark import Benchmark
from bedside.cli import PopulationModule, tools_of
from bedside.reporting.load import LoadedLog, benchmark_of
from bedside.reporting.run import Run


def _module(benchmark: Benchmark | None) -> PopulationModule | None:
    return tools_of(benchmark).populations if benchmark is not None else None


def choices() -> list[str]:
    """Every population some registered benchmark declares, in the registry's order."""
    names: list[str] = []
    for benchmark in benchmarks.REGISTRY:
        module = _module(benchmark)
        names += [n for n in (module.POPULATIONS if module else ()) if n not in names]
    return names


def described() -> str:
    """Each declaring benchmark's populations, its default first: for ``--population``'s help."""
    parts = []
    for benchmark in benchmarks.REGISTRY:
        module = _module(benchmark)
        if module:
            parts.append(f"{benchmark.title}: {', '.join(module.POPULATIONS)} (default {module.POPULATIONS[0]})")
    return "; ".join(parts)


def _filter(benchmark_name: str | None, population: str | None) -> Any:
    """``in_population`` of the benchmark, or None when its samples are kept as they are."""
    if population is None:
        return None
    if population not in choices():
        raise ValueError(f"population must be one of {', '.join(choices())}, not {population!r}")
    module = _module(benchmarks.get(benchmark_name)) if benchmark_name in benchmarks.names() else None
    if module is None or population not in module.POPULATIONS or population == module.POPULATIONS[0]:
        return None
    return module.in_population


def restrict_log(log: Run, population: str | None) -> Run:
    """``log`` with only the samples of ``population`` (module docstring)."""
    keep = _filter(benchmark_of(log), population)
    if keep is None:
        return log
    return replace(log, samples=[s for s in log.samples if keep(s, population)])


def restrict_frame(frame: pd.DataFrame, logs: Sequence[LoadedLog], population: str | None) -> pd.DataFrame:
    """The scores frame (:func:`bedside.reporting.load.scores_frame`) with each log's rows limited to the
    samples of ``population`` where its benchmark declares it."""
    kept: set[tuple[str, str, int]] = set()
    restricted: set[str] = set()
    for item in logs:
        keep = _filter(item.benchmark, population)
        if keep is None:
            continue
        restricted.add(item.path)
        kept |= {(item.path, str(s.id), s.epoch) for s in item.log.samples if keep(s, population)}
    if not restricted:
        return frame
    rows = [
        log not in restricted or (log, i, e) in kept for log, i, e in zip(frame["log"], frame["id"], frame["epoch"])
    ]
    return frame[pd.Series(rows, index=frame.index, dtype=bool)]


def restricted_benchmarks(logs: Sequence[LoadedLog], population: str | None) -> list[str]:
    """The titles of the benchmarks among ``logs`` whose samples ``population`` restricts."""
    return sorted({benchmarks.get(i.benchmark).title for i in logs if _filter(i.benchmark, population) is not None})


def shown(benchmark: Benchmark, population: str | None) -> str | None:
    """The population a benchmark's section averages: ``population`` where the benchmark declares it, else
    its default; None when it declares none."""
    module = _module(benchmark)
    if module is None:
        return None
    return population if population in module.POPULATIONS else module.POPULATIONS[0]
