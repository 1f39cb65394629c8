"""Judge panels in ``bedside report``: who judged, judges of the model under test's family, and how far the
judges of a panel agree, per score key.

A run whose ``grader`` role was bound to several models (:mod:`bedside.panel`) keeps, in each score's metadata
(``panel``), every judge's verdict on every judged item (a checklist question, a rubric item, a Likert axis,
a yes/no verdict of its own), the panel's verdict and the judges that could not be read. From those records:

- ``panel_agreement.csv``: per run and score key (the key each item counts toward, with the rule it declares:
  :attr:`bedside.score_keys.ScoreKey.panel`): the judges, the cases and items judged, **Krippendorff's alpha**
  (the ``krippendorff`` package; nominal for a ``majority`` key's yes/no verdicts, interval for a ``mean``
  key's scores; a judge's missing or unreadable verdict is missing data, which alpha allows) with its 95 %
  interval (percentile bootstrap over cases, :func:`bedside.intervals.case_bootstrap`: a case's items and
  epochs are drawn together), the judge calls left unparsed and the ties the tie rule decided;
- ``panel_judges.csv``: per run, key and judge: the items the judge answered and how it stands to the
  panel's verdict — the share of its verdicts equal to the panel's (``majority``), or its mean difference
  from the panel's score (``mean``: a judge with a bias shows it here, as its offset × (k - 1) / k), each with
  its n items and cases and a 95 % case-bootstrap interval;
- a warning line for every run whose judge (one grader or a panel's) is of the model under test's family
  (:mod:`bedside.families`; read from the log's header, so a one-grader run is flagged too).

The section is left out when no log has a panel and no judge is of the model under test's family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from bedside.benchmarks import score_key
from bedside.families import same_family
from bedside.intervals import AGREEMENT_RESAMPLES, COSINE, UNIT, Scale, case_bootstrap
from bedside.panel import rule
from bedside.reporting.detectable import width_of
from bedside.reporting.html import Page
from bedside.reporting.load import LoadedLog
from bedside.reporting.tables import fmt

#: alpha's scale as reported (alpha is at most 1; below -1 only on degenerate data)
ALPHA_SCALE = COSINE
LEVELS: dict[str, Literal["nominal", "interval"]] = {"majority": "nominal", "mean": "interval"}


def votes_frame(logs: Sequence[LoadedLog]) -> pd.DataFrame:
    """One row per run, judged item and judge: ``model`` (the run's label), ``case`` (sample id), ``epoch``,
    ``unit`` (the item within its sample, score and call), ``key``, ``judge``, ``vote`` (NaN: the judge gave no
    readable verdict on it), ``verdict`` (the panel's), ``tie``."""
    rows: list[dict[str, Any]] = []
    for item in logs:
        for sample in item.log.samples or []:
            for scorer, score in (sample.scores or {}).items():
                for call, record in enumerate((score.metadata or {}).get("panel") or []):
                    for name, verdict in record["verdict"].items():
                        unit = f"{sample.id}|{sample.epoch}|{scorer}|{call}|{name}"
                        for judge, votes in zip(record["judges"], record["votes"]):
                            value = (votes or {}).get(name)
                            rows.append(
                                {
                                    "model": item.label,
                                    "case": str(sample.id),
                                    "epoch": sample.epoch,
                                    "unit": unit,
                                    "key": record["keys"][name],
                                    "judge": judge,
                                    "vote": math.nan if value is None else float(value),
                                    "verdict": float(verdict),
                                    "tie": name in record["ties"],
                                }
                            )
    return pd.DataFrame(rows)


def unparsed_frame(logs: Sequence[LoadedLog]) -> pd.DataFrame:
    """One row per run, panel call, key and judge: ``model``, ``key`` (the protocol's name when no judge answered),
    ``judge``, ``unparsed`` (its reply stayed unreadable, or its call failed)."""
    rows = []
    for item in logs:
        for sample in item.log.samples or []:
            for score in (sample.scores or {}).values():
                for record in (score.metadata or {}).get("panel") or []:
                    for judge, votes in zip(record["judges"], record["votes"]):
                        for key in sorted(set(record["keys"].values())) or [record["protocol"]]:
                            rows.append({"model": item.label, "key": key, "judge": judge, "unparsed": votes is None})
    return pd.DataFrame(rows)


def krippendorff_alpha(matrix: np.ndarray, level: Literal["nominal", "interval"]) -> float:
    """Krippendorff's alpha of a judges × items matrix (NaN = missing); NaN when undefined (fewer than two
    pairable values, or a single value throughout)."""
    import krippendorff

    pairable = (np.sum(~np.isnan(matrix), axis=0) >= 2).sum()
    values = np.unique(matrix[~np.isnan(matrix)])
    if pairable < 2 or values.size < 2:
        return math.nan
    try:
        return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))
    except (ValueError, ZeroDivisionError):
        return math.nan


