"""One eval log's scores as a tidy table: the foundation of ``bedside strata`` and ``bedside compare``.

:func:`score_table` gives one row per (sample id, epoch, scorer, key) with the float value (NaN =
unscored); bookkeeping keys (:func:`bedside.benchmarks.skip_keys`) and string or missing values are
left out. :func:`own` drops the health block's copies of other scorers' keys
(:data:`bedside.benchmarks.DERIVED_SCORERS`). ``bedside report`` reads many logs at once through
:mod:`bedside.reporting.load` instead.
"""

from __future__ import annotations

from typing import SupportsFloat

import pandas as pd
from inspect_ai.log import EvalLog

from bedside import benchmarks
from bedside.benchmarks import DERIVED_SCORERS
from bedside.reporting.run import Run

COLUMNS = ["id", "epoch", "scorer", "key", "value"]


def as_float(value: object) -> float:
    """A score value (a number; strings and missing values are left out before) as a float;
    ``TypeError`` for a list or dict value, as ``float()`` raises."""
    if isinstance(value, float | int):  # nearly every value (bool among them): no protocol check (a sweep has ~10^5)
        return float(value)
    if not isinstance(value, SupportsFloat):
        raise TypeError(f"score value {value!r} is not a number")
    return float(value)


def score_table(log: EvalLog | Run) -> pd.DataFrame:
    """One row per (sample id, epoch, scorer, key) with the float value (NaN = unscored)."""
    skip = benchmarks.skip_keys()
    rows = []
    for sample in log.samples or []:
        for scorer, score in (sample.scores or {}).items():
            values = score.value if isinstance(score.value, dict) else {scorer: score.value}
            for key, value in values.items():
                if key in skip or isinstance(value, bool | str) or value is None:
                    continue
                rows.append(
                    {
                        "id": str(sample.id),
                        "epoch": sample.epoch,
                        "scorer": scorer,
                        "key": key,
                        "value": as_float(value),
                    }
                )
    return pd.DataFrame(rows, columns=COLUMNS)


def own(table: pd.DataFrame) -> pd.DataFrame:
    """Without the health block's copies of other scorers' keys."""
    return table[~table["scorer"].isin(DERIVED_SCORERS)]


def label(log: EvalLog | Run) -> str:
    """``task [variant=value ...] (model)``: how ``strata`` and ``audit`` name a log: its task (without the
    ``bedside/`` prefix), the variant arguments its benchmark declares (``variant_args``, e.g.
    ``behavior``) that its task arguments hold, and the model under test."""
    args = log.eval.task_args or {}
    variants = [f" {k}={args[k]}" for k in benchmarks.variant_args() if k in args]
    return f"{log.eval.task.split('/')[-1]}{''.join(variants)} ({log.eval.model})"
