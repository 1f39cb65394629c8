"""``bedside estimate``: the bill before the run, from one or more pilot logs.

    bedside estimate logs/pilot/*.eval --cases 500 --epochs 3 --max-connections 16 \\
        --model openai/gpt-5.5 --model-role grader=openai/gpt-5.5-mini --prices my_prices.yaml

For a planned run (``--cases`` × ``--epochs`` samples) it prints the expected model calls, input,
cached-input and output tokens per role and per protocol (the call's reply protocol, from its tag),
the wall time at ``--max-connections`` and the cost from the price table the user passes (nothing is
fetched; the table's format is ``bedside report``'s, :mod:`bedside.reporting.usage`), each with an
interval from the pilot's spread.

- **Unit**: the pilot sample (one case in one epoch): its calls, tokens and time. Every planned
  sample is taken to cost like a pilot sample drawn at random; tokens are the pilot models' counts
  (a planned model with another tokenizer counts differently) and each role's cost uses the price of
  the model the plan names for it (``--model`` for the model under test, ``--model-role``; default: the
  pilot's model of that role).
- **Interval** (``--level``, default 0.9): a predictive bootstrap over the pilot samples. Each
  replicate resamples the pilot, then draws the planned total as ``M·mean + √M·sd·z`` (M planned samples;
  the sum of M draws, by the central limit theorem): it holds both the pilot's uncertainty about the
  mean and the spread of the planned cases themselves. A pilot of a few cases gives a wide interval.
- **Wall time**: the samples' summed time divided by the concurrency ``min(max_connections, M)``
  (Inspect runs up to ``max_samples = max_connections`` samples at once), never below the longest
  pilot sample. It assumes that the servers keep up at that concurrency; a pilot run at another
  concurrency times its samples under other contention, and a pilot's first samples also pay the
  process's start-up (loading the scorers' embedding model), so a short pilot overestimates wall time.
- **Judges batched** (``--batch ROLE``, repeatable, e.g. ``--batch grader``): the role's calls are priced
  as calls through the provider's batch API, its model's prices less its ``batch_discount`` in the price
  table (the fraction off, a column the user sets; :mod:`bedside.reporting.usage`); the other roles live.
  Calls and tokens do not change. Only calls that need no reply within the run can go through a batch: the
  judges, after the conversations (the two-step run, docs/reports.md); a conversation role can be priced
  batched but would wait a batch's turnaround at every turn.
- **Judge panels** (a role bound to several models, :mod:`bedside.panel`): a pilot judged by a panel holds
  every judge's calls, so the grader's calls and tokens are the panel's (n judges × the calls of one), and
  each judge's calls are priced at its own model. A planned panel from another pilot
  (``--model-role grader=a,b,c``): the role's calls per pilot judge, made by each planned judge and priced at
  its model (wall time unchanged: a panel's judges are asked concurrently).
- Calls served from Inspect's local cache are counted as calls but not as tokens (as in the report).
- Sample time: Inspect's ``total_time`` of each pilot sample. Person hours (a pilot with
  ``bedside/human``): each pilot sample's person-time is the union of its human calls' working intervals
  (:mod:`bedside.person_time`), never the time a call waited; the pilot's own person-time (the union
  over all its samples: tabs open side by side count once) is printed beside the estimate.

**How many cases and epochs** (``--detect D``): the cases a paired comparison of two models needs so
that a true difference of D is detected with ``--power`` (default 0.8) at ``--alpha`` (default 0.05),
for 1, 2, 3 and 5 epochs and the planned ``--epochs``, per score key (``--metric``, repeatable; default
the ranked keys of the pilot's benchmark), from the pilot's variance components (between cases, and
within a case over its epochs: a pilot with two or more epochs measures the run-to-run noise) or from a
stated SD of the per-case paired difference (``--sd``); :mod:`bedside.reporting.detectable` gives the
formula. ``--cases`` may then be left out (no bill); with it, the bill follows.

    bedside estimate logs/pilot/*.eval --detect 0.05 --metric failure --epochs 3
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bedside import benchmarks
from bedside.cli import BadInput, add_command, bad_input
from bedside.person_time import person_seconds
from bedside.protocols import tag_of
from bedside.reporting import detectable
from bedside.reporting.load import expand, load, read_header, read_runs, scores_frame
from bedside.reporting.usage import batch_price, cost, load_prices, price_of
from bedside.sample_usage import BATCH, LIVE

#: the per-sample quantities estimated
FIELDS = ("calls", "input_tokens", "input_tokens_cache_read", "output_tokens")


@dataclass
class Pilot:
    """Per pilot sample (rows: (log, case, epoch)): calls and tokens per (role, role model, protocol),
    the sample's seconds and the person's seconds."""

    calls: pd.DataFrame  # one row per (sample, role, role_model, protocol) with FIELDS
    samples: pd.DataFrame  # one row per sample: seconds, human_seconds (its person-time)
    person_seconds: float = 0.0  # the pilot's person-time: the union of every human call's working intervals


def subject_of(task: str) -> str:
    """The role name of the model under test in a log of ``task`` (e.g. ``educator``)."""
    found = benchmarks.of_task(task)
    return found.subject_role if found is not None else "model under test"


def read_pilot(paths: Sequence[str | Path]) -> Pilot:
    """The pilot's logs (files or folders; a sharded run's logs as one run)."""
    rows: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    human_outputs: list[dict[str, Any]] = []
    for log in read_runs([str(p) for p in paths]):
        path = log.path
        if not log.samples:
            raise ValueError(f"{path}: the log holds no samples (was it written with --no-log-samples?)")
        subject = subject_of(log.eval.task)
        for sample in log.transcripts():  # its model calls: one sample at a time
            key = f"{path}|{sample.id}|{sample.epoch}"
            human: list[dict[str, Any]] = []
            for event in sample.events:
                if event.event != "model":
                    continue
                tag = tag_of(list(event.input))
                usage = event.output.usage if event.output is not None and event.cache != "read" else None
                row = {
                    "sample": key,
                    "role": event.role or subject,
                    "role_model": event.model,
                    "protocol": tag.name if tag else "untagged",
                    "calls": 1,
                }
                for field in FIELDS[1:]:
                    row[field] = int(getattr(usage, field, None) or 0) if usage is not None else 0
                rows.append(row)
                meta = event.output.metadata if event.output is not None else None
                if meta and meta.get("human"):
                    human.append(meta)
            human_outputs += human
            samples.append(
                {"sample": key, "seconds": float(sample.total_time or 0.0), "human_seconds": person_seconds(human)}
            )
    calls = pd.DataFrame(rows, columns=["sample", "role", "role_model", "protocol", *FIELDS])
    return Pilot(calls=calls, samples=pd.DataFrame(samples), person_seconds=person_seconds(human_outputs))


def planned_panels(calls: pd.DataFrame, models: dict[str, str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The pilot's calls as a plan that binds a role to a panel (``grader=a,b,c``) would make them: per planned
    judge, the role's calls divided among the pilot's judges of that role (module docstring), each the planned
    judge's; the roles so planned leave ``models`` (each call is priced at its own judge)."""
    out, plan = calls, dict(models)
    for role, named in models.items():
        judges = [m.strip() for m in named.split(",") if m.strip()]
        if len(judges) < 2:
            continue
        mine = out[out["role"] == role]
        share = mine.assign(**{f: mine[f] / max(1, mine["role_model"].nunique()) for f in FIELDS})
        out = pd.concat([out[out["role"] != role], *(share.assign(role_model=j) for j in judges)], ignore_index=True)
        del plan[role]
    return out, plan


