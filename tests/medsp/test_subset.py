"""``subset=q100``: MedSP1000-Q100 from the release's subset.json, or a subset file by path."""

from __future__ import annotations

import json
import shutil

import pytest

from bedside.medsp.records import MedSPError, load_rubrics, load_subset
from bedside.medsp.samples import DEMO_DIR, find_subset_file, medsp_dataset, select_subset
from tests.conftest import shared_path

KEEP = ["bedside_demo_bad_news/scenario1", "bedside_demo_dka/scenario2"]


def write_subset(path, scenarios, name="MedSP1000-Q100"):
    path.write_text(
        json.dumps({"name": name, "description": "test", "n_scenarios": len(scenarios), "scenarios": scenarios})
    )
    return path


@pytest.fixture
def demo_copy(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(DEMO_DIR, root)
    return root


@pytest.mark.shared
def test_q100_selects_the_100_scenarios_of_the_release():
    folder = shared_path("data", "medsp1000", "rubrics")
    subset_path = find_subset_file("q100", data=DEMO_DIR, rubrics=folder)  # found next to rubrics/
    assert subset_path == folder.parent / "subset.json"
    subset = load_subset(subset_path)
    assert subset.name == "MedSP1000-Q100" and subset.n_scenarios == 100
    keys = sorted(load_rubrics(folder).rubrics)
    kept, missing = select_subset(keys, subset)
    assert len(kept) == 100 and missing == []
    assert set(kept) == set(subset.scenarios) and kept == sorted(kept)  # data order kept


def test_q100_from_the_data_folder_selects_and_reports_missing_entries(demo_copy):
    write_subset(demo_copy / "subset.json", [*KEEP, "mededportal_0000/scenario1"])
    dataset, report = medsp_dataset(demo_copy, subset="q100")
    assert sorted(s.id for s in dataset) == KEEP
    assert report.subset == "MedSP1000-Q100" and report.subset_missing == ["mededportal_0000/scenario1"]
    assert report.subset_file == str(demo_copy / "subset.json")


def test_q100_without_the_subset_file_says_where_it_looked(demo_copy):
    with pytest.raises(MedSPError, match=r"needs the release's subset.json .*-T subset=/path/to/subset.json"):
        medsp_dataset(demo_copy, subset="q100")


def test_q100_checks_the_subset_name(demo_copy):
    write_subset(demo_copy / "subset.json", KEEP, name="Another-Subset")
    with pytest.raises(MedSPError, match="expected 'MedSP1000-Q100'"):
        medsp_dataset(demo_copy, subset="q100")


def test_subset_by_path_and_bad_subset_files(tmp_path):
    path = write_subset(tmp_path / "mine.json", KEEP[:1], name="mine")
    dataset, report = medsp_dataset(subset=str(path))
    assert [s.id for s in dataset] == KEEP[:1] and report.subset == "mine"
    with pytest.raises(MedSPError, match="not a known subset"):
        medsp_dataset(subset=str(tmp_path / "absent.json"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "n_scenarios": 3, "scenarios": ["a/scenario1", "b"]}))
    with pytest.raises(MedSPError, match="bad.json: subset: field 'scenarios'"):
        medsp_dataset(subset=str(bad))
    none_present = write_subset(tmp_path / "none.json", ["nowhere/scenario1"], name="none")
    with pytest.raises(MedSPError, match="no usable MedSP scenario in subset"):
        medsp_dataset(subset=str(none_present))
