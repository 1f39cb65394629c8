"""Token usage and cost per case and per role.

Inspect records every model call as a ``ModelEvent`` with the ``role`` it was made for (``None`` for
the model under test: the educator, examinee or doctor) and the provider's ``output.usage``; the
log's ``stats.role_usage`` holds the per-role totals. Tokens here are summed from the events per case, role,
model and mode (:mod:`bedside.sample_usage`); calls served from Inspect's local generation cache
(``event.cache == "read"``) are counted as ``cached_calls`` but neither in the tokens nor in the
cost, exactly as Inspect leaves them out of ``stats.role_usage`` / ``stats.model_usage``. A sample's sums are
read from the record its health score made when it ended, in its summary (no sample is opened); a sample
without a whole record (a log written before bedside recorded it, a sample that erred before its scorers ran)
is read from its events, one sample at a time.

Cost = tokens × the price table's prices (:data:`DEFAULT_PRICES`, a user-editable YAML file whose
shipped prices are EXAMPLES; ``bedside report --prices FILE.yaml``).

A call sent through a provider's batch API (Inspect's batch mode: the call's generate config has ``batch``,
recorded in its ``ModelEvent.config``) is in ``mode`` ``batch``, any other in ``mode`` ``live``. A batched call
costs its model's prices less the model's ``batch_discount`` in the price table (the fraction off, e.g.
``0.5``: half price; a column the user sets, as the prices). A batched call of a model without one is priced
at the full price and named by :func:`undiscounted`.

Where a person played a role (``bedside/human``: its calls' outputs carry ``human`` and their working intervals in
their metadata), the same record (or pass over the events) gives the person's working time: a row's
``person_seconds`` is the union of its person's calls' working intervals
(:func:`bedside.person_time.person_seconds`: reading and typing, never waiting; empty for a model's row), and
:func:`person_time` summarises it per role.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from inspect_ai.log import EvalSampleSummary

from bedside import benchmarks, sample_usage
from bedside.intervals import COUNT, summarise
from bedside.reporting.load import LoadedLog
from bedside.reporting.run import Run
from bedside.sample_usage import BATCH, TOKEN_FIELDS

#: price of each token field (cache prices default to the input price)
PRICE_FIELDS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "input_tokens_cache_read": "input_cache_read",
    "input_tokens_cache_write": "input_cache_write",
}


def default_prices_path() -> Path:
    return Path(str(resources.files("bedside.reporting").joinpath("prices.yaml")))


def load_prices(path: str | Path | None = None) -> dict:
    path = Path(path) if path else default_prices_path()
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data.get("models", {}), dict):
        raise ValueError(f"{path}: 'models' must map model names to prices")
    for name, price in (data.get("models") or {}).items():
        if not isinstance(price, dict) or not {"input", "output"} <= set(price):
            raise ValueError(f"{path}: model {name!r} needs 'input' and 'output' prices")
        discount = price.get("batch_discount")
        if discount is not None and (
            isinstance(discount, bool) or not isinstance(discount, int | float) or not 0 <= discount < 1
        ):
            raise ValueError(
                f"{path}: model {name!r}: batch_discount is the fraction off (0 to 1, e.g. 0.5), got {discount!r}"
            )
    data.setdefault("per_tokens", 1_000_000)
    data.setdefault("currency", "")
    data["source"] = str(path)
    return data


def price_of(model: str, prices: dict) -> dict | None:
    table = prices.get("models") or {}
    if model in table:
        return table[model]
    for pattern, price in table.items():
        if fnmatch.fnmatchcase(model, pattern):
            return price
    return None


def batch_price(price: dict | None) -> dict | None:
    """The prices of a batched call: every rate less the model's ``batch_discount``; None when the price table
    has no ``batch_discount`` for the model (or no price)."""
    if price is None or price.get("batch_discount") is None:
        return None
    factor = 1.0 - float(price["batch_discount"])
    rates = {name: price.get(name, price["input"]) for name in PRICE_FIELDS.values()}
    return {name: float(rate) * factor for name, rate in rates.items()}


def price_in_mode(model: str, mode: str, prices: dict) -> dict | None:
    """The prices of a call of ``model`` in ``mode`` (module docstring): a batched call at its batch price,
    or at the full price when the table sets no ``batch_discount`` for the model."""
    price = price_of(model, prices)
    return (batch_price(price) or price) if mode == BATCH else price


def cost(row: dict, price: dict | None, per_tokens: float) -> float:
    if price is None:
        return math.nan
    total = 0.0
    for field, name in PRICE_FIELDS.items():
        rate = price.get(name, price["input"] if name.startswith("input") else None)
        total += float(row.get(field) or 0) * float(rate or 0)
    return total / float(per_tokens)


def usage_by_case(logs: Sequence[LoadedLog], prices: dict) -> pd.DataFrame:
    """One row per (model label, case, epoch, role, model serving the role, mode): calls, cached calls,
    tokens, cost and a person's working time (each sample's from its summary's record, else from its events: module
    docstring)."""
    rows: dict[tuple, dict] = {}
    for item in logs:
        subject = benchmarks.subject_role(item.benchmark)
        for sample, calls in sample_calls(item.log):
            for call in calls:
                role = call["role"] or subject
                key = (item.label, str(sample.id), sample.epoch, role, call["model"], call["mode"])
                row = rows.setdefault(
                    key,
                    dict(zip(("model", "id", "epoch", "role", "role_model", "mode"), key))
                    | {name: 0 for name in sample_usage.COUNTS}
                    | {sample_usage.PERSON: None},
                )
                for name in sample_usage.COUNTS:
                    row[name] += call[name]
                if call[sample_usage.PERSON] is not None:  # a person's working seconds (the one row of its role)
                    row[sample_usage.PERSON] = (row[sample_usage.PERSON] or 0.0) + call[sample_usage.PERSON]
    frame = pd.DataFrame(
        list(rows.values()),
        columns=["model", "id", "epoch", "role", "role_model", "mode", "calls", "cached_calls", *TOKEN_FIELDS],
    )
    frame["cost"] = [
        cost(r, price_in_mode(r["role_model"], r["mode"], prices), prices["per_tokens"])
        for r in frame.to_dict("records")
    ]
    worked = [r[sample_usage.PERSON] for r in rows.values()]
    frame["person_seconds"] = [math.nan if seconds is None else seconds for seconds in worked]
    return frame


def sample_calls(run: Run) -> Iterator[tuple[EvalSampleSummary, list[dict[str, Any]]]]:
    """Each sample's record of ``run`` with its usage rows (:mod:`bedside.sample_usage`), in the run's order: from
    the record its health score made, else from its events (the sample read whole, one at a time: Inspect parses
    a sample with ``exclude_fields`` in pure Python, slower than whole)."""
    for sample in run.samples:
        recorded = sample_usage.read(sample.scores)
        if recorded is None:
            recorded = sample_usage.rows_of(run.sample(sample.id, sample.epoch).events or [])
        yield sample, recorded


def person_time(by_case: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The roles a person played: (per role, per case). Per case: its replies (the person's calls) and working
    seconds. Per (model label, role): cases, replies per case and working minutes per case, each a mean with
    its 95 % interval and n (:mod:`bedside.intervals`), and the total."""
    played = by_case[by_case["person_seconds"].notna()]
    per_case = (
        played.groupby(["model", "id", "epoch", "role"], sort=True)
        .agg(replies=("calls", "sum"), person_seconds=("person_seconds", "sum"))
        .reset_index()
    )
    rows = []
    for (label, role), cases in per_case.groupby(["model", "role"], sort=True):
        replies = summarise(cases["replies"].tolist(), COUNT)
        minutes = summarise((cases["person_seconds"] / 60).tolist(), COUNT)
        rows.append(
            {
                "model": label,
                "role": role,
                "cases": len(cases),
                "replies_per_case": replies["mean"],
                "replies_ci_lower": replies["ci_lower"],
                "replies_ci_upper": replies["ci_upper"],
                "minutes_per_case": minutes["mean"],
                "minutes_ci_lower": minutes["ci_lower"],
                "minutes_ci_upper": minutes["ci_upper"],
                "n": minutes["n"],
                "total_minutes": float(cases["person_seconds"].sum() / 60),
            }
        )
    return pd.DataFrame(rows), per_case


