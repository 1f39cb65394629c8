"""DischargeBench's data versions: a run's record of its case file, the safety probe's of its transcripts and
cases, the case extraction's of its prompt set; compare and rescore refuse what differs, naming it (the rules of
every benchmark: tests/test_versions.py)."""

from __future__ import annotations

import json

import pytest
from inspect_ai import eval

from bedside.cli import main
from bedside.versions import KEY, data_versions, differences
from tests.conftest import scripted
from tests.discharge.tiny import DEMO, build_cases
from tests.reporting.synth import versioned_log


@pytest.mark.eval  # scripted runs
def test_a_run_records_the_hash_of_its_case_file(tmp_path):
    """Two scripted runs on case files that differ in one case: the logs say so, compare refuses."""
    other = tmp_path / "cases.jsonl"
    lines = DEMO.read_text().splitlines()[:2]
    changed = json.loads(lines[1])
    changed["allergies"] = "Penicillin"
    other.write_text(lines[0] + "\n" + json.dumps(changed) + "\n")
    same = tmp_path / "same.jsonl"
    same.write_text(lines[0] + "\n" + lines[1] + "\n")

    def run(data, name):
        [the_log] = eval(
            "bedside/discharge",
            task_args={"data": str(data), "min_turns": 2, "max_turns": 2},
            model=scripted(),
            model_roles={r: scripted() for r in ("patient", "monitor", "grader")},
            log_dir=str(tmp_path / name),
            display="none",
            log_realtime=False,  # no live sample buffer: the test reads the finished log
            limit=1,
        )
        return the_log

    a, b = run(same, "a"), run(other, "b")
    va, vb = a.eval.metadata[KEY], b.eval.metadata[KEY]
    assert va["cases"] == data_versions(same, "discharge")["cases"] and va["prompts"] == vb["prompts"]
    assert differences(va, vb) == ["cases"]
    assert main(["compare", a.location, b.location]) == 2


@pytest.mark.eval
def test_a_safety_probe_log_beside_the_sweep_does_not_block_its_leaderboard(tmp_path):
    """The probe is another task of DischargeBench with its own inputs (its transcripts): its data are
    compared with other probe runs only, not with the discharge runs of the sweep."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from bedside.reporting.build import build

    base = {"cases": "sha256:0", "prompts": "sha256:0", "bedside": "0.1"}
    a = versioned_log(tmp_path, "a", "prov/a", base, 0)
    b = versioned_log(tmp_path, "b", "prov/b", base, 1)
    probes = []
    for name, record in (("probe", {**base, "probes": "sha256:p"}), ("probe_other", {**base, "probes": "sha256:q"})):
        probe = read_eval_log(versioned_log(tmp_path, name, "prov/p", record, 0))
        probe.eval.task = "bedside/discharge_safety_probe"
        write_eval_log(probe, str(tmp_path / f"{name}.eval"))
        probes.append(str(tmp_path / f"{name}.eval"))
    build([a, b, probes[0]], tmp_path / "with_probe")
    assert (tmp_path / "with_probe" / "leaderboard.csv").exists()
    build([a, b, *probes], tmp_path / "two_probes")  # two probe runs on other transcripts: still refused
    page = (tmp_path / "two_probes" / "index.html").read_text()
    assert "No leaderboard" in page and "probe_other.eval vs" in page and "probes differs" in page


@pytest.mark.eval  # the case extraction, scripted
def test_rescore_checks_a_case_extraction_logs_prompts_and_refuses_a_mismatch_naming_the_hash(tmp_path, capsys):
    """The extraction (``build_discharge_cases``) is no reported task of DischargeBench, but its log records
    DischargeBench's prompt set (the extraction prompt is in it): rescore checks it like any other log's."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from bedside.reporting.rescore import check_prompts, rescore

    task_args = build_cases(tmp_path).args
    [extraction] = eval(
        "bedside/build_discharge_cases", task_args=task_args, model=scripted(), log_dir=str(tmp_path), display="none"
    )
    assert extraction.status == "success", extraction.error
    today = data_versions(None, "discharge")["prompts"]
    assert check_prompts(extraction, "extraction.eval", allow=False) == today  # today's prompts: checked, passes

    stale = read_eval_log(extraction.location)
    stale.eval.metadata[KEY]["prompts"] = "sha256:" + "0" * 64
    write_eval_log(stale, str(tmp_path / "stale.eval"))
    with pytest.raises(ValueError) as refused:
        rescore([str(tmp_path / "stale.eval")], scripted(), tmp_path / "out")
    message = str(refused.value)
    assert "prompts differs: the log recorded sha256:" + "0" * 64 in message
    assert f"prompts/discharge/ is {today} today" in message and "--allow-different-data" in message
    assert not list((tmp_path / "out").glob("*.eval"))
    cli = ["rescore", str(tmp_path / "stale.eval"), "--grader", "bedside/scripted", "--out", str(tmp_path / "cli")]
    assert main(cli) == 2
    assert "sha256:" + "0" * 64 in capsys.readouterr().out
    assert check_prompts(stale, "stale.eval", allow=True) == today  # told to: re-judged anyway


@pytest.mark.eval  # scripted runs of the probe
def test_safety_probe_logs_are_refused_on_other_transcripts_or_cases(tmp_path, capsys):
    """The probe's record holds its transcripts (``probes``) and the case file of its notes (``cases``):
    compare and rescore refuse a pair that differs in either, naming it."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from bedside.discharge.safety_probe import PROBES
    from bedside.reporting.rescore import rescore

    probes = tmp_path / "probes.jsonl"
    first, *rest = PROBES.read_text().splitlines()
    probes.write_text("\n".join([json.dumps({**json.loads(first), "note": "reworded"}), *rest]) + "\n")
    cases = tmp_path / "cases.jsonl"
    demo = [json.loads(line) for line in DEMO.read_text().splitlines()]
    cases.write_text("".join(json.dumps({**c, "allergies": "Penicillin"}) + "\n" for c in demo))

    def run(name, **task_args):
        [the_log] = eval(
            "bedside/discharge_safety_probe",
            task_args=task_args,
            model=scripted(),
            model_roles={"grader": scripted()},
            log_dir=str(tmp_path / name),
            display="none",
            log_realtime=False,  # no live sample buffer: the test reads the finished log
            limit=1,
        )
        assert the_log.status == "success"
        return the_log.location

    shipped, reworded, other_cases = run("a"), run("b", data=str(probes)), run("c", cases=str(cases))
    assert main(["compare", shipped, run("d")]) == 0  # the same transcripts and cases: paired
    capsys.readouterr()
    assert main(["compare", shipped, reworded]) == 2
    assert "(probes differs)" in capsys.readouterr().out
    assert main(["compare", shipped, other_cases]) == 2
    assert "(cases differs)" in capsys.readouterr().out
    assert main(["compare", shipped, other_cases, "--allow-different-data"]) == 0

    stale = read_eval_log(shipped)
    stale.eval.metadata[KEY]["prompts"] = "sha256:old"
    write_eval_log(stale, str(tmp_path / "stale.eval"))
    with pytest.raises(ValueError, match="prompts differs.*--allow-different-data"):
        rescore([tmp_path / "stale.eval"], scripted(), tmp_path / "out")
    [fresh] = rescore([shipped], scripted(), tmp_path / "fresh")  # today's prompts: re-judged, every scorer
    [rejudged] = read_eval_log(fresh).samples
    assert {"advice_safety", "safety_probe_check"} <= set(rejudged.scores)
