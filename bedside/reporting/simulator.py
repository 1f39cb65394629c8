"""The simulator's own error rate in ``bedside report``: per log (its model under test), per patient model and
per persona trait, the share of checked transcripts with a simulator error (the ``simulator_check`` scorer,
:mod:`bedside.scorers.simulator`), overall and by kind, each with its n and 95 % Wilson interval.

A transcript counts where it was checked (a key that is NaN, e.g. a sample without a simulated patient or one
whose LLM checker stayed unreadable, is left out of that key's n). Logs without the scorer are listed as not
checked. ``--population simulator_clean`` leaves the flagged sessions out of a benchmark's tables
(:func:`clean`). Under the table: the rules' measured recall on the bedside corpus (:data:`CORPUS_RECORD`, written
by ``python -m bench.simulator_corpus --write``), per kind, on the corpus half the rules were not improved on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from inspect_ai.log import EvalLog, EvalSample, EvalSampleSummary

from bedside.intervals import wilson
from bedside.reporting.html import Page
from bedside.reporting.load import LoadedLog
from bedside.reporting.run import Run
from bedside.simulator_checks import KINDS

SCORER = "simulator_check"
#: the rules' recall and false alarms on the bedside corpus of simulated-patient turns, per half
CORPUS_RECORD = Path(__file__).with_name("simulator_corpus.yaml")
KEYS = ("simulator_error", *KINDS)
#: the population of the sessions without a simulator error (``--population``)
CLEAN = "simulator_clean"
CLEAN_COUNTED = (
    "sessions the simulator checks found no simulator error in (--population simulator_clean: flagged sessions, "
    "unchecked ones and those whose checker stayed unreadable left out)"
)


def clean(sample: EvalSample | EvalSampleSummary) -> bool:
    """Whether the simulator checks ran on ``sample`` and found no error (an unchecked sample is not clean)."""
    score = (sample.scores or {}).get(SCORER)
    value = score.value if score is not None and isinstance(score.value, dict) else {}
    return value.get("simulator_error") == 0.0


class AllOrClean:
    """The populations of a benchmark whose reports average every sample (``all``, the default) or only the
    samples the simulator checks ran on and found no error in (``simulator_clean``, :func:`clean`; a bedside
    extension): its tools' ``populations`` (:class:`bedside.cli.PopulationModule`)."""

    POPULATIONS = ("all", CLEAN)

    def in_population(self, sample: EvalSample | EvalSampleSummary, population: str) -> bool:
        if population not in self.POPULATIONS:
            raise ValueError(f"population must be one of {', '.join(self.POPULATIONS)}, not {population!r}")
        return population == "all" or clean(sample)


ALL_OR_CLEAN = AllOrClean()


def patient_model(log: EvalLog | Run) -> str:
    """The model that played the patient: the role's binding, else the model under test (the fallback)."""
    roles = log.eval.model_roles or {}
    bound = roles.get("patient")
    if bound is None:
        return f"{log.eval.model} (model under test: patient role unbound)"
    return str(getattr(bound, "model", bound))


def _rate(values: list[float]) -> dict[str, Any]:
    n = len(values)
    k = int(sum(values))
    low, high = wilson(k, n) if n >= 2 else (math.nan, math.nan)
    return {"rate": k / n if n else math.nan, "ci_lower": low, "ci_upper": high, "n": n}


def rates(logs: Sequence[LoadedLog]) -> pd.DataFrame:
    """One row per log × patient model × stratum (``all`` or a persona trait) × group × key: rate, Wilson
    interval, n (module docstring)."""
    rows = []
    for item in logs:
        scores = [(s.scores or {}).get(SCORER) for s in item.log.samples or []]
        checked = [s for s in scores if s is not None and isinstance(s.value, dict)]
        if not checked:
            continue
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {("all", "all"): []}
        for score in checked:
            keys: dict[str, Any] = dict(score.value)  # type: ignore[arg-type]  # a dict (checked above)
            groups[("all", "all")].append(keys)
            for trait, value in ((score.metadata or {}).get("persona") or {}).items():
                groups.setdefault((trait, str(value)), []).append(keys)
        for (stratum, group), values in groups.items():
            for key in KEYS:
                found = [float(v[key]) for v in values if isinstance(v.get(key), float) and not math.isnan(v[key])]
                rows.append(
                    {
                        "model": item.label,
                        "patient_model": patient_model(item.log),
                        "stratum": stratum,
                        "group": group,
                        "key": key,
                        **_rate(found),
                    }
                )
    return pd.DataFrame(rows)


def _shown(frame: pd.DataFrame) -> pd.DataFrame:
    """Wide: one row per log × patient model × group, one ``rate [lower, upper] (n)`` column per key."""

    def cell(row: pd.Series) -> str:
        if not row["n"]:
            return "n=0"
        interval = "" if math.isnan(row["ci_lower"]) else f" [{row['ci_lower']:.3f}, {row['ci_upper']:.3f}]"
        return f"{row['rate']:.3f}{interval} ({row['n']})"

    long = frame.assign(value=frame.apply(cell, axis=1))
    wide = long.pivot_table(
        index=["model", "patient_model", "stratum", "group"], columns="key", values="value", aggfunc="first", sort=False
    )
    wide = wide.reindex(columns=[k for k in KEYS if k in wide.columns])
    wide.columns.name = None  # no "key" header over the index columns
    return wide.reset_index()


def _share(counts: dict[str, int]) -> str:
    k, n = counts["k"], counts["n"]
    low, high = wilson(k, n)
    return f"{k}/{n} = {k / n:.2f} [{low:.2f}, {high:.2f}]"


def corpus_recall(record: dict[str, Any]) -> str:
    """The rules' measured recall and false alarms on the bedside corpus's held-out half, per kind, with n and
    95 % Wilson intervals, as one sentence."""
    held_out = record["splits"]["held_out"]
    recall = "; ".join(f"{kind} {_share(held_out['recall'][kind])}" for kind in KINDS)
    return (
        f"The rules' measured recall on the bedside corpus (tests/corpus/simulator_errors, its held-out half, which "
        f"the rules were not improved on; rules only, {record['measured']}, rules of {record['rules_commit']}): "
        f"{recall}. False alarms on its realistic patient turns: {_share(held_out['false_alarms_any'])} (any kind). "
        "The LLM checker's recall is not measured there; the rules miss a role reversal in words of its own, facts "
        "in words, drug classes and a persona's drift in its own voice, which only the LLM checker can see. "
        f"({record['command']}; docs/reports.md has both halves.)"
    )


def section(page: Page, logs: Sequence[LoadedLog], csv: Callable[[pd.DataFrame, str], str]) -> None:
    """The report's section (module docstring); nothing when no log has a simulated patient's checks."""
    frame = rates(logs)
    unchecked = [i.label for i in logs if not any(SCORER in (s.scores or {}) for s in i.log.samples or [])]
    if frame.empty:
        return
    page.heading("The simulator's own error rate")
    page.table(
        _shown(frame),
        csv(frame, "simulator_errors.csv"),
        "Share of checked transcripts in which the simulated patient broke its script (simulator_check: a fact "
        "not in its materials, a persona break, a role reversal, an early end or stall), per log, patient model "
        "and persona trait: rate [95 % Wilson interval] (n). --population simulator_clean leaves the flagged "
        "sessions out of the benchmarks' tables.",
    )
    page.note(corpus_recall(yaml.safe_load(CORPUS_RECORD.read_text(encoding="utf-8"))))
    if unchecked:
        page.note(f"Not checked (run with -T simulator_check=true): {', '.join(unchecked)}.")
