"""MedSP records and loaders: the shipped demo set, bad input reported by name, the real rubrics."""

from __future__ import annotations

import json
import shutil

import pytest

from bedside.medsp.records import (
    COMPETENCIES,
    ROLES,
    MedSPError,
    Rubric,
    load_rubrics,
    load_scenarios,
    normalise_packet_text,
    read_rubric,
)
from bedside.medsp.samples import DEMO_DIR, medsp_dataset
from tests.conftest import shared_path

ANA = "bedside_demo_anaphylaxis"


@pytest.fixture
def demo_copy(tmp_path):
    root = tmp_path / "data"
    shutil.copytree(DEMO_DIR, root)
    return root


@pytest.mark.eval
def test_demo_set_layout_specialties_and_rubrics():
    loaded = load_scenarios(DEMO_DIR)
    assert loaded.unusable == [] and loaded.rubric_items_empty == []
    scenarios = loaded.scenarios
    assert len({s.case_id for s in scenarios}) >= 6 and len(scenarios) == 7
    specialties = {s.case_id: s.meta.specialty for s in scenarios}
    assert len(set(specialties.values())) == len(specialties)  # one specialty per case
    for s in scenarios:
        assert s.meta.synthetic
        for role in ROLES:
            assert "FICTIONAL SYNTHETIC CASE" in s.packet(role).text(), (s.key, role)
        # several competencies, items verbatim from the evaluator packet (paper 5.4)
        assert sum(1 for c in COMPETENCIES if s.rubric.counts()[c]) >= 4, s.key
        evaluator = s.evaluator.text()
        assert all(item.text in evaluator for item in s.rubric.items()), s.key
        # the rubric is never inside another role's packet
        others = "\n".join(s.packet(r).text() for r in ROLES if r != "evaluator")
        assert not any(item.text in others for item in s.rubric.items()), s.key
    # an acute case with timed events, a communication case
    acute = [s for s in scenarios if "**T+" in s.environment_controller.text()]
    assert len(acute) >= 4
    assert any(s.meta.model_extra.get("encounter_type") == "communication" for s in scenarios)
    bad_news = next(s for s in scenarios if s.case_id == "bedside_demo_bad_news")
    assert sum(bad_news.rubric.counts().values()) == 14 and bad_news.rubric.counts()["ICS"] == 8


def test_rubric_ids_and_counts():
    [ana] = [s for s in load_scenarios(DEMO_DIR).scenarios if s.case_id == ANA]
    items = ana.rubric.items()
    assert [i.id for i in items][:2] == ["PC.1", "PC.2"] and items[6].id == "MK.1"
    assert ana.rubric.n_items == len(items) == 13
    assert ana.rubric.counts() == {"PC": 6, "MK": 2, "SBP": 1, "ICS": 3, "PBLI": 0, "PROF": 1}


def test_empty_and_invalid_rubrics_are_reported_by_name_not_crashed_on(demo_copy):
    (demo_copy / ANA / f"{ANA}_scenario1.json").write_text("")
    dka = demo_copy / "bedside_demo_dka" / "bedside_demo_dka_scenario2.json"
    dka.write_text("{not json")
    loaded = load_scenarios(demo_copy)
    assert len(loaded.scenarios) == 5
    messages = [str(u) for u in loaded.unusable]
    assert any(f"{ANA}_scenario1.json: {ANA}/scenario1: empty file (0 bytes): unusable" in m for m in messages)
    assert any("bedside_demo_dka_scenario2.json" in m and "not valid JSON" in m for m in messages)
    # the dataset leaves them out, reports them and still runs the rest
    dataset, report = medsp_dataset(demo_copy)
    assert len(dataset) == 5 and len(report.unusable) == 2 and report.scenarios == 5


