"""``bedside agreement LOG... --people LOG_OR_DIR...``: the simulator checker against people, per patient turn.

Two sources of per-turn flags of the simulated patient (the ``simulator_check`` score's findings,
:mod:`bedside.scorers.simulator`) on the same transcripts:

- **the checker** (``LOG...``): the findings of the rules and the LLM checker (``--checker all``, the default:
  what the score counts), of the LLM checker alone (``--checker llm``) or of the rules alone (``--checker rules``);
- **the people** (``--people``): the realism rating of a person bound to the ``simulator_checker`` role
  (``bedside rescore LOGS --simulator-checker bedside/human --out DIR``, or a run with
  ``--model-role simulator_checker=bedside/human``): each checked patient turn rated realistic, off-script or
  role reversal (:mod:`bedside.simulator_checker`); only the person's findings are read (check ``person``),
  never the rules' that ran beside them. Each folder (or file) given to ``--people`` is one rater: one folder
  per person, as ``rescore --out`` writes them.

A turn's **category** is ``role_reversal`` when a finding of that kind is at the turn, else ``off_script`` when
any other kind is (an unsupported fact, a persona break, an early end), else ``realistic``. Findings about the
whole transcript (the rules' reading level) are at no turn and are left out.

**Pairs.** A transcript is a sample (model under test, case id, epoch) of the checker's logs and the same
sample of a rater's log, the same conversation (the same sample ``uuid``, which re-scoring keeps) with the same
checked patient turns; every rated transcript must be found in the checker's logs, else the command stops in
one line naming the file, the record and the field (a rated log of other cases, of another run, turns that do
not line up). A transcript whose checker or person gave no readable answer (``checker_error``) is left out and
counted.

**Statistics**, each with n turns and n transcripts, per comparison (*checker vs people*, pooled over raters;
*person vs person*, pooled over pairs of raters, when there are two or more), for each level: ``any error``
(flagged vs realistic), ``off-script`` and ``role reversal`` (that category vs the rest) and ``3 categories``:
Cohen's κ (unweighted, :func:`sklearn.metrics.cohen_kappa_score`) with its 95 % interval by a bootstrap over
transcripts (:func:`bedside.intervals.agreement_interval`: a transcript's turns are not independent), the share
of turns in agreement and, for the checker against people (people as the truth), the checker's **recall**
(flagged by the checker among the turns people flagged) and **false-alarm rate** (flagged by the checker among
the turns people rated realistic, or outside the category), each with a transcript-bootstrap interval inside
[0, 1] (:func:`bedside.intervals.case_bootstrap`). A κ is undefined (–) when every turn has one category on
both sides. Under the table, the confusion table of the three categories (the checker's rows, people's
columns).
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bedside.cli import bad_input
from bedside.intervals import BINARY, agreement_interval, case_bootstrap
from bedside.reporting.load import read_runs

SCORER = "simulator_check"
PERSON = "person"  # bedside.simulator_checker.PERSON (not imported: this module loads without Inspect's scorers)
CATEGORIES = ("realistic", "off_script", "role_reversal")
CHECKERS = ("all", "llm", "rules")
CHECKER_WORDS = {
    "all": "the rules' and the LLM checker's findings",
    "llm": "the LLM checker's findings",
    "rules": "the rules' findings",
}
#: each level of the table: its name and the categories that count as flagged (None: the three categories)
LEVELS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("any error", ("off_script", "role_reversal")),
    ("off-script", ("off_script",)),
    ("role reversal", ("role_reversal",)),
    ("3 categories", None),
)


@dataclass(frozen=True)
class Rated:
    """One transcript's per-turn categories from one source."""

    file: str
    key: tuple[str, str, int]  # model under test, case id, epoch
    uuid: str | None
    turns: tuple[int, ...]
    categories: tuple[str, ...]


def category(kinds: set[str]) -> str:
    if "role_reversal" in kinds:
        return "role_reversal"
    return "off_script" if kinds else "realistic"


def _record(sample: Any) -> str:
    return f"sample {sample.id} epoch {sample.epoch}"