def usage_by_role(by_case: pd.DataFrame) -> pd.DataFrame:
    """Per (model label, role, model serving it, mode): cases, calls, tokens, total cost and cost per case."""
    sums = ["calls", "cached_calls", *TOKEN_FIELDS]
    grouped = by_case.groupby(["model", "role", "role_model", "mode"], sort=True)
    out = grouped[sums].sum()
    out.insert(0, "cases", grouped.size())
    # min_count=1: a role whose model has no price gets no cost, not 0
    out["cost"] = grouped["cost"].sum(min_count=1)
    out["cost_per_case"] = out["cost"] / out["cases"]
    return out.reset_index()


def cost_per_case(by_case: pd.DataFrame) -> pd.DataFrame:
    """Total tokens and cost of each case (all roles)."""
    grouped = by_case.groupby(["model", "id", "epoch"], sort=True)
    out = grouped[["calls", "input_tokens", "output_tokens", "total_tokens"]].sum()
    out["cost"] = grouped["cost"].sum(min_count=1)
    return out.reset_index()


def unpriced(by_case: pd.DataFrame) -> list[str]:
    return sorted(set(by_case.loc[by_case["cost"].isna(), "role_model"]))


def undiscounted(by_case: pd.DataFrame, prices: dict) -> list[str]:
    """The models whose batched calls were priced at the full price: the table sets no ``batch_discount``."""
    batched = set(by_case.loc[by_case["mode"] == BATCH, "role_model"])
    return sorted(m for m in batched if price_of(m, prices) is not None and batch_price(price_of(m, prices)) is None)
