"""The analysis of a clinician study's ratings (``bedside study report``): every number with its n and a 95%
interval.

**Intervals: a two-way cluster bootstrap over cases and raters** (Owen's pigeonhole bootstrap; Owen 2007, *Ann.
Appl. Stat.*): each replicate draws the cases with replacement and, independently, the raters with replacement,
and weighs each rating by its case's count times its rater's count; the interval is the replicates' 2.5 and 97.5
percentiles. A rating shares its case with the other raters' and its rater with the other cases', so both are
sources of error to resample: a case bootstrap alone treats the study's few raters as the only raters there are
(too narrow when raters differ in how much they favour a condition); a mixed model with crossed random effects
(case, rater) would say the same under normal errors, but the ratings are short ordinal scales and proportions
whose intervals must stay on their scale, and statsmodels fits crossed effects only as variance components of one
group, which often fails to converge with a handful of raters. The pigeonhole bootstrap is known to be
conservative (it counts the rating-level noise twice); with fewer than about 6 raters its rater part is coarse.
``tests/study/test_analysis.py`` measures the coverage on simulated raters with a planted difference and rater
bias.

What it reports (:func:`analyse`), each as rows of one long table:

- ``difference``: for each measure (an item, or a group of items pooled, e.g. a checklist's proportion of yes) and
  each pair of conditions A, B: the mean over cases rated in both of (A's mean rating - B's), paired by case;
- ``preference``: for each pair, A's win rate over B in the pairwise preferences (a tie counts half) and the mean
  strength toward A on the -3..3 scale;
- ``bradley_terry``: each condition's Bradley-Terry strength (log scale, mean 0) from the decided preferences
  (:func:`choix.ilsr_pairwise`, regularised with ``alpha`` = 0.01 so that a condition that always wins stays
  finite; ties left out and counted);
- ``reliability``: Krippendorff's alpha among raters per measure (units: a transcript's item; the preference:
  a case's pair, oriented the same way), at the items' level of measurement, with a bootstrap over units;
- ``blinding``: the proportion of decided guesses (model or physician) that were right, and per true kind the
  proportion guessed physician, with the number of "cannot tell".
"""

from __future__ import annotations

import itertools
from typing import Any, cast

import numpy as np
import pandas as pd

from bedside.study.items import GUESS, PREFERENCE, Level
from bedside.study.ratings import Study, truth

#: bootstrap replicates of the intervals (Bradley-Terry refits: :data:`BT_REPLICATES`)
REPLICATES = 2000
BT_REPLICATES = 300
BT_ALPHA = 0.01
LEVEL = 0.95
COLUMNS = (
    "section",
    "measure",
    "a",
    "b",
    "estimate",
    "low",
    "high",
    "n_cases",
    "n_raters",
    "n",
    "note",
)
#: the analysis's sections, in the order the reports show them: (section, heading)
HEADINGS = (
    ("difference", "Each condition against each other, per measure (A - B, paired by case)"),
    ("preference", "Pairwise preference (A against B)"),
    ("bradley_terry", "Bradley-Terry strengths"),
    ("reliability", "Inter-rater reliability"),
    ("blinding", "Blinding check"),
)


