"""``bedside agreement``: the statistics equal scikit-learn / scipy called directly on the same pairs."""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pandas as pd
import pytest
from inspect_ai.scorer import Score
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

from bedside.cli import main
from bedside.discharge.agreement import agreement_table
from bedside.discharge.ratings import judge_values, read_annotations
from bedside.reporting.load import load
from tests.conftest import REPO
from tests.reporting.synth import log, sample, write

FIXTURE = REPO / "tests" / "discharge" / "annotations_synthetic.csv"
LIKERT = ("naturalness", "responsiveness", "clarity", "clinical_relevance")
#: the judge's ratings of the six synthetic cases: four Likert axes, checklist answers, q1..q3 grades
JUDGE = {
    "case-1": ((4, 3, 5, 3), {"Q1": True, "Q2": True, "Q2.1": False}, (1.0, 0.5, 0.0)),
    "case-2": ((5, 4, 4, 4), {"Q1": True, "Q2": False, "Q2.1": True}, (1.0, 1.0, 0.5)),
    "case-3": ((3, 3, 2, 5), {"Q1": False, "Q2": True, "Q2.1": True}, (0.0, 0.5, 1.0)),
    "case-4": ((2, 5, 3, 4), {"Q1": True, "Q2": True, "Q2.1": True}, (0.5, 0.0, 1.0)),
    "case-5": ((4, 4, 5, 2), {"Q1": False, "Q2": False, "Q2.1": False}, (1.0, 1.0, 1.0)),
    "case-6": ((5, 2, 4, 3), {"Q1": True, "Q2": True}, (0.5, 0.5, 0.0)),  # Q2.1 not applicable
}
YES = {"yes": 1, "no": 0, "1": 1, "0": 0}
GRADE = {"correct": 2, "partially correct": 1, "incorrect": 0, "1": 2, "0.5": 1, "0": 0}


def judge_log(model: str = "prov/a"):
    samples = []
    for case_id, (likert, answers, grades) in JUDGE.items():
        samples.append(
            sample(
                case_id,
                {
                    "conversation_quality": Score(value=dict(zip(LIKERT, map(float, likert)))),
                    "topic_checklist": Score(value={"tcs": 0.5}, metadata={"answers": answers}),
                    "comprehension": Score(value={"q1": grades[0], "q2": grades[1], "q3": grades[2]}),
                },
            )
        )
    return log("bedside/discharge", model, samples)


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    return write(judge_log(), tmp_path_factory.mktemp("agreement") / "judge.eval")


def physician_rows() -> list[dict]:
    with FIXTURE.open() as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def judge_code(case_id: str, item: str) -> float | None:
    likert, answers, grades = JUDGE[case_id]
    if item in LIKERT:
        return likert[LIKERT.index(item)]
    if item.startswith("Q"):
        return int(answers[item]) if item in answers else None
    return {1.0: 2, 0.5: 1, 0.0: 0}[grades[int(item[1]) - 1]]


def physician_code(item: str, value: str) -> int:
    if item in LIKERT:
        return int(value)
    return YES[value.lower()] if item.startswith("Q") else GRADE[value]


def items_of(axis: str) -> set[str]:
    return {"tcs": {"Q1", "Q2", "Q2.1"}, "comprehension": {"q1", "q2", "q3"}}.get(axis, {axis})


