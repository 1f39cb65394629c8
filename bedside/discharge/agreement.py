"""``bedside agreement --annotations FILE.csv LOG...``: LLM judge vs physicians, and physician vs
physician (DischargeBench paper, Table 5). DischargeBench's comparison of the shared ``bedside agreement``
command (:mod:`bedside.reporting.agreement`).

**Annotation CSV** (UTF-8, header row; lines starting with ``#`` are comments), one rating per row:

==============  ===========================================================================
``case_id``     the sample id in the log (the DischargeBench case id)
``annotator``   who rated (any name: ``phys_a``, ``phys_b``, …)
``item``        a score key: ``naturalness``, ``responsiveness``, ``clarity``,
                ``clinical_relevance`` (1–5 Likert); a Topic Checklist question id ``Q1``,
                ``Q2.1``, … (``yes``/``no``, also ``1``/``0``, ``true``/``false``); a
                comprehension item ``q1`` … ``q6`` (``correct`` / ``partially correct`` /
                ``incorrect``, or ``1`` / ``0.5`` / ``0``); any other numeric score key of the
                log (e.g. ``tcs``, ``comprehension``: continuous, Spearman only; a number
                inside the scale the key's scorer declares, [0, 1] for these two)
``value``       the rating
``model``       optional: the model under test (label or model name), needed only when the
                same case id is in several logs
``epoch``       optional (default 1)
==============  ===========================================================================

**Statistics**, per axis, each with n (rated pairs): Cohen's κ
(:func:`sklearn.metrics.cohen_kappa_score`) — quadratic-weighted for the 1–5 Likert axes,
unweighted for the yes/no checklist items (pooled over the case's questions into the ``tcs``
axis), and **linear**-weighted for the three-level comprehension grades (incorrect < partially
correct < correct, pooled over q1…q6 into the ``comprehension`` axis; ``--comprehension-weights
quadratic`` to change it) — plus Spearman's ρ (:func:`scipy.stats.spearmanr`) and the share of exact
agreement. Continuous items get ρ only. κ and ρ come with a 95 % confidence interval from a
bootstrap over **cases** (:func:`scipy.stats.bootstrap`, percentile method, 1,000 resamples, seed
0; pooled rows only, not the ``--by-item`` rows): a resample draws cases with replacement and
keeps all their rated pairs, because the pairs of one case (its checklist questions, its six
comprehension items, several physicians) are not independent. The interval is NaN when fewer than
2 cases are rated or when a resample's statistic is undefined (e.g. every rating the same).

- *judge vs physician*: every physician rating paired with the judge's value for the same case and
  item (from the log: the score values, and the checklist answers in the ``topic_checklist`` score
  metadata), pooled over cases and physicians;
- *physician vs physician*: for every pair of physicians, the (case, item) both rated, pooled over
  the pairs of physicians (with two physicians: their shared cases).

**Conversation-quality mean** (the paper's headline agreement figure, Table 5: "averaged across the
four 1–5 Likert sub-axes"): for each comparison, a row ``conversation_quality (mean of 4 axes)``
whose κ and ρ are the means of the four axes' values; its interval is the same case bootstrap of
that mean (each resample recomputes the four axes on the drawn cases and averages them); n and
n_cases sum / count over the four axes.

**Pairs.** By default (``--pairs shared``) both comparisons use the same (case, item) pairs: those
the judge answered and, with several physicians, at least two physicians rated. Packets ask every
checklist question and every comprehension item, but the judge answers only the questions that
apply to the case and leaves an item with a "not applicable" reference ungraded; pooling those
extra, mostly agreeing physician pairs would raise physician-physician κ against a judge that never
saw them. ``--pairs all`` gives each comparison every pair it has. ``n`` is each row's number of
rated pairs; the command prints a line stating the rule.

**Weighting** (bedside's choice: the paper says only "weighted κ"). Every row names its κ weighting
(``kappa_weights``): ``--likert-weights`` for the Likert axes and their mean (default
``quadratic``), ``none`` = unweighted for the yes/no checklist (with two levels every weighting
gives the same κ), ``--comprehension-weights`` for comprehension (default ``linear``); each takes
``none``, ``linear`` or ``quadratic``. The command prints a line stating them under the table.

``--by-item`` adds one row per checklist question and comprehension item. Numbers are printed with
3 decimals, as in the paper.
"""

