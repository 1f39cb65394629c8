"""DischargeBench's paper-silent options per run in ``bedside report`` and ``bedside strata``: each log's
value (task metadata, else task arguments, else the default marked not recorded), and a warning on the page
and on stderr when runs in one table used different values."""

from __future__ import annotations

import inspect

import pandas as pd
import pytest

from bedside.benchmark import NOT_APPLICABLE
from bedside.cli import main
from bedside.discharge import BENCHMARK
from bedside.reporting.run_options import NOT_RECORDED, options_of
from tests.reporting.synth import discharge_case, log, write

pytestmark = pytest.mark.eval

OPTIONS = ("monitor_policy", "checklist_applicability", "comprehension_divisor")
DEFAULTS = {"monitor_policy": "algorithm1", "checklist_applicability": "rule", "comprehension_divisor": "applicable"}


def run_log(model: str, metadata: dict | None = None, task_args: dict | None = None):
    samples = [
        discharge_case(f"case-{i}", end="clean_complete", values={"naturalness": 3.0, "tcs": 0.5}) for i in range(3)
    ]
    the_log = log("bedside/discharge", model, samples, task_args=task_args)
    return the_log.model_copy(update={"eval": the_log.eval.model_copy(update={"metadata": metadata})})


def test_the_descriptor_declares_the_tasks_recorded_options_with_their_defaults():
    from bedside.tasks.discharge import discharge

    assert BENCHMARK.run_options == OPTIONS
    parameters = inspect.signature(discharge).parameters
    assert {k: parameters[k].default for k in OPTIONS} == BENCHMARK.run_option_defaults == DEFAULTS
    recorded = discharge().metadata or {}
    assert {k: recorded[k] for k in OPTIONS} == DEFAULTS
    recorded = discharge(monitor_policy="recommended_action", comprehension_divisor="all_six").metadata or {}
    assert {k: recorded[k] for k in OPTIONS} == {
        **DEFAULTS,
        "monitor_policy": "recommended_action",
        "comprehension_divisor": "all_six",
    }


def test_a_value_comes_from_the_metadata_else_the_task_arguments_else_the_default():
    recorded = run_log("prov/a", {"monitor_policy": "recommended_action"}, {"checklist_applicability": "all"})
    assert options_of(recorded, BENCHMARK) == {
        "monitor_policy": ("recommended_action", True),
        "checklist_applicability": ("all", True),
        "comprehension_divisor": ("applicable", False),
    }