def expected(axis: str, shared: bool = False) -> dict[str, dict]:
    """The pairs each comparison sees, scored by the libraries; ``shared``: only (case, item) pairs the
    judge answered and both physicians rated, for both comparisons."""
    rows = [r for r in physician_rows() if r["item"] in items_of(axis)]
    if shared:
        raters = {(r["case_id"], r["item"]): set() for r in rows}
        for r in rows:
            raters[(r["case_id"], r["item"])].add(r["annotator"])
        rows = [
            r
            for r in rows
            if judge_code(r["case_id"], r["item"]) is not None and len(raters[(r["case_id"], r["item"])]) >= 2
        ]
    judge, phys = [], []
    for r in rows:
        j = judge_code(r["case_id"], r["item"])
        if j is not None:
            judge.append(j)
            phys.append(physician_code(r["item"], r["value"]))
    ratings = {(r["annotator"], r["case_id"], r["item"]): physician_code(r["item"], r["value"]) for r in rows}
    a_side, b_side = [], []
    for (annotator, case_id, item), value in ratings.items():
        if annotator == "phys_a" and ("phys_b", case_id, item) in ratings:
            a_side.append(value)
            b_side.append(ratings[("phys_b", case_id, item)])
    weights = {"tcs": None, "comprehension": "linear"}.get(axis, "quadratic")
    labels = {"tcs": [0, 1], "comprehension": [0, 1, 2]}.get(axis, [1, 2, 3, 4, 5])
    out = {}
    for name, (x, y) in {"judge vs physician": (judge, phys), "physician vs physician": (a_side, b_side)}.items():
        out[name] = {
            "n": len(x),
            "kappa": cohen_kappa_score(x, y, labels=labels, weights=weights),
            "rho": spearmanr(x, y).statistic,
        }
    return out


@pytest.fixture(scope="module")
def table(log_path):
    return agreement_table(read_annotations(str(FIXTURE)), judge_values(load([log_path])), pairs="all")


@pytest.fixture(scope="module")
def shared_table(log_path):
    return agreement_table(read_annotations(str(FIXTURE)), judge_values(load([log_path])))


@pytest.mark.eval
@pytest.mark.parametrize("axis", [*LIKERT, "tcs", "comprehension"])
@pytest.mark.parametrize("shared", [False, True])
def test_kappa_and_spearman_equal_the_libraries(table, shared_table, axis, shared):
    rows = shared_table if shared else table
    for comparison, want in expected(axis, shared).items():
        row = rows[(rows["axis"] == axis) & (rows["item"] == "all") & (rows["comparison"] == comparison)].iloc[0]
        assert row["n"] == want["n"]
        assert row["kappa"] == pytest.approx(want["kappa"], nan_ok=True)
        assert row["rho"] == pytest.approx(want["rho"], nan_ok=True)


@pytest.mark.eval
def test_shared_pairs_are_the_same_for_both_comparisons(shared_table):
    for axis in (*LIKERT, "tcs", "comprehension"):
        rows = shared_table[(shared_table["axis"] == axis) & (shared_table["item"] == "all")]
        judge, physicians = rows.set_index("comparison").loc[["judge vs physician", "physician vs physician"], "n"]
        assert judge == 2 * physicians  # two physicians: each shared pair gives the judge two pairs