class Bootstrap:
    """Seeded case and rater weights for the replicates (module docstring), shared by every statistic so that
    the intervals of one report come from the same draws."""

    def __init__(self, cases: list[str], raters: list[str], replicates: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.case_index = {c: i for i, c in enumerate(cases)}
        self.rater_index = {r: i for i, r in enumerate(raters)}
        self.case_weights = rng.multinomial(len(cases), [1 / len(cases)] * len(cases), size=replicates).astype(float)
        self.rater_weights = rng.multinomial(len(raters), [1 / len(raters)] * len(raters), size=replicates).astype(
            float
        )

    def weights(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(each replicate's case weight per row, rater weight per row): two arrays replicates x rows."""
        c = rows["case"].map(self.case_index).to_numpy(dtype=int)
        r = rows["rater"].map(self.rater_index).to_numpy(dtype=int)
        return self.case_weights[:, c], self.rater_weights[:, r]

    def mean(self, rows: pd.DataFrame, values: np.ndarray) -> np.ndarray:
        """Each replicate's weighted mean of ``values`` (NaN: no weight)."""
        wc, wr = self.weights(rows)
        w = wc * wr
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w * values).sum(axis=1) / w.sum(axis=1)

    def paired_difference(self, rows: pd.DataFrame, a: str) -> np.ndarray:
        """Each replicate's mean over cases of (condition ``a``'s mean - the other's), case means weighted by raters."""
        rows = rows.sort_values("case", kind="stable")
        cases, starts = np.unique(rows["case"].to_numpy(dtype=str), return_index=True)
        wc, wr = self.weights(rows)
        case_w = self.case_weights[:, [self.case_index[c] for c in cases]]
        values = rows["score"].to_numpy(dtype=float)
        means = []
        for mask in (rows["condition"].to_numpy() == a, rows["condition"].to_numpy() != a):
            w = wr * mask  # per case: sums with np.add.reduceat (no BLAS call: its threads contend on a busy machine)
            with np.errstate(invalid="ignore", divide="ignore"):
                means.append(np.add.reduceat(w * values, starts, axis=1) / np.add.reduceat(w, starts, axis=1))
        diff = means[0] - means[1]
        keep = ~np.isnan(diff) & (case_w > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(keep, diff * case_w, 0).sum(axis=1) / np.where(keep, case_w, 0).sum(axis=1)


def interval(replicates: np.ndarray) -> tuple[float, float]:
    finite = replicates[np.isfinite(replicates)]
    if not len(finite):
        return float("nan"), float("nan")
    low, high = np.percentile(finite, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    return float(low), float(high)


def _row(
    section: str,
    measure: str,
    a: str,
    b: str,
    estimate: float,
    bounds: tuple[float, float],
    rows: pd.DataFrame,
    n: int,
    note: str = "",
) -> dict[str, Any]:
    return {
        "section": section,
        "measure": measure,
        "a": a,
        "b": b,
        "estimate": estimate,
        "low": bounds[0],
        "high": bounds[1],
        "n_cases": int(rows["case"].nunique()),
        "n_raters": int(rows["rater"].nunique()),
        "n": n,
        "note": note,
    }


# ------------------------------------------------------------------------------------------------
# the sections


def scores(ratings: pd.DataFrame) -> pd.DataFrame:
    """One score per (measure, rater, transcript): the mean of the numbers of its items (one item: its number)."""
    absolute = ratings[~ratings["item"].isin([PREFERENCE.id, GUESS.id])]
    keys = ["measure", "rater", "transcript", "case", "condition"]
    return absolute.groupby(keys, sort=True)["number"].agg(score="mean", items="size").reset_index()


def differences(study: Study, ratings: pd.DataFrame, boot: Bootstrap) -> list[dict[str, Any]]:
    out = []
    per = scores(ratings)
    for measure, rows in per.groupby("measure", sort=True):
        for a, b in itertools.combinations(study.conditions, 2):
            pair = rows[rows["condition"].isin([a, b])]
            both = pair.groupby("case")["condition"].nunique()
            pair = pair[pair["case"].isin(both[both == 2].index)].reset_index(drop=True)
            if pair.empty:
                continue
            means = pair.groupby(["case", "condition"])["score"].mean().unstack()
            estimate = float((means[a] - means[b]).mean())
            bounds = interval(boot.paired_difference(pair, a))
            out.append(
                _row("difference", str(measure), a, b, estimate, bounds, pair, len(pair), "A - B, paired by case")
            )
    return out


def oriented_preferences(ratings: pd.DataFrame) -> pd.DataFrame:
    """The preferences with ``a``, ``b`` (the pair in name order) and ``toward_a`` (-3..3, positive: a preferred)."""
    prefs = ratings[ratings["item"] == PREFERENCE.id].copy()
    prefs["a"] = prefs[["left", "right"]].min(axis=1)
    prefs["b"] = prefs[["left", "right"]].max(axis=1)
    prefs["toward_a"] = np.where(prefs["left"] == prefs["a"], -prefs["number"], prefs["number"])
    return prefs.reset_index(drop=True)


def preferences(ratings: pd.DataFrame, boot: Bootstrap) -> list[dict[str, Any]]:
    out = []
    prefs = oriented_preferences(ratings)
    for (a, b), rows in prefs.groupby(["a", "b"], sort=True):
        rows = rows.reset_index(drop=True)
        toward = rows["toward_a"].to_numpy(dtype=float)
        wins = np.where(toward > 0, 1.0, np.where(toward < 0, 0.0, 0.5))
        ties = int((toward == 0).sum())
        for measure, values, note in (
            ("win_rate", wins, f"A over B, ties ({ties}) count half"),
            ("strength", toward, "toward A, -3..3"),
        ):
            bounds = interval(boot.mean(rows, values))
            out.append(_row("preference", measure, str(a), str(b), float(values.mean()), bounds, rows, len(rows), note))
    return out


def bradley_terry(study: Study, ratings: pd.DataFrame, boot: Bootstrap) -> list[dict[str, Any]]:
    import choix

    prefs = oriented_preferences(ratings)
    decided = prefs[prefs["toward_a"] != 0].reset_index(drop=True)
    if decided.empty:
        return []
    conditions = study.conditions
    index = {c: i for i, c in enumerate(conditions)}
    winner = np.where(decided["toward_a"] > 0, decided["a"].map(index), decided["b"].map(index))
    loser = np.where(decided["toward_a"] > 0, decided["b"].map(index), decided["a"].map(index))
    pairs = list(zip(winner.tolist(), loser.tolist()))
    estimate = choix.ilsr_pairwise(len(conditions), pairs, alpha=BT_ALPHA)
    wc, wr = boot.weights(decided)
    counts = (wc * wr)[:BT_REPLICATES].astype(int)  # integer weights: each comparison's multiplicity
    fits = []
    for weights in counts:
        data = [p for p, n in zip(pairs, weights) for _ in range(n)]
        fits.append(
            choix.ilsr_pairwise(len(conditions), data, alpha=BT_ALPHA) if data else np.full(len(conditions), np.nan)
        )
    replicates = np.array(fits)
    ties = len(prefs) - len(decided)
    return [
        _row(
            "bradley_terry",
            "strength",
            c,
            "",
            float(estimate[i]),
            interval(replicates[:, i]),
            decided[(decided["a"] == c) | (decided["b"] == c)],
            len(decided),
            f"log scale, mean 0; {ties} tie(s) left out",
        )
        for i, c in enumerate(conditions)
    ]


def alpha(data: np.ndarray, level: Level) -> float:
    """Krippendorff's alpha of a raters x units table (NaN: not rated); NaN when no two values differ."""
    import krippendorff

    if data.shape[1] < 2 or len(np.unique(data[np.isfinite(data)])) < 2:
        return float("nan")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def reliability(ratings: pd.DataFrame, seed: int) -> list[dict[str, Any]]:
    out = []
    absolute = ratings[~ratings["item"].isin([PREFERENCE.id, GUESS.id])].copy()
    absolute["unit"] = absolute["transcript"] + "/" + absolute["item"]
    prefs = oriented_preferences(ratings)
    prefs["unit"] = prefs["case"] + "/" + prefs["a"] + "/" + prefs["b"]
    groups = [
        (str(m), rows, "number", cast(Level, rows["level"].iloc[0]))
        for m, rows in absolute.groupby("measure", sort=True)
    ]
    groups.append((PREFERENCE.id, prefs, "toward_a", PREFERENCE.level))
    rng = np.random.default_rng(seed)
    for measure, rows, value, level in groups:
        counts = rows.groupby("unit")["rater"].nunique()
        pairable = rows[rows["unit"].isin(counts[counts >= 2].index)].reset_index(drop=True)
        if pairable.empty:
            continue
        table = pairable.pivot_table(index="rater", columns="unit", values=value, aggfunc="first").to_numpy(dtype=float)
        units = table.shape[1]
        replicates = np.array([alpha(table[:, rng.integers(0, units, units)], level) for _ in range(BT_REPLICATES)])
        out.append(
            _row(
                "reliability",
                measure,
                "",
                "",
                alpha(table, level),
                interval(replicates),
                pairable,
                units,
                f"Krippendorff's alpha ({level}); n = units rated by 2+ raters",
            )
        )
    return out


def blinding(study: Study, ratings: pd.DataFrame, boot: Bootstrap) -> list[dict[str, Any]]:
    guesses = ratings[ratings["item"] == GUESS.id].reset_index(drop=True)
    if guesses.empty:
        return []
    guesses["truth"] = guesses["condition"].map(lambda c: truth(study, c))
    guesses["kind"] = np.where(guesses["truth"] == 1.0, "physician", "model")
    decided = guesses[guesses["number"].notna()].reset_index(drop=True)
    unsure = len(guesses) - len(decided)
    out = []
    if not decided.empty:
        right = (decided["number"] == decided["truth"]).to_numpy(dtype=float)
        out.append(
            _row(
                "blinding",
                "right_guesses",
                "",
                "",
                float(right.mean()),
                interval(boot.mean(decided, right)),
                decided,
                len(decided),
                f"of decided guesses; {unsure} 'cannot tell' left out",
            )
        )
    for kind, rows in decided.groupby("kind", sort=True):
        rows = rows.reset_index(drop=True)
        said = (rows["number"] == 1.0).to_numpy(dtype=float)
        out.append(
            _row(
                "blinding",
                "guessed_physician",
                str(kind),
                "",
                float(said.mean()),
                interval(boot.mean(rows, said)),
                rows,
                len(rows),
                f"of the {kind} transcripts' decided guesses",
            )
        )
    return out


def summary(study: Study, ratings: pd.DataFrame) -> str:
    """What the analysis is of, and how its intervals are made: the first line of each report of it."""
    return (
        f"{study.design['title']} clinician study: {ratings['rater'].nunique()} raters, "
        f"{ratings['case'].nunique()} cases, {len(ratings)} ratings; 95% intervals: two-way cluster bootstrap "
        "over cases and raters (alpha: over units)"
    )


def analyse(study: Study, ratings: pd.DataFrame, seed: int = 0, replicates: int = REPLICATES) -> pd.DataFrame:
    """Every section of the module docstring, as one long table (:data:`COLUMNS`)."""
    boot = Bootstrap(sorted(ratings["case"].unique()), sorted(ratings["rater"].unique()), replicates, seed)
    rows = [
        *differences(study, ratings, boot),
        *preferences(ratings, boot),
        *bradley_terry(study, ratings, boot),
        *reliability(ratings, seed),
        *blinding(study, ratings, boot),
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))