def test_bad_rubric_field_names_file_record_and_field(demo_copy):
    path = demo_copy / ANA / f"{ANA}_scenario1.json"
    raw = json.loads(path.read_text())
    raw["PC"][2] = 7
    raw["MK"] = "not a list"
    raw["pc_extra"] = []
    path.write_text(json.dumps(raw))
    rubric, problems = read_rubric(path)
    assert rubric is None
    text = [str(p) for p in problems]
    assert all(str(path) in t and f"{ANA}/scenario1" in t for t in text)
    assert {p.field for p in problems} == {"PC.2", "MK", "pc_extra"}


@pytest.mark.eval
def test_rubric_ids_must_match_the_file_name_and_items_be_unique(demo_copy):
    path = demo_copy / ANA / f"{ANA}_scenario1.json"
    raw = json.loads(path.read_text())
    raw["scenario"] = "scenario2"
    path.write_text(json.dumps(raw))
    _, problems = read_rubric(path)
    assert [(p.field, p.record) for p in problems] == [("scenario", f"{ANA}/scenario1")]
    raw["scenario"] = "scenario1"
    raw["ICS"].append(raw["PC"][0])
    path.write_text(json.dumps(raw))
    _, problems = read_rubric(path)
    assert len(problems) == 1 and "repeats item PC.1" in problems[0].reason


@pytest.mark.eval
def test_missing_role_folder_and_empty_packet_file_are_reported(demo_copy):
    shutil.rmtree(demo_copy / ANA / "scenario1" / "sp_actor")
    (demo_copy / "bedside_demo_back_pain" / "scenario1" / "evaluator" / "notes.md").write_text("  \n")
    (demo_copy / "bedside_demo_peds_asthma" / "scenario1" / "examinee" / "extra.json").write_text("{broken")
    (demo_copy / "bedside_demo_preeclampsia" / "scenario1" / "environment_controller" / "chart.png").write_bytes(
        b"\x89PNG"
    )
    loaded = load_scenarios(demo_copy)
    by_record = {u.record: u for u in loaded.unusable}
    assert by_record[f"{ANA}/scenario1"].field == "sp_actor" and "missing" in by_record[f"{ANA}/scenario1"].reason
    empty = by_record["bedside_demo_back_pain/scenario1"]
    assert empty.field == "evaluator/notes.md" and "empty file" in empty.reason and empty.path.endswith("notes.md")
    assert by_record["bedside_demo_peds_asthma/scenario1"].field == "examinee/extra.json"
    # a non-text file is skipped (listed), not a problem
    pre = next(s for s in loaded.scenarios if s.case_id == "bedside_demo_preeclampsia")
    assert pre.environment_controller.skipped == ["chart.png"]
    assert len(loaded.scenarios) == 4


def test_multi_file_packets_are_compiled_as_the_official_code_does(demo_copy):
    folder = demo_copy / ANA / "scenario1" / "examinee"
    (folder / "appendix.txt").write_text("Appendix: triage ECG strip reads sinus tachycardia.\n")
    (folder / "notes").mkdir()
    (folder / "notes" / "README").write_text("A file without suffix is read too.")  # no suffix: kept
    (folder / "notes" / "table.csv").write_text("a,b\n1,2\n")
    (folder / ".hidden.md").write_text("never shown")
    (folder / "scan.pdf").write_bytes(b"%PDF")
    [ana] = [s for s in load_scenarios(demo_copy).scenarios if s.case_id == ANA]
    text = ana.examinee.text()
    # each file under "## <file name>" (name only, not its folder), in path order, blank line after the header
    assert text.startswith("## appendix.txt\n\nAppendix: triage ECG")
    assert (
        text.index("## appendix.txt")
        < text.index("## README")
        < text.index("## table.csv")
        < text.index("## scenario.md")
    )
    assert "## notes/README" not in text and "A file without suffix is read too." in text
    assert "never shown" not in text and ana.examinee.skipped == ["scan.pdf"]


