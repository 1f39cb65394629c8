"""``bedside report --annotations FILE``: DischargeBench's judge-calibrated block (the estimator of
``bedside agreement``, :mod:`bedside.discharge.calibrated`), the too-few path, the population it is
computed on, the page without the option unchanged, and bad annotation files stopped with file, line and field."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ppi_py import ppi_mean_ci

from bedside.cli import main
from bedside.discharge.calibrated import MIN_ANNOTATED, TOO_FEW, calibrated_table
from bedside.discharge.ratings import judge_values, read_annotations
from bedside.reporting.load import load
from tests.discharge.test_agreement import FIXTURE
from tests.reporting.synth import discharge_case, log, sample, write

pytestmark = pytest.mark.eval

N_CASES = 30
#: cases rated by the physicians: naturalness on 12 (an interval), clarity on 5 (too few)
NATURALNESS, CLARITY = 12, 5


def judge(i: int) -> float:
    return float(1 + i % 5)


def the_log():
    samples = [
        discharge_case(
            f"case-{i}",
            end="hard_stop" if i % 7 == 3 else "clean_complete",
            turns=30,
            values={"naturalness": judge(i), "clarity": judge(i + 2), "tcs": 0.5},
        )
        for i in range(N_CASES)
    ]
    return log("bedside/discharge", "prov/a", samples)


def physician(i: int) -> int:
    """A physician a point below the judge (never below 1) on every third case."""
    return max(1, int(judge(i)) - (i % 3 == 0))


def annotations_csv(path: Path) -> str:
    lines = ["# SYNTHETIC annotations for bedside's tests", "case_id,annotator,item,value"]
    lines += [f"case-{i},phys_a,naturalness,{physician(i)}" for i in range(NATURALNESS)]
    lines += [f"case-{i},phys_a,clarity,{int(judge(i + 2))}" for i in range(CLARITY)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrated")
    return write(the_log(), root / "run.eval"), annotations_csv(root / "annotations.csv")


def report(tmp_path: Path, *args: str) -> tuple[int, Path]:
    out = tmp_path / "report"
    return main(["report", *args, "--out", str(out)]), out


def test_the_report_shows_the_agreement_commands_estimates(run, tmp_path):
    log_path, annotations = run
    code, out = report(tmp_path, log_path, "--annotations", annotations)
    assert code == 0
    shown = pd.read_csv(out / "calibrated.csv", keep_default_na=False, na_values=[""])
    direct = calibrated_table(read_annotations(annotations), judge_values(load([log_path])))
    pd.testing.assert_frame_equal(
        shown.drop(columns="note"), direct[shown.columns].drop(columns="note"), check_dtype=False
    )
    nat = shown.set_index("metric").loc["naturalness"]
    assert nat["n_judged"] == N_CASES and nat["n_annotated"] == NATURALNESS and pd.isna(nat["note"])
    # the interval is ppi-python's on the same arrays: physicians and judge on the annotated cases, judge elsewhere
    y = np.array([physician(i) for i in range(NATURALNESS)], dtype=float)
    yhat = np.array([judge(i) for i in range(NATURALNESS)])
    rest = np.array([judge(i) for i in range(NATURALNESS, N_CASES)])
    lower, upper = ppi_mean_ci(y, yhat, rest, alpha=0.05)
    assert (nat["calibrated_ci_lower"], nat["calibrated_ci_upper"]) == pytest.approx((lower[0], upper[0]))
    assert nat["judge_bias"] == pytest.approx(float(np.mean(yhat - y))) and nat["judge_bias"] > 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "Judge-calibrated estimates (physician annotations)" in page
    assert f"{nat['calibrated']:.3f} [{lower[0]:.3f}, {upper[0]:.3f}]" in page


def test_too_few_annotated_cases_say_so_instead_of_an_interval(run, tmp_path):
    log_path, annotations = run
    code, out = report(tmp_path, log_path, "--annotations", annotations)
    assert code == 0
    clarity = pd.read_csv(out / "calibrated.csv").set_index("metric").loc["clarity"]
    assert clarity["n_annotated"] == CLARITY < MIN_ANNOTATED
    assert np.isnan(clarity["calibrated"]) and np.isnan(clarity["calibrated_ci_lower"])
    assert clarity["note"] == TOO_FEW.format(minimum=MIN_ANNOTATED)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert TOO_FEW.format(minimum=MIN_ANNOTATED).replace("<", "&lt;") in page


def test_the_shipped_synthetic_annotations_are_too_few_everywhere(tmp_path):
    """The six annotated cases of tests/discharge/annotations_synthetic.csv, on a log of those cases."""
    samples = [discharge_case(f"case-{i}", end="clean_complete", values={"naturalness": 3.0}) for i in range(1, 7)]
    path = write(log("bedside/discharge", "prov/a", samples), tmp_path / "six.eval")
    code, out = report(tmp_path, path, "--annotations", str(FIXTURE))
    assert code == 0
    table = pd.read_csv(out / "calibrated.csv")
    assert len(table) and (table["note"] == TOO_FEW.format(minimum=MIN_ANNOTATED)).all()


def test_the_estimates_follow_the_population_of_table1(run, tmp_path):
    log_path, annotations = run
    code, out = report(tmp_path, log_path, "--annotations", annotations, "--population", "clean_complete")
    assert code == 0
    nat = pd.read_csv(out / "calibrated.csv").set_index("metric").loc["naturalness"]
    clean = [i for i in range(N_CASES) if i % 7 != 3]
    assert nat["n_judged"] == len(clean) == pd.read_csv(out / "table1_wide.csv")["n"].iloc[0]
    assert nat["n_annotated"] == len([i for i in clean if i < NATURALNESS])
    assert nat["judge_mean"] == pytest.approx(np.mean([judge(i) for i in clean]))


def _without_timestamp(page: str) -> str:
    return re.sub(r"Generated [^<]*", "", page)


def test_without_annotations_the_report_is_unchanged(run, tmp_path):
    """The page without --annotations is the page with it minus exactly the calibrated block; no calibrated.csv."""
    log_path, annotations = run
    assert report(tmp_path / "plain", log_path)[0] == 0
    assert report(tmp_path / "annotated", log_path, "--annotations", annotations)[0] == 0
    plain = tmp_path / "plain" / "report"
    assert not (plain / "calibrated.csv").exists()
    without = _without_timestamp((plain / "index.html").read_text(encoding="utf-8"))
    with_block = _without_timestamp((tmp_path / "annotated" / "report" / "index.html").read_text(encoding="utf-8"))
    start = with_block.index("<h3>Judge-calibrated estimates")
    end = with_block.index('<a href="calibrated.csv">calibrated.csv</a></p>') + len(
        '<a href="calibrated.csv">calibrated.csv</a></p>'
    )
    assert with_block[:start].rstrip("\n") + with_block[end:] == without
    assert "Judge-calibrated" not in without
    assert sorted(p.name for p in plain.iterdir()) == sorted(
        p.name for p in (tmp_path / "annotated" / "report").iterdir() if p.name != "calibrated.csv"
    )


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ("case-1,phys_a,naturalness,7", "value", "'7' is not a 1-5 rating"),
        ("case-1,phys_a,Q1,maybe", "value", "'maybe' is not yes/no"),
        ("case-1,phys_a,q2,mostly", "value", "is not correct / partially correct / incorrect"),
        ("case-1,phys_a,tcs,high", "value", "'high' is not a number"),
        # numeric keys are checked against the scale their scorer declares ([0, 1] for tcs and comprehension)
        ("case-1,phys_a,tcs,1.7", "value", "tcs: 1.7 is outside its scale, 0 to 1"),
        ("case-1,phys_a,tcs,-0.2", "value", "tcs: -0.2 is outside its scale, 0 to 1"),
        ("case-1,phys_a,tcs,50", "value", "tcs: 50 is outside its scale, 0 to 1"),
        ("case-1,phys_a,tcs,inf", "value", "tcs: inf is not a finite number"),
        ("case-1,phys_a,comprehension,1.5", "value", "comprehension: 1.5 is outside its scale, 0 to 1"),
        (",phys_a,naturalness,3", "case_id", "empty"),
    ],
)
def test_a_bad_annotation_stops_the_report_naming_file_line_and_field(run, tmp_path, capsys, row, field, message):
    log_path, _ = run
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "# comment line\ncase_id,annotator,item,value\ncase-2,phys_a,naturalness,4\n\n" + row + "\n", encoding="utf-8"
    )
    code, out = report(tmp_path, log_path, "--annotations", str(bad))
    printed = capsys.readouterr().out
    assert code == 2
    assert f"{bad}, line 5, field '{field}'" in printed and message in printed
    assert not out.exists()  # stopped before anything was written


def test_a_bad_epoch_names_its_line(run, tmp_path, capsys):
    log_path, _ = run
    bad = tmp_path / "bad.csv"
    bad.write_text("case_id,annotator,item,value,epoch\ncase-2,phys_a,naturalness,4,1\ncase-3,phys_a,clarity,4,one\n")
    assert report(tmp_path, log_path, "--annotations", str(bad))[0] == 2
    assert f"{bad}, line 3, field 'epoch': 'one' is not an epoch number" in capsys.readouterr().out


def test_annotations_for_logs_of_no_benchmark_that_takes_them_are_refused(tmp_path, capsys):
    from inspect_ai.scorer import Score

    path = write(
        log("bedside/cpb", "prov/c", [sample("p1", {"cpb_failure": Score(value={"failure": 0.0})})]),
        tmp_path / "c.eval",
    )
    assert report(tmp_path, path, "--annotations", str(FIXTURE))[0] == 2
    assert "takes physician annotations" in capsys.readouterr().out