def transcripts(path: str, log: Any, side: str, checker: str = "all") -> tuple[list[Rated], int]:
    """The rated transcripts of one log (``side``: ``checker`` or ``people``) and how many were left out for
    an unreadable answer; ``ValueError`` (one line: file, record, field) for a sample that was not checked, or
    not rated by a person on the people's side."""
    out: list[Rated] = []
    unread = 0
    for sample in log.samples or []:
        score = (sample.scores or {}).get(SCORER)
        if score is None:
            raise ValueError(
                f"{path}: {_record(sample)}: field scores.{SCORER}: no simulator check in this sample (run with "
                "-T simulator_check=true, or bedside rescore --simulator-checker MODEL)"
            )
        meta = score.metadata or {}
        turns = tuple(int(t) for t in meta.get("patient_turns", []))
        by = [str(c) for c in meta.get("checked_by", [])]
        if not turns:  # no simulated patient turn: nothing to rate
            continue
        if side == "people" and PERSON not in by:
            raise ValueError(
                f"{path}: {_record(sample)}: field scores.{SCORER}.metadata.checked_by: {by} has no person's "
                "rating (rate it with bedside rescore LOG --simulator-checker bedside/human --out DIR)"
            )
        if side == "checker" and checker == "llm" and not any(c.startswith("llm:") for c in by):
            raise ValueError(
                f"{path}: {_record(sample)}: field scores.{SCORER}.metadata.checked_by: {by} has no LLM checker "
                "(--checker llm needs --model-role simulator_checker=MODEL)"
            )
        if meta.get("checker_error") and (side == "people" or checker != "rules"):
            unread += 1
            continue
        flagged: dict[int, set[str]] = {}
        for finding in meta.get("findings", []):
            check = str(finding.get("check", ""))
            if side == "people":
                chosen = check == PERSON
            else:
                chosen = check != PERSON and (checker == "all" or check.startswith(f"{checker}:"))
            if chosen and finding.get("turn") is not None:
                flagged.setdefault(int(finding["turn"]), set()).add(str(finding["kind"]))
        key = (str(log.eval.model), str(sample.id), int(sample.epoch))
        out.append(Rated(path, key, sample.uuid, turns, tuple(category(flagged.get(t, set())) for t in turns)))
    return out, unread


def paired(checked: list[Rated], raters: dict[str, list[Rated]]) -> pd.DataFrame:
    """One row per (rater, transcript, turn): the checker's and the person's category. ``ValueError`` (one
    line) for a transcript given twice, a rated transcript missing from the checker's logs, another run's
    transcript or turns that do not line up."""
    index: dict[tuple[str, str, int], Rated] = {}
    for rated in checked:
        if rated.key in index:
            raise ValueError(
                f"{rated.file}: sample {rated.key[1]} epoch {rated.key[2]}: field id: also in {index[rated.key].file} "
                f"(model {rated.key[0]}); give each transcript's check once"
            )
        index[rated.key] = rated
    rows = []
    for rater, ratings in raters.items():
        seen: set[tuple[str, str, int]] = set()
        for rating in ratings:
            where = f"{rating.file}: sample {rating.key[1]} epoch {rating.key[2]}"
            if rating.key in seen:
                raise ValueError(f"{where}: field id: rated twice by rater {rater}")
            seen.add(rating.key)
            mine = index.get(rating.key)
            if mine is None:
                raise ValueError(
                    f"{where}: field id: no sample of the checker's logs has this case (model {rating.key[0]}); "
                    "rate the logs the checker checked"
                )
            if rating.uuid and mine.uuid and rating.uuid != mine.uuid:
                raise ValueError(
                    f"{where}: field uuid: {rating.uuid} is another transcript than {mine.file}'s ({mine.uuid}): "
                    "the people rated another run of this case"
                )
            if rating.turns != mine.turns:
                raise ValueError(
                    f"{where}: field scores.{SCORER}.metadata.patient_turns: {list(rating.turns)} do not line up "
                    f"with {list(mine.turns)} in {mine.file}"
                )
            transcript = "|".join(map(str, rating.key))
            for turn, theirs, ours in zip(rating.turns, rating.categories, mine.categories):
                rows.append({"rater": rater, "transcript": transcript, "turn": turn, "checker": ours, "person": theirs})
    return pd.DataFrame(rows, columns=["rater", "transcript", "turn", "checker", "person"])


# --- statistics ---------------------------------------------------------------------------------


def _codes(values: Sequence[str], flagged: tuple[str, ...] | None) -> np.ndarray:
    if flagged is None:
        return np.array([CATEGORIES.index(v) for v in values], dtype=int)
    return np.array([int(v in flagged) for v in values], dtype=int)