def test_strikethrough_and_marker_lines_are_removed_from_packets():
    text = "# Title\n\n\n\nKeep this.\n~~Struck on one line.~~ Tail kept.\n~~Struck\nacross\nlines~~\n-\n##\n3.\n  indented kept   \n\n\nEnd"
    # the struck lines leave an empty line (one blank kept); the orphan markers "-", "##", "3." are dropped
    assert normalise_packet_text(text) == "# Title\n\nKeep this.\n Tail kept.\n\n  indented kept\n\nEnd"
    assert normalise_packet_text("\n\n~~all gone~~\n\n") == ""
    # the demo packets carry struck-through text that no agent sees; the raw files keep it
    scenarios = {s.case_id: s for s in load_scenarios(DEMO_DIR).scenarios}
    back = scenarios["bedside_demo_back_pain"].examinee
    assert "~~Triage note (superseded)" in back.files[0].text and "kidney stone" not in back.text()
    env = scenarios[ANA].environment_controller
    assert "skin prick test" in env.files[0].text and "skin prick" not in env.text() and "~~" not in env.text()
    assert env.compiled_text(strip_strikethrough=False).count("~~") == 2


def test_role_folders_under_the_official_alternative_names(demo_copy):
    scen = demo_copy / ANA / "scenario1"
    (scen / "sp_actor").rename(scen / "SP")
    (scen / "environment_controller").rename(scen / "environment")
    [ana] = [s for s in load_scenarios(demo_copy).scenarios if s.case_id == ANA]
    assert ana.sp_actor.folder == "SP" and ana.environment_controller.folder == "environment"
    assert "Dana Reyes" in ana.sp_actor.text()


@pytest.mark.eval
def test_folders_that_do_not_match_the_layout_are_reported_by_name(demo_copy, tmp_path):
    (demo_copy / "stray_case").mkdir()
    (demo_copy / "stray_case" / "notes").mkdir()
    (demo_copy / ANA / "scenario_2").mkdir()  # not scenarioN
    (demo_copy / ".git").mkdir()  # hidden: ignored
    loaded = load_scenarios(demo_copy)
    assert len(loaded.scenarios) == 7
    by_path = {u.path: u for u in loaded.unusable}
    stray = by_path[str(demo_copy / "stray_case")]
    assert stray.field == "layout" and "case folder without any scenarioN folder" in stray.reason
    assert "notes/" in stray.reason and "<root>/<case_id>/<scenarioN>/" in stray.reason
    odd = by_path[str(demo_copy / ANA / "scenario_2")]
    assert odd.record == f"{ANA}/scenario_2" and "is not scenarioN" in odd.reason
    assert not any(".git" in u.path for u in loaded.unusable)
    # the dataset reports them (warnings, eval log) and still runs the rest
    dataset, report = medsp_dataset(demo_copy)
    assert len(dataset) == 7 and any("stray_case" in u for u in report.unusable)
    # a data folder one level too deep (a case folder) or two (a scenario folder): a clear error
    with pytest.raises(MedSPError, match="no scenario folders found") as err:
        load_scenarios(demo_copy / ANA)
    assert "looks like a scenario folder" in str(err.value) and "scenario1" in str(err.value)
    with pytest.raises(MedSPError, match="no scenario folders found") as err:
        load_scenarios(demo_copy / ANA / "scenario1")
    assert "looks like a case or scenario folder" in str(err.value)


@pytest.mark.eval
def test_missing_role_folder_names_the_folder_and_what_is_missing(demo_copy):
    shutil.rmtree(demo_copy / ANA / "scenario1" / "evaluator")
    loaded = load_scenarios(demo_copy)
    [problem] = [u for u in loaded.unusable if u.record == f"{ANA}/scenario1"]
    assert problem.path == str(demo_copy / ANA / "scenario1") and problem.field == "evaluator"
    assert "role folder is missing: expected evaluator/ or 评估者/" in problem.reason