def inflation_case() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Synthetic: 20 cases, two physicians answer Q1..Q4 of every case; the judge answers only Q1
    (the only question that applies), where the physicians disagree half the time; on Q2..Q4 (not
    applicable) both physicians say "no" every time."""
    rng = np.random.default_rng(7)
    annotations, judge = [], []
    for k in range(20):
        case = f"c{k}"
        a = int(rng.integers(0, 2))
        b = a if k % 2 else 1 - a
        judge.append({"label": "m", "model_name": "m", "case_id": case, "epoch": 1, "item": "Q1", "judge": float(a)})
        for annotator, value in (("pa", a), ("pb", b)):
            annotations.append({"case_id": case, "annotator": annotator, "item": "Q1", "value": str(value)})
            for q in ("Q2", "Q3", "Q4"):
                annotations.append({"case_id": case, "annotator": annotator, "item": q, "value": "no"})
    frame = pd.DataFrame(annotations).assign(epoch=1, model=None)
    return frame, pd.DataFrame(judge)


def test_pooling_unjudged_items_inflates_physician_agreement():
    annotations, judge = inflation_case()
    rows = {
        pairs: agreement_table(annotations, judge, pairs=pairs).set_index(["axis", "comparison"]).loc["tcs"]
        for pairs in ("all", "shared")
    }
    pooled, fair = rows["all"].loc["physician vs physician"], rows["shared"].loc["physician vs physician"]
    assert (pooled["n"], fair["n"]) == (80, 20)  # 20 cases x 4 questions vs the 20 the judge answered
    assert pooled["exact_agreement"] == pytest.approx(70 / 80) and fair["exact_agreement"] == pytest.approx(0.5)
    assert pooled["kappa"] > fair["kappa"] + 0.3  # the 60 agreeing "no" pairs inflate physician kappa
    x = annotations[(annotations["item"] == "Q1") & (annotations["annotator"] == "pa")]["value"].astype(int)
    y = annotations[(annotations["item"] == "Q1") & (annotations["annotator"] == "pb")]["value"].astype(int)
    assert fair["kappa"] == pytest.approx(cohen_kappa_score(x, y, labels=[0, 1]))
    judged = rows["shared"].loc["judge vs physician"]
    assert judged["n"] == 40 and rows["all"].loc["judge vs physician"]["n"] == 40  # the judge saw Q1 only


@pytest.mark.eval
def test_kappa_weights_are_chosen_per_score_family(log_path):
    from bedside.discharge.agreement import CQ_MEAN

    annotations, judged = read_annotations(str(FIXTURE)), judge_values(load([log_path]))
    table = agreement_table(annotations, judged, None, likert_weights="linear").set_index(["axis", "comparison"])
    assert table.loc[("naturalness", "judge vs physician"), "kappa_weights"] == "linear"
    assert table.loc[(CQ_MEAN, "judge vs physician"), "kappa_weights"] == "linear"
    assert table.loc[("comprehension", "judge vs physician"), "kappa_weights"] == "none"
    rows = [r for r in physician_rows() if r["item"] == "naturalness"]
    shared = {r["case_id"] for r in rows if r["annotator"] == "phys_a"} & {
        r["case_id"] for r in rows if r["annotator"] == "phys_b"
    }
    x = [judge_code(r["case_id"], "naturalness") for r in rows if r["case_id"] in shared]
    y = [int(r["value"]) for r in rows if r["case_id"] in shared]
    got = table.loc[("naturalness", "judge vs physician")]
    assert got["n"] == len(x)
    assert got["kappa"] == pytest.approx(cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="linear"))


@pytest.mark.eval
def test_pair_counts_and_weights(table):
    rows = table.set_index(["axis", "comparison"])
    assert rows.loc[("naturalness", "judge vs physician"), "n"] == 10  # 6 + 4 ratings
    assert rows.loc[("naturalness", "physician vs physician"), "n"] == 4  # shared cases
    assert (
        rows.loc[("tcs", "judge vs physician"), "n"] == 30 - 1
    )  # case-6 Q2.1 has no judge answer (rated by phys_a only)
    assert rows.loc[("tcs", "physician vs physician"), "n"] == 12
    assert rows.loc[("naturalness", "judge vs physician"), "kappa_weights"] == "quadratic"
    assert rows.loc[("tcs", "judge vs physician"), "kappa_weights"] == "none"
    assert rows.loc[("comprehension", "judge vs physician"), "kappa_weights"] == "linear"


@pytest.mark.eval
def test_quadratic_comprehension_weights_and_by_item(log_path):
    annotations = read_annotations(str(FIXTURE))
    table = agreement_table(annotations, judge_values(load([log_path])), "quadratic", by_item=True, pairs="all")
    comp = table[
        (table["axis"] == "comprehension") & (table["item"] == "all") & (table["comparison"] == "judge vs physician")
    ].iloc[0]
    rows = [r for r in physician_rows() if r["item"] in items_of("comprehension")]
    x = [judge_code(r["case_id"], r["item"]) for r in rows]
    y = [physician_code(r["item"], r["value"]) for r in rows]
    assert comp["kappa"] == pytest.approx(cohen_kappa_score(x, y, labels=[0, 1, 2], weights="quadratic"))
    q2 = table[(table["item"] == "Q2") & (table["comparison"] == "judge vs physician")].iloc[0]
    rows = [r for r in physician_rows() if r["item"] == "Q2"]
    x = [judge_code(r["case_id"], "Q2") for r in rows]
    y = [physician_code("Q2", r["value"]) for r in rows]
    assert (q2["n"], q2["kappa"]) == (len(x), pytest.approx(cohen_kappa_score(x, y, labels=[0, 1])))


@pytest.mark.eval
def test_cli_writes_csv_and_rejects_ambiguous_cases(log_path, tmp_path, capsys):
    out = tmp_path / "agreement.csv"
    assert main(["agreement", "--annotations", str(FIXTURE), log_path, "--csv", str(out)]) == 0
    written = pd.read_csv(out)
    assert set(written["axis"]) == {*LIKERT, "conversation_quality (mean of 4 axes)", "tcs", "comprehension"}
    assert "judge vs physician" in capsys.readouterr().out
    other = write(judge_log("prov/b"), tmp_path / "other.eval")
    assert main(["agreement", "--annotations", str(FIXTURE), log_path, other]) == 2
    assert "add a 'model' column" in capsys.readouterr().out
    # with a model column the case is found in the right log
    with_model = tmp_path / "with_model.csv"
    frame = pd.read_csv(FIXTURE, comment="#").assign(model="prov/b")
    frame.to_csv(with_model, index=False)
    assert main(["agreement", "--annotations", str(with_model), log_path, other]) == 0


@pytest.mark.eval
def test_bad_annotations_are_reported(tmp_path, log_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("case_id,annotator,item,value\ncase-1,phys_a,naturalness,7\n")
    assert main(["agreement", "--annotations", str(bad), log_path]) == 2
    assert "not a 1-5 rating" in capsys.readouterr().out
    bad.write_text("case,annotator,item,value\n")
    assert main(["agreement", "--annotations", str(bad), log_path]) == 2
    assert "missing column" in capsys.readouterr().out


@pytest.mark.eval
def test_intervals_bracket_the_estimates_and_count_cases(table):
    judged = table[(table["item"] == "all") & (table["comparison"] == "judge vs physician")].set_index("axis")
    assert judged.loc["naturalness", "n_cases"] == 6  # 10 ratings of 6 cases (4 rated by both physicians)
    for axis in [*LIKERT, "tcs", "comprehension"]:
        row = judged.loc[axis]
        for stat in ("kappa", "rho"):
            if np.isfinite(row[f"{stat}_low"]):
                assert row[f"{stat}_low"] <= row[stat] + 1e-12 <= row[f"{stat}_high"] + 2e-12, (axis, stat)
    assert (
        np.isfinite(judged.loc["tcs", "kappa_low"]) and judged.loc["tcs", "kappa_low"] < judged.loc["tcs", "kappa_high"]
    )


def test_bootstrap_resamples_cases_not_rating_pairs():
    from bedside.discharge.agreement_statistics import statistics
    from bedside.discharge.ratings import Axis

    axis = Axis("clarity", "likert", "quadratic", (1, 2, 3, 4, 5))
    rng = np.random.default_rng(1)
    x = rng.integers(1, 6, 12)
    y = np.clip(x + rng.integers(-1, 2, 12), 1, 5)
    cases = [f"c{i}" for i in range(12)]
    once = statistics(x, y, axis, cases=cases)
    # every case rated three times over (e.g. three items of one case): the same 12 cases, so the
    # same interval; treating the 36 pairs as independent cases would narrow it
    thrice = statistics(np.tile(x, 3), np.tile(y, 3), axis, cases=cases * 3)
    as_pairs = statistics(np.tile(x, 3), np.tile(y, 3), axis, cases=[f"p{i}" for i in range(36)])
    assert thrice["kappa"] == pytest.approx(once["kappa"]) and thrice["n_cases"] == 12 and thrice["n"] == 36
    assert (thrice["kappa_low"], thrice["kappa_high"]) == pytest.approx((once["kappa_low"], once["kappa_high"]))
    assert as_pairs["kappa_high"] - as_pairs["kappa_low"] < 0.8 * (once["kappa_high"] - once["kappa_low"])


@pytest.mark.parametrize("kind", ["likert", "continuous", "constant"])
def test_batched_rho_of_case_resamples_equals_scipys_on_the_drawn_pairs(kind):
    from bedside.discharge.agreement_statistics import rho_of_resamples

    rng = np.random.default_rng(11)
    cases, pairs = 9, 30
    index = rng.integers(0, cases, pairs)  # each pair's case: cases hold different numbers of pairs
    x = {"likert": rng.integers(1, 6, pairs), "continuous": rng.random(pairs), "constant": np.full(pairs, 3)}[kind]
    y = np.clip(x + rng.integers(-1, 2, pairs), 1, 5).astype(float)
    drawn = rng.integers(0, cases, (200, cases))
    drawn[0] = 4  # one case drawn every time: few pairs, often constant
    batched = rho_of_resamples(x.astype(float), y, index, cases, drawn)
    assert batched.shape == (200,)
    for row, rho in zip(drawn, batched):
        rows = np.concatenate([np.flatnonzero(index == k) for k in row])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant input: scipy warns and gives NaN
            want = spearmanr(x[rows], y[rows]).statistic if len(rows) >= 2 else np.nan
        assert rho == pytest.approx(want, abs=1e-12, nan_ok=True)
    if kind == "constant":
        assert np.isnan(batched).all()
    else:
        assert np.isfinite(batched[1:]).mean() > 0.9
    # the statistic of the original sample (a 1-D draw), as scipy's bootstrap asks for it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = spearmanr(x, y).statistic
    assert rho_of_resamples(x.astype(float), y, index, cases, np.arange(cases)) == pytest.approx(want, nan_ok=True)


@pytest.mark.eval
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_batched_kappa_equals_sklearn(weights):
    from bedside.discharge.agreement_statistics import kappa_from_counts

    rng = np.random.default_rng(7)
    for _ in range(20):
        x, y = rng.integers(0, 5, 25), rng.integers(0, 5, 25)
        counts = np.zeros((5, 5))
        np.add.at(counts, (x, y), 1)
        assert kappa_from_counts(counts[None], weights)[0] == pytest.approx(
            cohen_kappa_score(x, y, labels=list(range(5)), weights=weights)
        )


@pytest.mark.eval
def test_conversation_quality_mean_row(table):
    from bedside.discharge.agreement import CQ_MEAN

    rows = table.set_index(["axis", "comparison"])
    for comparison in ("judge vs physician", "physician vs physician"):
        axes = rows.loc[[(a, comparison) for a in LIKERT]]
        mean = rows.loc[(CQ_MEAN, comparison)]
        assert mean["kappa"] == pytest.approx(axes["kappa"].mean())  # the paper's "mean weighted kappa"
        assert mean["rho"] == pytest.approx(axes["rho"].mean())  # and "mean Spearman rho"
        assert mean["n"] == axes["n"].sum() and mean["kappa_weights"] == "quadratic"
        for key in ("kappa", "rho"):  # NaN when a resample's statistic is undefined (few shared cases)
            if mean[f"{key}_low"] == mean[f"{key}_low"]:
                assert mean[f"{key}_low"] <= mean[key] <= mean[f"{key}_high"]


def test_conversation_quality_mean_interval_is_a_case_bootstrap_of_the_mean():
    from bedside.discharge.agreement_statistics import mean_statistics, statistics
    from bedside.discharge.ratings import axis_of

    rng = np.random.default_rng(3)
    cases = [f"c{i}" for i in range(40)]
    parts = []
    for name in LIKERT:
        judge = rng.integers(1, 6, len(cases))
        physician = np.clip(judge + rng.integers(-1, 2, len(cases)), 1, 5)
        parts.append((axis_of(name), judge.tolist(), physician.tolist(), cases))
    row = mean_statistics(parts)
    singles = [statistics(x, y, axis) for axis, x, y, _ in parts]
    assert row["kappa"] == pytest.approx(np.mean([r["kappa"] for r in singles]))
    assert row["n"] == 160 and row["n_cases"] == 40
    assert row["kappa_low"] < row["kappa"] < row["kappa_high"] and row["rho_low"] < row["rho"] < row["rho_high"]


@pytest.mark.eval
def test_cli_states_the_weighting_of_every_score(log_path, capsys):
    assert main(["agreement", "--annotations", str(FIXTURE), str(log_path)]) == 0
    out = capsys.readouterr().out
    assert "conversation_quality (mean of 4 axes)" in out
    assert "quadratic for the 1-5 Likert axes" in out and "linear for the three comprehension" in out
    assert "bedside's choice" in out and "pairs: both comparisons on the same (case, item) pairs" in out