def alpha_with_interval(
    part: pd.DataFrame, level: Literal["nominal", "interval"]
) -> tuple[float, tuple[float, float] | None, int]:
    """Alpha of one key's votes (rows of :func:`votes_frame`), its 95 % case-bootstrap interval and the number of
    cases."""
    table = part.pivot_table(index="judge", columns="unit", values="vote", aggfunc="first", dropna=False)
    matrix = table.to_numpy(dtype=float)
    case_of_unit = part.drop_duplicates("unit").set_index("unit")["case"].reindex(table.columns)
    cases = sorted(set(case_of_unit))
    columns_of = [np.flatnonzero((case_of_unit == c).to_numpy()) for c in cases]

    def statistic(idx: np.ndarray) -> np.ndarray:
        def one(row: np.ndarray) -> float:
            return krippendorff_alpha(matrix[:, np.concatenate([columns_of[i] for i in row])], level)

        return np.array([one(row) for row in np.atleast_2d(idx)]).reshape(idx.shape[:-1])

    point = krippendorff_alpha(matrix, level)
    interval = None
    if point == point:
        interval = case_bootstrap(len(cases), statistic, ALPHA_SCALE, resamples=AGREEMENT_RESAMPLES)
    return point, interval, len(cases)


def agreement_table(votes: pd.DataFrame, unparsed: pd.DataFrame) -> pd.DataFrame:
    """Per run and key (module docstring)."""
    rows = []
    for (model, key), part in votes.groupby(["model", "key"], sort=True):
        panel_rule = rule(str(key))
        alpha, interval, cases = alpha_with_interval(part, LEVELS[panel_rule])
        calls = unparsed[(unparsed["model"] == model) & (unparsed["key"] == key)]
        rows.append(
            {
                "model": model,
                "key": key,
                "rule": panel_rule,
                "judges": len(part["judge"].unique()),
                "cases": cases,
                "items": part["unit"].nunique(),
                "alpha": alpha,
                "alpha lower": interval[0] if interval else math.nan,
                "alpha upper": interval[1] if interval else math.nan,
                "level": LEVELS[panel_rule],
                "judge calls": len(calls),
                "unparsed": int(calls["unparsed"].sum()),
                "ties": int(part.drop_duplicates("unit")["tie"].sum()),
            }
        )
    return pd.DataFrame(rows)