def predictive_totals(values: np.ndarray, planned: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap draws of the total of ``planned`` samples like ``values`` (one value per pilot sample)
    (module docstring)."""
    n = len(values)
    resampled = values[rng.integers(0, n, size=(draws, n))]
    mean, sd = resampled.mean(axis=1), resampled.std(axis=1, ddof=1) if n > 1 else np.zeros(draws)
    totals = planned * mean + math.sqrt(planned) * sd * rng.standard_normal(draws)
    return np.clip(totals, 0, None)


def summarise(point: float, draws: np.ndarray, level: float) -> dict[str, float]:
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return {"estimate": point, "low": float(lo), "high": float(hi)}


def estimate(
    pilot: Pilot,
    cases: int,
    epochs: int = 1,
    max_connections: int = 10,
    models: dict[str, str] | None = None,
    prices: dict | None = None,
    level: float = 0.9,
    draws: int = 4000,
    seed: int = 0,
    batched: Sequence[str] = (),
) -> dict[str, pd.DataFrame]:
    """Tables ``by_role``, ``by_protocol`` and ``totals`` (each quantity: estimate, low, high); ``batched``:
    the roles priced through the batch API (module docstring). Raises ValueError (one line) for a batched
    role the pilot does not have, or whose model's price has no ``batch_discount``."""
    roles = sorted(set(pilot.calls["role"]))
    if unknown := sorted(set(batched) - set(roles)):
        raise ValueError(f"--batch {', '.join(unknown)}: no such role in the pilot (roles: {', '.join(roles)})")
    planned = cases * epochs
    ids = list(pilot.samples["sample"])
    rng = np.random.default_rng(seed)
    calls, models = planned_panels(pilot.calls, dict(models or {}))

    def per_sample(frame: pd.DataFrame, column: str) -> np.ndarray:
        return frame.groupby("sample")[column].sum().reindex(ids, fill_value=0).to_numpy(dtype=float)

    def table(by: list[str]) -> pd.DataFrame:
        out = []
        cost_draws = np.zeros(draws)
        for key, group in calls.groupby(by, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            row: dict[str, Any] = dict(zip(by, key, strict=True))
            role = row.get("role")
            named = models.get(str(role)) if role is not None else None
            # each call priced at the model the plan names for its role, else at the model that made it
            priced_by = [(named, group)] if named else [(str(m), part) for m, part in group.groupby("role_model")]
            state = rng.bit_generator.state  # the same bootstrap draws for every quantity of a row
            sample_cost = np.zeros(len(ids))
            for field in FIELDS:
                values = per_sample(group, field)
                rng.bit_generator.state = state
                d = predictive_totals(values, planned, draws, rng)
                s = summarise(planned * values.mean(), d, level)
                row.update({field: s["estimate"], f"{field}_low": s["low"], f"{field}_high": s["high"]})
            if prices is not None and role is not None:
                row["mode"] = BATCH if role in batched else LIVE
                for model, part in priced_by:
                    price = price_of(model, prices)
                    if role in batched and price is not None:
                        price = batch_price(price)
                        if price is None:
                            raise ValueError(
                                f"--batch {role}: the price table {prices.get('source', '')} sets no batch_discount "
                                f"for {model} (the fraction off for its batch API, e.g. batch_discount: 0.5)"
                            )
                    sample_cost = sample_cost + np.array(
                        [
                            cost(
                                {f: v for f, v in zip(FIELDS[1:], vals, strict=True)},
                                price,
                                prices["per_tokens"],
                            )
                            for vals in zip(*(per_sample(part, f) for f in FIELDS[1:]), strict=True)
                        ]
                    )
                rng.bit_generator.state = state
                priced = not np.isnan(sample_cost).any()
                d = predictive_totals(sample_cost, planned, draws, rng) if priced else np.zeros(draws)
                row["priced_as"] = " + ".join(model for model, _ in priced_by)
                if not priced:
                    row.update({"cost": math.nan, "cost_low": math.nan, "cost_high": math.nan})
                else:
                    s = summarise(planned * sample_cost.mean(), d, level)
                    row.update({"cost": s["estimate"], "cost_low": s["low"], "cost_high": s["high"]})
                    cost_draws = cost_draws + d
            out.append(row)
        return pd.DataFrame(out)

    by_role = table(["role"])
    by_protocol = table(["role", "protocol"])
    totals: dict[str, Any] = {"samples": planned, "pilot_samples": len(ids)}
    state = rng.bit_generator.state
    for field in FIELDS:
        values = per_sample(calls, field)
        rng.bit_generator.state = state
        s = summarise(planned * values.mean(), predictive_totals(values, planned, draws, rng), level)
        totals.update({field: s["estimate"], f"{field}_low": s["low"], f"{field}_high": s["high"]})
    seconds = pilot.samples["seconds"].to_numpy(dtype=float)
    concurrency = max(1, min(max_connections, planned))
    floor = float(seconds.max()) if len(seconds) else 0.0
    d = np.maximum(predictive_totals(seconds, planned, draws, rng) / concurrency, floor)
    s = summarise(max(planned * seconds.mean() / concurrency, floor), d, level)
    totals.update({"wall_seconds": s["estimate"], "wall_seconds_low": s["low"], "wall_seconds_high": s["high"]})
    human = pilot.samples["human_seconds"].to_numpy(dtype=float)
    if human.any():
        s = summarise(planned * human.mean() / 3600, predictive_totals(human, planned, draws, rng) / 3600, level)
        totals.update({"person_hours": s["estimate"], "person_hours_low": s["low"], "person_hours_high": s["high"]})
        totals["pilot_person_hours"] = pilot.person_seconds / 3600
    if prices is not None and "cost" in by_role:
        totals["cost"] = float(by_role["cost"].sum(min_count=1))
    return {"by_role": by_role, "by_protocol": by_protocol, "totals": pd.DataFrame([totals])}


# -- the command --------------------------------------------------------------------------------


def _fmt(value: float, low: float, high: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    f = f"{{:,.{digits}f}}"
    return f"{f.format(value)} [{f.format(low)}, {f.format(high)}]"


def render(tables: dict[str, pd.DataFrame], level: float, currency: str = "") -> str:
    lines = []
    totals = tables["totals"].iloc[0].to_dict()
    pct = f"{level:.0%}"
    lines.append(
        f"planned: {int(totals['samples'])} samples, from a pilot of {int(totals['pilot_samples'])} "
        f"(intervals: {pct}, predictive bootstrap)"
    )
    for name, by in (("per role", ["role"]), ("per protocol", ["role", "protocol"])):
        lines.append(f"\n{name}:")
        for row in tables["by_role" if by == ["role"] else "by_protocol"].to_dict("records"):
            label = " / ".join(str(row[k]) for k in by)
            shown = {
                "calls": "calls",
                "input_tokens": "input",
                "input_tokens_cache_read": "cached",
                "output_tokens": "output",
            }
            text = f"  {label:<42}" + "".join(
                f" {name} {_fmt(row[f], row[f + '_low'], row[f + '_high'])}" for f, name in shown.items()
            )
            if "cost" in row:
                cost_text = _fmt(row["cost"], row["cost_low"], row["cost_high"], 2)
                discount = " through the batch API" if row.get("mode") == "batch" else ""
                text += f"  cost {cost_text} {currency} ({row.get('priced_as')}{discount})"
            lines.append(text)
    lines.append("\ntotal:")
    for field in FIELDS:
        lines.append(f"  {field:<24} {_fmt(totals[field], totals[field + '_low'], totals[field + '_high'])}")
    minutes = {k: totals[f"wall_seconds{k}"] / 60 for k in ("", "_low", "_high")}
    lines.append(f"  {'wall time (minutes)':<24} {_fmt(minutes[''], minutes['_low'], minutes['_high'], 1)}")
    if "person_hours" in totals:
        lines.append(
            f"  {'person hours':<24} "
            f"{_fmt(totals['person_hours'], totals['person_hours_low'], totals['person_hours_high'], 1)}"
            f"  (the pilot: {totals['pilot_person_hours']:.2f} h worked, the union of its working intervals)"
        )
    if "cost" in totals and not math.isnan(totals["cost"]):
        by_role = tables["by_role"]
        batched = sorted(by_role.loc[by_role["mode"] == "batch", "role"]) if "mode" in by_role else []
        through = f"; {', '.join(batched)} through the batch API" if batched else "; every role live"
        lines.append(f"  {'cost':<24} {totals['cost']:,.2f} {currency} (sum of the roles' estimates{through})")
    return "\n".join(lines)


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        if "=" not in value:
            raise SystemExit(f"bedside estimate: {what} expects role=model, got {value!r}")
        role, model = value.split("=", 1)
        out[role.strip()] = model.strip()
    return out


def detection(args: argparse.Namespace) -> None:
    """The cases and epochs ``--detect`` needs (module docstring), printed and, with ``--csv``, written;
    :class:`~bedside.cli.BadInput` when the pilot has no case to plan from."""
    logs = load(args.logs)
    ranked = (k for i in logs if i.benchmark in benchmarks.names() for k in benchmarks.get(i.benchmark).ranked)
    keys = args.metric or list(dict.fromkeys(ranked))
    epochs = sorted({*detectable.PLANNED_EPOCHS, args.epochs})
    table = detectable.needs(scores_frame(logs), args.detect, keys, epochs, args.sd, args.power, args.alpha)
    if table.empty:
        raise BadInput(
            "estimate",
            f"no two pilot cases scored on {', '.join(keys) or 'a ranked key'} by every model: "
            "nothing to plan from (--metric names a score key of the logs; or state --sd)",
        )
    print(detectable.render(table, args.detect, args.power, args.alpha))
    if args.csv:
        Path(args.csv).mkdir(parents=True, exist_ok=True)
        table.to_csv(Path(args.csv) / "detect.csv", index=False)


def run(args: argparse.Namespace) -> int:
    if args.detect is None and args.cases is None:
        raise BadInput("estimate", "give --cases N (the bill of a planned run) and/or --detect D (the cases it needs)")
    if args.detect is not None:
        detection(args)
        if args.cases is None:
            return 0
        print()
    with bad_input("estimate", FileNotFoundError, ValueError):
        pilot = read_pilot(args.logs)
    models = _pairs(args.model_role or [], "--model-role")
    if args.model:
        for log in map(read_header, expand(args.logs)):
            models.setdefault(subject_of(log.eval.task), args.model)
    prices = load_prices(args.prices) if args.prices else None
    if args.batch and prices is None:
        raise BadInput("estimate", "--batch prices a role's calls through the batch API: it needs --prices FILE.yaml")
    with bad_input("estimate", ValueError):
        tables = estimate(
            pilot,
            cases=args.cases,
            epochs=args.epochs,
            max_connections=args.max_connections,
            models=models,
            prices=prices,
            level=args.level,
            seed=args.seed,
            batched=args.batch or (),
        )
    print(render(tables, args.level, (prices or {}).get("currency", "")))
    if prices is None:
        print("\n(no --prices FILE.yaml: no cost; the format is bedside report's price table)")
    if args.csv:
        out = Path(args.csv)
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in tables.items():
            frame.to_csv(out / f"{name}.csv", index=False)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """The ``estimate`` sub-command (module docstring)."""
    summary = "expected calls, tokens, wall time and cost of a planned run, from pilot logs"
    p = add_command(sub, "estimate", summary, None, run)
    p.add_argument("logs", nargs="+", help="pilot .eval logs (a few cases)")
    p.add_argument("--cases", type=int, help="cases in the planned run (for its bill)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-connections", type=int, default=10, help="concurrent samples of the planned run")
    p.add_argument("--model", help="model under test of the planned run (for its price)")
    p.add_argument(
        "--model-role",
        action="append",
        help="role=model of the planned run (for its price; a judge panel: grader=a,b,c); repeatable",
    )
    p.add_argument("--prices", help="price table (YAML, bedside report's format: per million tokens)")
    p.add_argument(
        "--batch",
        action="append",
        metavar="ROLE",
        help="price ROLE's calls through the provider's batch API (the price table's batch_discount), "
        "e.g. --batch grader for judges run after the conversations; repeatable",
    )
    p.add_argument("--level", type=float, default=0.9, help="interval level (default 0.9)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--csv", help="also write the tables as CSV files into this folder")
    p.add_argument(
        "--detect",
        type=detectable.positive_number,
        metavar="D",
        help="the difference between two models the planned run must detect: print the cases it needs per epochs",
    )
    p.add_argument("--metric", action="append", metavar="KEY", help="score key of --detect; repeatable")
    p.add_argument(
        "--sd",
        type=detectable.positive_number,
        help="--detect: the SD of a case's paired difference (else from the pilot)",
    )
    detectable.add_options(p, "--detect's minimum detectable difference", pass_k=False)