from __future__ import annotations

import argparse
import itertools

import pandas as pd

from bedside.cli import bad_input
from bedside.discharge.agreement_statistics import mean_statistics, statistics
from bedside.discharge.calibrated import print_calibrated
from bedside.discharge.ratings import LIKERT, Axis, attach_judge, axis_of, code, judge_values, read_annotations
from bedside.reporting.load import load

PAIRS = ("shared", "all")


def shared_items(rated: pd.DataFrame) -> pd.Series:
    """Whether each rating's (case, item) is one both comparisons see: the judge answered it and, when
    there are several physicians, at least two physicians rated it (module docstring, *Pairs*)."""
    keys = pd.Series([f"{k}|{i}" for k, i in zip(case_keys(rated), rated["item"])], index=rated.index)
    judged = rated["judge"].notna()
    physicians = rated[rated["physician"].notna()].groupby(keys[rated["physician"].notna()])["annotator"].nunique()
    if rated["annotator"].nunique() < 2:
        return judged
    return judged & keys.map(physicians).fillna(0).ge(2)


def agreement_table(
    annotations: pd.DataFrame,
    judge: pd.DataFrame,
    comprehension_weights: str | None = "linear",
    by_item: bool = False,
    likert_weights: str | None = "quadratic",
    pairs: str = "shared",
) -> pd.DataFrame:
    """One row per (axis[, item], comparison): n, κ (and its weighting), ρ, exact agreement.
    ``pairs="shared"``: both comparisons on the same (case, item) pairs; ``"all"``: each on every pair it has."""
    if pairs not in PAIRS:
        raise ValueError(f"pairs must be one of {PAIRS}, not {pairs!r}")
    rated = attach_judge(annotations, judge)
    rated["axis"] = pd.Series(
        [axis_of(i, comprehension_weights, likert_weights) for i in rated["item"]], index=rated.index, dtype=object
    )
    rated["physician"] = [code(v, a) for v, a in zip(rated["value"], rated["axis"])]
    rated["judge"] = [
        code(v, a) if v == v and a.kind == "ordinal3" else v for v, a in zip(rated["judge"], rated["axis"])
    ]
    if pairs == "shared":
        rated = rated[shared_items(rated)]
    rated["axis_name"] = [a.name for a in rated["axis"]]
    groups: list[tuple[str, str, pd.DataFrame]] = [
        (str(name), "all", part) for name, part in rated.groupby("axis_name", sort=False)
    ]
    if by_item:
        groups += [
            (part["axis_name"].iloc[0], str(item), part)
            for item, part in rated.groupby("item", sort=False)
            if part["axis"].iloc[0].kind in ("binary", "ordinal3")
        ]
    rows = []
    likert: dict[str, list[tuple[Axis, list, list, list]]] = {}  # comparison -> per Likert axis (axis, x, y, cases)
    annotators = sorted(rated["annotator"].unique())
    for name, item, part in groups:
        axis = part["axis"].iloc[0]
        weights = axis.weights or ("none" if axis.kind != "continuous" else "")
        judged = statistics(part["judge"], part["physician"], axis, cases=case_keys(part) if item == "all" else None)
        rows.append(
            {"axis": name, "item": item, "comparison": "judge vs physician", "kappa_weights": weights, **judged}
        )
        if name in LIKERT and item == "all":
            likert.setdefault("judge vs physician", []).append(
                (axis, part["judge"].tolist(), part["physician"].tolist(), case_keys(part))
            )
        first, second, shared_cases = [], [], []
        for a, b in itertools.combinations(annotators, 2):
            left = part[part["annotator"] == a].set_index(["case_id", "epoch", "item", "model"], drop=False)
            right = part[part["annotator"] == b].set_index(["case_id", "epoch", "item", "model"], drop=False)
            shared = left.index.intersection(right.index)
            first += left.loc[shared, "physician"].tolist()
            second += right.loc[shared, "physician"].tolist()
            shared_cases += case_keys(left.loc[shared])
        rows.append(
            {
                "axis": name,
                "item": item,
                "comparison": "physician vs physician",
                "kappa_weights": weights,
                **statistics(first, second, axis, cases=shared_cases if item == "all" else None),
            }
        )
        if name in LIKERT and item == "all":
            likert.setdefault("physician vs physician", []).append((axis, first, second, shared_cases))
    for comparison, parts in likert.items():
        rows.append(
            {
                "axis": CQ_MEAN,
                "item": "all",
                "comparison": comparison,
                "kappa_weights": likert_weights or "none",
                **mean_statistics(parts),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "axis",
            "item",
            "comparison",
            "n",
            "n_cases",
            "kappa",
            "kappa_low",
            "kappa_high",
            "kappa_weights",
            "rho",
            "rho_low",
            "rho_high",
            "rho_p",
            "exact_agreement",
        ],
    )