def test_rubrics_from_a_separate_folder(demo_copy, tmp_path):
    rubric_dir = tmp_path / "rubrics"
    rubric_dir.mkdir()
    for path in demo_copy.glob("*/*_scenario*.json"):
        shutil.move(str(path), rubric_dir / path.name)
    with pytest.raises(MedSPError, match="no usable MedSP scenario"):
        medsp_dataset(demo_copy)  # without rubrics=: every scenario lacks its rubric
    loaded = load_scenarios(demo_copy)
    assert len(loaded.unusable) == 7 and all(u.field == "rubric" for u in loaded.unusable)
    (rubric_dir / "extra_case_scenario1.json").write_text("")  # an unusable file of the folder, reported
    dataset, report = medsp_dataset(demo_copy, rubrics=rubric_dir)
    assert len(dataset) == 7 and report.rubrics == str(rubric_dir)
    assert [u for u in report.unusable] == [
        f"{rubric_dir / 'extra_case_scenario1.json'}: extra_case/scenario1: empty file (0 bytes): unusable"
    ]


def test_zero_item_rubric_is_loaded_but_left_out_and_reported(demo_copy):
    path = demo_copy / ANA / f"{ANA}_scenario1.json"
    raw = json.loads(path.read_text())
    for c in COMPETENCIES:
        raw[c] = []
    path.write_text(json.dumps(raw))
    loaded = load_scenarios(demo_copy)
    assert loaded.rubric_items_empty == [f"{ANA}/scenario1"] and len(loaded.scenarios) == 7
    dataset, report = medsp_dataset(demo_copy)
    assert len(dataset) == 6 and report.no_rubric_items == [f"{ANA}/scenario1"]


def test_not_a_folder_or_no_scenarios_is_an_error(tmp_path):
    with pytest.raises(MedSPError, match="no such MedSP data folder"):
        load_scenarios(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MedSPError, match="no scenario folders found"):
        load_scenarios(tmp_path / "empty")


def test_demo_samples_carry_grouping_metadata():
    dataset, report = medsp_dataset()
    assert len(dataset) == 7 and report.unusable == []
    sample = next(s for s in dataset if s.id == f"{ANA}/scenario1")
    assert sample.metadata["specialty"] == "Emergency medicine"
    assert sample.metadata["n_items"] == 13 and sample.metadata["rubric_counts"]["PC"] == 6
    assert sample.metadata["scenario_record"]["rubric"]["case_id"] == ANA


@pytest.mark.shared
def test_real_frozen_rubrics_counts_and_the_four_empty_files():
    folder = shared_path("data", "medsp1000", "rubrics")
    rubrics = load_rubrics(folder)
    assert len(rubrics.rubrics) == 1634
    assert rubrics.n_items == 24602
    assert rubrics.counts() == {"PC": 9563, "ICS": 8625, "MK": 2936, "SBP": 2518, "PROF": 637, "PBLI": 323}
    assert sorted(u.path.rsplit("/", 1)[-1] for u in rubrics.unusable) == [
        "mep_2374-8265.11256-s001_scenario3.json",
        "mep_2374-8265.11268-s001_scenario3.json",
        "mep_2374-8265.11298-s001_scenario1.json",
        "mep_2374-8265.11355-s001_scenario1.json",
    ]
    assert all("empty file (0 bytes): unusable" in str(u) for u in rubrics.unusable)
    assert {r.rubric_version for r in rubrics.rubrics.values()} == {"v1"}
    assert len(rubrics.without_items()) == 86  # valid but nothing to score: left out of datasets, reported
    sample = rubrics.rubrics["mededportal_10009/scenario1"]
    assert isinstance(sample, Rubric) and sample.items()[0].id == "PC.1"


@pytest.mark.shared
def test_dataset_with_the_real_rubric_folder_reports_the_empty_files(demo_copy):
    folder = shared_path("data", "medsp1000", "rubrics")
    with pytest.raises(MedSPError) as err:  # the demo scenarios have no rubric in the release
        medsp_dataset(demo_copy, rubrics=folder)
    message = str(err.value)
    assert (
        "mep_2374-8265.11256-s001_scenario3.json: mep_2374-8265.11256-s001/scenario3: empty file (0 bytes): unusable"
        in message
    )
    assert "bedside_demo_anaphylaxis/scenario1: field 'rubric': no rubric file for this scenario" in message