@pytest.fixture
def logs(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    write(run_log("prov/a", DEFAULTS), folder / "a.eval")
    write(run_log("prov/b", {**DEFAULTS, "monitor_policy": "recommended_action"}), folder / "b.eval")
    write(run_log("prov/c"), folder / "old.eval")  # written before the options were recorded
    return folder


def test_the_report_shows_each_runs_options_and_warns_when_they_differ(logs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(logs), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    table = pd.read_csv(out / "discharge_run_options.csv")
    by_log = {(r["log"], r["option"]): (r["value"], r["recorded"]) for r in table.to_dict("records")}
    assert by_log[("b.eval", "monitor_policy")] == ("recommended_action", True)
    assert by_log[("old.eval", "monitor_policy")] == ("algorithm1", False)
    assert by_log[("a.eval", "comprehension_divisor")] == ("applicable", True)
    assert len(table) == 3 * len(OPTIONS)
    warning = "warning: DischargeBench runs in one table used different monitor_policy: "
    warning += "algorithm1 (a.eval, old.eval); recommended_action (b.eval)"
    assert warning in err
    assert err.count("warning: DischargeBench") == 1  # the other two options agree
    page = (out / "index.html").read_text(encoding="utf-8")
    assert warning in page and f"algorithm1 {NOT_RECORDED}" in page
    assert page.index(warning) < page.index("<h2>DischargeBench</h2>")  # at the top, with the page's notes


def test_no_warning_when_the_runs_agree(tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    write(run_log("prov/a", DEFAULTS), folder / "a.eval")
    write(run_log("prov/c"), folder / "old.eval")  # the default, not recorded: the same value
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    assert "warning: DischargeBench" not in capsys.readouterr().err
    assert "used different" not in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")


def test_strata_shows_each_runs_options_and_warns(logs, tmp_path, capsys):
    csv = tmp_path / "strata.csv"
    assert main(["strata", str(logs / "a.eval"), str(logs / "b.eval"), str(logs / "old.eval"), "--csv", str(csv)]) == 0
    captured = capsys.readouterr()
    assert "run options (DischargeBench):" in captured.out
    assert f"algorithm1 {NOT_RECORDED}" in captured.out and "recommended_action" in captured.out
    assert "different monitor_policy" in captured.err
    table = pd.read_csv(csv)
    per_log = table.groupby("log")["monitor_policy"].unique()
    assert sorted(v for values in per_log for v in values) == [
        "algorithm1",
        f"algorithm1 {NOT_RECORDED}",
        "recommended_action",
    ]


# --- the safety probe: none of the options applies ----------------------------------------------
def probe_log(model: str, metadata: dict | None = None):
    """A safety-probe run (task ``discharge_safety_probe``); ``metadata``: whatever its log records."""
    the_log = run_log(model, metadata)
    return the_log.model_copy(
        update={"eval": the_log.eval.model_copy(update={"task": "bedside/discharge_safety_probe"})}
    )


def test_the_descriptor_declares_the_probe_a_task_without_run_options():
    assert BENCHMARK.tasks_without_run_options == ("discharge_safety_probe",)
    assert not BENCHMARK.run_options_apply("bedside/discharge_safety_probe")
    assert BENCHMARK.run_options_apply("bedside/discharge") and BENCHMARK.run_options_apply("discharge")
    # whatever a probe log records, its options are not applicable; a discharge log's are read as before
    recorded = {"monitor_policy": "recommended_action"}
    assert options_of(probe_log("prov/p", recorded), BENCHMARK) == {k: (NOT_APPLICABLE, True) for k in OPTIONS}
    assert options_of(run_log("prov/p", recorded), BENCHMARK)["monitor_policy"] == ("recommended_action", True)


@pytest.fixture
def probe_and_runs(tmp_path):
    """A discharge run with recommended_action beside two safety-probe runs (one recording nothing)."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    write(run_log("prov/b", {**DEFAULTS, "monitor_policy": "recommended_action"}), folder / "b.eval")
    write(probe_log("prov/p"), folder / "probe.eval")
    write(probe_log("prov/q", DEFAULTS), folder / "probe_recorded.eval")
    return folder


def test_probe_logs_show_not_applicable_and_never_trigger_the_warning(probe_and_runs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(probe_and_runs), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "used different" not in err
    table = pd.read_csv(out / "discharge_run_options.csv")
    by_log = {(r["log"], r["option"]): r["value"] for r in table.to_dict("records")}
    assert {by_log[("probe.eval", k)] for k in OPTIONS} == {NOT_APPLICABLE}
    assert {by_log[("probe_recorded.eval", k)] for k in OPTIONS} == {NOT_APPLICABLE}
    assert by_log[("b.eval", "monitor_policy")] == "recommended_action"
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "used different" not in page and NOT_APPLICABLE in page


def test_a_real_mix_between_discharge_runs_still_warns_beside_a_probe(probe_and_runs, tmp_path, capsys):
    write(run_log("prov/a", DEFAULTS), probe_and_runs / "a.eval")
    assert main(["report", str(probe_and_runs), "--out", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    warning = "warning: DischargeBench runs in one table used different monitor_policy: "
    assert warning + "algorithm1 (a.eval); recommended_action (b.eval)" in err  # the probes named nowhere
    assert err.count("warning: DischargeBench") == 1


def test_strata_shows_not_applicable_for_a_probe_and_does_not_warn(probe_and_runs, capsys):
    assert main(["strata", str(probe_and_runs / "b.eval"), str(probe_and_runs / "probe.eval")]) == 0
    captured = capsys.readouterr()
    assert NOT_APPLICABLE in captured.out and "used different" not in captured.err
    # each log named by its task and model, with only the variant arguments its task has
    assert "discharge_safety_probe (prov/p)" in captured.out and "discharge (prov/b)" in captured.out
    assert "behavior" not in captured.out


def test_strata_names_a_variant_argument_the_log_holds(tmp_path, capsys):
    write(run_log("prov/s", task_args={"behavior": "care_resistance"}), tmp_path / "s.eval")
    assert main(["strata", str(tmp_path / "s.eval")]) == 0
    assert "discharge behavior=care_resistance (prov/s)" in capsys.readouterr().out


# --- bedside compare and the sweep leaderboard show the options of the runs they compare -----------
def test_compare_shows_both_runs_options_and_warns_when_they_differ(logs, tmp_path, capsys):
    csv = tmp_path / "compare.csv"
    code = main(["compare", str(logs / "a.eval"), str(logs / "b.eval"), "--metric", "naturalness", "--csv", str(csv)])
    assert code == 0  # a legitimate comparison: shown and warned, never refused
    captured = capsys.readouterr()
    assert "| `monitor_policy` | algorithm1 | recommended_action ⚠️ |" in captured.out
    assert "| `comprehension_divisor` | applicable | applicable |" in captured.out
    warning = "warning: the two runs differ in monitor_policy (baseline algorithm1, candidate recommended_action)"
    assert f"⚠️ **{warning}" in captured.out and warning in captured.err
    assert captured.err.count("warning: the two runs differ") == 1
    assert pd.read_csv(csv)["run_options_differ"].tolist() == ["monitor_policy"]


def test_compare_shows_the_options_without_a_warning_when_the_runs_agree(logs, capsys):
    """The old log records no option: its default, marked not recorded, is the same value."""
    assert main(["compare", str(logs / "old.eval"), str(logs / "a.eval"), "--metric", "naturalness"]) == 0
    captured = capsys.readouterr()
    assert f"| `monitor_policy` | algorithm1 {NOT_RECORDED} | algorithm1 |" in captured.out
    assert "differ in" not in captured.out + captured.err


def test_the_sweep_leaderboard_shows_each_models_options_and_which_a_pair_differs_in(logs, tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(logs), "--out", str(out)]) == 0
    ranking = pd.read_csv(out / "leaderboard.csv")
    options = dict(zip(ranking["model"], ranking["run_options"]))
    assert options["prov/b"] == "monitor_policy=recommended_action, checklist_applicability=rule, " + (
        "comprehension_divisor=applicable"
    )
    assert options["prov/a"] == options["prov/c"] == options["prov/b"].replace("recommended_action", "algorithm1")
    pairs = pd.read_csv(out / "paired_differences.csv", keep_default_na=False)
    differ = {frozenset((a, b)): d for a, b, d in zip(pairs["model_a"], pairs["model_b"], pairs["run_options_differ"])}
    assert differ[frozenset(("prov/a", "prov/b"))] == differ[frozenset(("prov/b", "prov/c"))] == "monitor_policy"
    assert differ[frozenset(("prov/a", "prov/c"))] == ""
    page = (out / "index.html").read_text(encoding="utf-8")
    note = "warning: the models ranked for DischargeBench (grader (no grader role)) ran with different monitor_policy"
    assert note in page and page.index(note) > page.index("Leaderboard: models on the same cases")