CQ_MEAN = "conversation_quality (mean of 4 axes)"


WEIGHTS_NOTE = (
    "kappa weighting (bedside's choice; the paper says only 'weighted kappa'): {likert} for the 1-5 Likert axes "
    "(naturalness, responsiveness, clarity, clinical_relevance) and their mean; none (unweighted) for the yes/no "
    "checklist (tcs); {comprehension} for the three comprehension grades; continuous keys: Spearman only"
)
PAIRS_NOTE = {
    "shared": "pairs: both comparisons on the same (case, item) pairs (the judge answered it and two or more "
    "physicians rated it); n = rated pairs of each row",
    "all": "pairs: each comparison on every pair it has (physician vs physician also pools items the judge never "
    "answered); n = rated pairs of each row",
}
WEIGHTS = {"none": None, "linear": "linear", "quadratic": "quadratic"}


def case_keys(part: pd.DataFrame) -> list[str]:
    """The case of each rating (a case is a sample: model, case id and epoch)."""
    return [f"{m}|{c}|{e}" for m, c, e in zip(part["model"], part["case_id"], part["epoch"])]


def run(args: argparse.Namespace) -> int:
    with bad_input("agreement", ValueError, FileNotFoundError):
        annotations = read_annotations(args.annotations)
        judged = judge_values(load(args.logs))
        table = agreement_table(
            annotations,
            judged,
            WEIGHTS[args.comprehension_weights],
            args.by_item,
            likert_weights=WEIGHTS[args.likert_weights],
            pairs=args.pairs,
        )
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False, na_rep="–"))  # "–": not defined (e.g. no interval below 2 cases)
    print(WEIGHTS_NOTE.format(likert=args.likert_weights, comprehension=args.comprehension_weights))
    print(PAIRS_NOTE[args.pairs])
    unmatched = table.loc[(table["comparison"] == "judge vs physician") & (table["n"] == 0), "axis"].tolist()
    if unmatched:
        print(f"note: no judge value for axis/axes {unmatched} (case ids or items not in the logs?)")
    if args.csv:
        table.to_csv(args.csv, index=False)
    print_calibrated(annotations, judged)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """This comparison's options of ``bedside agreement`` (:mod:`bedside.reporting.agreement` adds
    ``--annotations`` and ``--csv``)."""
    parser.add_argument(
        "--likert-weights",
        choices=tuple(WEIGHTS),
        default="quadratic",
        help="with --annotations: kappa weighting of the four 1-5 Likert axes (default quadratic; bedside's choice)",
    )
    parser.add_argument(
        "--comprehension-weights",
        choices=tuple(WEIGHTS),
        default="linear",
        help="with --annotations: kappa weighting of the three comprehension grades (default linear; bedside's choice)",
    )
    parser.add_argument(
        "--pairs",
        choices=PAIRS,
        default="shared",
        help="with --annotations: shared (default): judge-physician and physician-physician on the same (case, "
        "item) pairs; all: each comparison on every pair it has",
    )
    parser.add_argument(
        "--by-item",
        action="store_true",
        help="with --annotations: also one row per checklist question and comprehension item",
    )