def _counts(a: np.ndarray, b: np.ndarray, groups: np.ndarray, n_groups: int, k: int) -> np.ndarray:
    """Per transcript, the k x k table of (a, b) pairs: shape (transcripts, k, k)."""
    counts = np.zeros((n_groups, k, k))
    np.add.at(counts, (groups, a, b), 1)
    return counts


def kappa_of_counts(table: np.ndarray) -> np.ndarray:
    """Cohen's κ (unweighted) of confusion tables ``(..., k, k)``; NaN where chance agreement is 1."""
    n = table.sum(axis=(-2, -1))
    with np.errstate(all="ignore"):
        observed = np.trace(table, axis1=-2, axis2=-1) / n
        expected = (table.sum(axis=-1) * table.sum(axis=-2)).sum(axis=-1) / n**2
        kappa = (observed - expected) / (1 - expected)
    return np.where(np.isclose(expected, 1.0), np.nan, kappa)


def level_row(part: pd.DataFrame, first: str, second: str, flagged: tuple[str, ...] | None, rates: bool) -> dict:
    """κ with its interval, agreement and (``rates``) recall and false alarms of ``first`` against ``second``."""
    from sklearn.metrics import cohen_kappa_score

    a, b = _codes(part[first].tolist(), flagged), _codes(part[second].tolist(), flagged)
    groups, names = pd.factorize(part["transcript"])
    n_cases, k = len(names), 3 if flagged is None else 2
    counts = _counts(a, b, np.asarray(groups), n_cases, k)
    labels = list(range(k))
    kappa = float(cohen_kappa_score(a, b, labels=labels)) if len(set(a) | set(b)) > 1 else float("nan")
    low, high = agreement_interval(n_cases, lambda idx, axis=-1: kappa_of_counts(counts[idx].sum(axis=-3)))
    row: dict[str, Any] = {
        "n_turns": len(part),
        "n_transcripts": n_cases,
        "kappa": kappa,
        "kappa_low": low if np.isfinite(kappa) else float("nan"),
        "kappa_high": high if np.isfinite(kappa) else float("nan"),
        "agreement": float(np.mean(a == b)) if len(a) else float("nan"),
    }
    if not rates or flagged is None:
        return row
    # people (second) as the truth: recall = flagged by both / flagged by people; false alarm = checker-flagged
    # among the turns people did not flag
    both, truth = counts[:, 1, 1], counts[:, :, 1].sum(axis=-1)
    false, clear = counts[:, 1, 0], counts[:, :, 0].sum(axis=-1)
    for name, hits, total in (("recall", both, truth), ("false_alarm", false, clear)):
        value = hits.sum() / total.sum() if total.sum() else float("nan")

        def ratio(idx: np.ndarray, hits: np.ndarray = hits, total: np.ndarray = total) -> np.ndarray:
            with np.errstate(all="ignore"):
                return hits[idx].sum(axis=-1) / total[idx].sum(axis=-1)

        interval = case_bootstrap(n_cases, ratio, BINARY) if np.isfinite(value) else None
        row.update(
            {
                name: value,
                f"{name}_n": int(total.sum()),
                f"{name}_low": interval[0] if interval else float("nan"),
                f"{name}_high": interval[1] if interval else float("nan"),
            }
        )
    return row


COLUMNS = [
    "comparison",
    "level",
    "n_turns",
    "n_transcripts",
    "kappa",
    "kappa_low",
    "kappa_high",
    "agreement",
    "recall",
    "recall_n",
    "recall_low",
    "recall_high",
    "false_alarm",
    "false_alarm_n",
    "false_alarm_low",
    "false_alarm_high",
]


COUNTS = ("n_turns", "n_transcripts", "recall_n", "false_alarm_n")


def agreement_table(pairs: pd.DataFrame) -> pd.DataFrame:
    """The module docstring's table: checker vs people (pooled over raters) and person vs person (pooled over
    pairs of raters, with two or more), one row per level."""
    rows = [
        {"comparison": "checker vs people", "level": level, **level_row(pairs, "checker", "person", flagged, True)}
        for level, flagged in LEVELS
    ]
    people = person_pairs(pairs)
    if len(people):
        rows += [
            {"comparison": "person vs person", "level": level, **level_row(people, "a", "b", flagged, False)}
            for level, flagged in LEVELS
        ]
    table = pd.DataFrame(rows, columns=COLUMNS)
    for column in COUNTS:
        table[column] = table[column].astype("Int64")
    return table