def judges_table(votes: pd.DataFrame) -> pd.DataFrame:
    """Per run, key and judge (module docstring): the items it answered and their cases; for a ``majority`` key
    the share of its verdicts equal to the panel's, for a ``mean`` key its mean difference from the panel's
    score, each pooled over its items with a 95 % case-bootstrap interval (a case's items drawn together), cut
    to [0, 1] or to ± the key's scale width."""
    rows = []
    for (model, key, judge), part in votes.groupby(["model", "key", "judge"], sort=True):
        given = part.dropna(subset=["vote"])
        majority = rule(str(key)) == "majority"
        measure = (given["vote"] == given["verdict"]).astype(float) if majority else given["vote"] - given["verdict"]
        by_case = measure.groupby(given["case"], sort=True)
        sums, counts = by_case.sum().to_numpy(dtype=float), by_case.size().to_numpy(dtype=float)
        width = width_of(score_key(str(key)).scale)
        scale = UNIT if majority else Scale(None if width is None else -width, width, name="difference")
        value = float(sums.sum() / counts.sum()) if len(given) else math.nan
        interval = case_bootstrap(len(sums), _pooled(sums, counts), scale)
        low, high = interval if interval else (math.nan, math.nan)
        row: dict[str, Any] = {
            "model": model,
            "key": key,
            "judge": judge,
            "items answered": len(given),
            "cases": len(sums),
            "agrees with panel": value if majority else math.nan,
            "agrees lower": low if majority else math.nan,
            "agrees upper": high if majority else math.nan,
            "mean difference from panel": math.nan if majority else value,
            "difference lower": math.nan if majority else low,
            "difference upper": math.nan if majority else high,
        }
        rows.append(row)
    return pd.DataFrame(rows)


def _pooled(sums: np.ndarray, counts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The statistic of a pooled mean's case bootstrap: the drawn cases' sum over their count of items."""
    return lambda idx: sums[idx].sum(axis=-1) / counts[idx].sum(axis=-1)


def family_flags(logs: Sequence[LoadedLog]) -> list[str]:
    """One line per run whose judge is of the model under test's family (read from the log's header)."""
    lines = []
    for item in logs:
        graders = (item.log.eval.model_roles or {}).get("grader")
        configs = graders if isinstance(graders, list) else [graders] if graders is not None else []
        subject = item.log.eval.model
        for config in configs:
            judge = str(getattr(config, "model", config))
            if same_family(judge, subject):
                lines.append(
                    f"{item.label}: judge {judge} is of the same family as the model under test ({subject}); "
                    "a judge may favour its own family's replies."
                )
    return lines


def section(page: Page, logs: Sequence[LoadedLog], csv: Callable[[pd.DataFrame, str], str]) -> None:
    """The judge-panel section of ``bedside report`` (module docstring)."""
    votes = votes_frame(logs)
    flags = family_flags(logs)
    if votes.empty and not flags:
        return
    page.heading("Judge panels")
    for line in flags:
        page.note("Same family: " + line)
    if votes.empty:
        return
    agreement = agreement_table(votes, unparsed_frame(logs))
    name = csv(agreement, "panel_agreement.csv")
    shown = agreement.assign(
        alpha=[
            fmt(a, lo, hi) for a, lo, hi in zip(agreement["alpha"], agreement["alpha lower"], agreement["alpha upper"])
        ]
    ).drop(columns=["alpha lower", "alpha upper"])
    page.table(
        shown,
        name,
        "Agreement of the panel's judges per score key: Krippendorff's alpha [95 % CI, case bootstrap] over the "
        "items judged (nominal for yes/no verdicts combined by majority, interval for scores combined by their "
        "mean; 1 = full agreement, 0 = as by chance); judge calls whose reply stayed unreadable (the panel's "
        "verdict is then of the judges that answered) and ties (decided against the model under test).",
    )
    judges = judges_table(votes)
    name = csv(judges, "panel_judges.csv")
    shown_judges = judges.assign(
        **{
            "agrees with panel": [
                fmt(v, lo, hi)
                for v, lo, hi in zip(judges["agrees with panel"], judges["agrees lower"], judges["agrees upper"])
            ],
            "mean difference from panel": [
                fmt(v, lo, hi)
                for v, lo, hi in zip(
                    judges["mean difference from panel"], judges["difference lower"], judges["difference upper"]
                )
            ],
        }
    ).drop(columns=["agrees lower", "agrees upper", "difference lower", "difference upper"])
    page.table(
        shown_judges,
        name,
        "Each judge against the panel's verdict over the items it answered (n items, n cases): the share of its "
        "yes/no verdicts equal to the panel's, or its mean difference from the panel's score (a judge's bias "
        "shows here), each with its 95 % case-bootstrap interval.",
    )
