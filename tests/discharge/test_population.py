"""``--population`` of ``bedside report`` / ``bedside strata``: which DischargeBench sessions Table 1 averages."""

from __future__ import annotations

import pandas as pd
import pytest

from bedside.cli import main
from bedside.discharge.population import in_population
from bedside.discharge.report import table1
from bedside.reporting.load import load, scores_frame
from bedside.reporting.run import Run
from bedside.reporting.population import restrict_frame, restrict_log
from bedside.reporting.strata import strata_table
from tests.reporting.synth import discharge_case, log, write

pytestmark = pytest.mark.eval

#: (case, end reason, turns, TCS, char-break turns): one session of each kind
CASES = [
    ("clean-long", "clean_complete", 30, 0.9, ()),
    ("clean-short-low", "clean_complete", 12, 0.2, ()),  # A.7.2: short with TCS < 0.5
    ("clean-short-ok", "clean_complete", 12, 0.8, ()),  # short, but TCS >= 0.5: kept by the audit
    ("clean-break", "clean_complete", 30, 0.7, (3,)),  # A.7.2: the patient broke character
    ("hard-stop", "hard_stop", 25, 0.5, ()),  # erroneous but evaluable
    ("failed", "system_failure", 5, 0.0, ()),  # system-level failure: unscored
]
MEMBERS = {
    "evaluable": {"clean-long", "clean-short-low", "clean-short-ok", "clean-break", "hard-stop"},
    "clean_complete": {"clean-long", "clean-short-low", "clean-short-ok", "clean-break"},
    "audited": {"clean-long", "clean-short-ok"},
}


def the_log():
    samples = [
        discharge_case(sid, end=end, turns=turns, char_break_turns=breaks, values={"tcs": tcs, "naturalness": 3.0})
        for sid, end, turns, tcs, breaks in CASES
    ]
    return log("bedside/discharge", "prov/a", samples)


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    return write(the_log(), tmp_path_factory.mktemp("population") / "run.eval")


@pytest.mark.parametrize("population", list(MEMBERS))
def test_membership_of_each_population(population):
    samples = the_log().samples or []
    members = {str(s.id) for s in samples if in_population(s, population)}
    assert members == MEMBERS[population]
    kept = {str(s.id) for s in restrict_log(Run.of(the_log()), population).samples}
    assert kept == (MEMBERS[population] | {"failed"} if population == "evaluable" else MEMBERS[population])


@pytest.mark.parametrize("population", list(MEMBERS))
def test_table1_averages_the_chosen_population(log_path, population):
    logs = load([log_path])
    long, wide = table1(restrict_frame(scores_frame(logs), logs, population))
    tcs = long[long["key"] == "tcs"].iloc[0]
    want = [tcs_ for sid, _, _, tcs_, _ in CASES if sid in MEMBERS[population]]
    assert tcs["n"] == len(want) and tcs["mean"] == pytest.approx(sum(want) / len(want))
    assert wide["n"].iloc[0] == len(MEMBERS[population])


def test_default_keeps_the_frame_and_the_log(log_path):
    logs = load([log_path])
    frame = scores_frame(logs)
    pd.testing.assert_frame_equal(restrict_frame(frame, logs, "evaluable"), frame)
    assert restrict_log(logs[0].log, "evaluable") is logs[0].log
    with pytest.raises(ValueError, match="population must be one of"):
        restrict_log(logs[0].log, "successful")


def test_strata_and_report_take_the_option(log_path, tmp_path, capsys):
    out = tmp_path / "strata.csv"
    assert main(["strata", log_path, "--by", "icd_chapter", "--population", "audited", "--csv", str(out)]) == 0
    table = pd.read_csv(out)
    assert table.loc[table["key"] == "tcs", "n"].tolist() == [2]
    direct = strata_table(restrict_log(Run.of(the_log()), "clean_complete"), ["icd_chapter"])
    assert direct.loc[direct["key"] == "tcs", "n"].tolist() == [4]
    assert main(["report", log_path, "--out", str(tmp_path / "report"), "--population", "clean_complete"]) == 0
    wide = pd.read_csv(tmp_path / "report" / "table1_wide.csv")
    assert wide["n"].tolist() == [4] and wide["system_failures"].tolist() == [0]


def _table1_caption(page: str) -> str:
    start = page.index("<h3>Table 1: main results</h3>")
    return page[start : page.index("</p>", start)]


@pytest.mark.parametrize("population", [None, *MEMBERS])
def test_table1s_caption_names_the_population_shown(log_path, tmp_path, population):
    import html

    from bedside.discharge.population import COUNTED

    out = tmp_path / "report"
    assert main(["report", log_path, "--out", str(out), *(["--population", population] if population else [])]) == 0
    caption = html.unescape(_table1_caption((out / "index.html").read_text(encoding="utf-8")))
    assert f"n = {COUNTED[population or 'evaluable']}." in caption
    if population in (None, "evaluable"):  # the default caption keeps its wording
        assert (
            "n = evaluable sessions (system-level failures excluded and counted separately; their scores are unscored)."
            in caption
        )
    else:
        assert "n = evaluable" not in caption and f"--population {population}" in caption