def person_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    """Every pair of raters' categories of the turns both rated (columns ``transcript``, ``a``, ``b``)."""
    found = []
    by_rater = {
        str(r): part.set_index(["transcript", "turn"])["person"] for r, part in pairs.groupby("rater", sort=True)
    }
    for first, second in itertools.combinations(sorted(by_rater), 2):
        shared = by_rater[first].index.intersection(by_rater[second].index)
        found.append(
            pd.DataFrame(
                {
                    "transcript": [f"{first}|{second}|{t}" for t, _ in shared],
                    "a": by_rater[first].loc[shared].to_numpy(),
                    "b": by_rater[second].loc[shared].to_numpy(),
                }
            )
        )
    return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=["transcript", "a", "b"])


def confusion(pairs: pd.DataFrame) -> pd.DataFrame:
    """Turns by the checker's category (rows) and the people's (columns), with totals."""
    table = pd.crosstab(
        pd.Categorical(pairs["checker"], CATEGORIES),
        pd.Categorical(pairs["person"], CATEGORIES),
        rownames=["checker"],
        colnames=["people"],
        margins=True,
        margins_name="total",
        dropna=False,
    )
    return table


# --- the command ------------------------------------------------------------------------------


def rater_of(path: str, given: str) -> str:
    """A rater's name: the folder (or file) given to ``--people``, as the user typed it."""
    return Path(given.rstrip("/")).name or given


def read(logs: Sequence[str], people: Sequence[str], checker: str) -> tuple[pd.DataFrame, dict[str, int]]:
    """The paired turns of ``logs`` (the checker) and each rater of ``people``, and the transcripts left out
    for an unreadable answer (by source)."""
    checked: list[Rated] = []
    left_out = {"checker": 0, "people": 0}
    for log in read_runs(logs):
        found, unread = transcripts(log.path, log, "checker", checker)
        checked += found
        left_out["checker"] += unread
    raters: dict[str, list[Rated]] = {}
    for given in people:
        name = rater_of(given, given)
        if name in raters:
            raise ValueError(f"--people {given}: two raters named {name!r}; give each rater's folder once")
        raters[name] = []
        for log in read_runs([given]):
            found, unread = transcripts(log.path, log, "people")
            raters[name] += found
            left_out["people"] += unread
    if not any(raters.values()):
        raise ValueError(f"--people {' '.join(people)}: no rated patient turn in these logs")
    return paired(checked, raters), left_out


def run(args: argparse.Namespace) -> int:
    with bad_input("agreement", ValueError, FileNotFoundError):
        pairs, left_out = read(args.logs, args.people, args.checker)
        table = agreement_table(pairs)
    with pd.option_context("display.max_rows", None, "display.width", 220, "display.float_format", "{:.3f}".format):
        shown = table.astype({c: object for c in COUNTS})
        for c in COUNTS:
            shown[c] = ["–" if pd.isna(v) else str(int(v)) for v in table[c]]
        print(shown.to_string(index=False, na_rep="–"))  # "–": not defined (e.g. a single category)
        print()
        print("patient turns by category (checker's rows, people's columns):")
        print(confusion(pairs).to_string())
    raters = sorted(pairs["rater"].unique())
    print(
        f"checker: {CHECKER_WORDS[args.checker]} (--checker {args.checker}); people: "
        f"{len(raters)} rater(s) ({', '.join(raters)}); kappa unweighted, 95 % intervals by a bootstrap over "
        "transcripts; recall and false alarms take the people's ratings as the truth"
    )
    for side, n in left_out.items():
        if n:
            whose = "the checker's" if side == "checker" else "a person's"
            print(f"note: {n} transcript(s) left out: {whose} answer could not be read (checker_error)")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


def add_arguments(parser: argparse.ArgumentParser, sources: Any) -> None:
    """``--people`` (in ``sources``, the command's group of one comparison) and ``--checker`` of ``bedside
    agreement``."""
    sources.add_argument(
        "--people",
        nargs="+",
        metavar="LOG_OR_DIR",
        help="logs of people's realism ratings of the same transcripts, one folder or file per rater "
        "(bedside rescore LOGS --simulator-checker bedside/human --out DIR): compares the simulator checker of LOG "
        "with them, per patient turn",
    )
    parser.add_argument(
        "--checker",
        choices=CHECKERS,
        default="all",
        help="with --people: the checker's findings compared: all (rules and LLM checker, the default), llm or rules",
    )
