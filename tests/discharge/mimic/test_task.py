"""The extraction task through ``inspect_ai.eval``: scripted provider end to end (cases load with
``load_cases``, invalid records in the audit), the OpenAI-compatible loopback server on 127.0.0.1,
and the data-use refusal before any model call."""

from __future__ import annotations

import csv
import json

import pytest
from inspect_ai import eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import get_model

from bedside.discharge.mimic.checklist_rule import applicable_questions
from bedside.discharge.mimic.data_use import MIMIC_PROVENANCE, DataUseRefused
from bedside.discharge.mimic.extract import output_paths
from bedside.discharge.mimic.protocol import EXTRACTED_FIELDS
from bedside.discharge.records import load_cases
from bedside.tasks.discharge_build_cases import build_discharge_cases, default_out
from tests.conftest import scripted
from tests.discharge.mimic.fixture import INVALID_MARK
from tests.loopback.server import LoopbackServer

pytestmark = pytest.mark.eval


def run_task(cohort_file, out, model, log_dir, **task_args):
    [log] = eval(
        build_discharge_cases,
        task_args={"cohort": str(cohort_file), "out": str(out), **task_args},
        model=model,
        log_dir=str(log_dir),
        display="none",
    )
    return log


def rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def scripted_run(cohort, cohort_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "cases.jsonl"
    model = scripted(mimic_invalid_on=INVALID_MARK, mimic_malformed_attempts=1)
    log = run_task(cohort_file, out, model, tmp_path_factory.mktemp("logs"))
    return log, out


def test_scripted_extraction_writes_cases_that_load(cohort, scripted_run):
    log, out = scripted_run
    assert log.status == "success"
    cases = load_cases(out)
    invalid = [r for r in cohort.records if INVALID_MARK in r["discharge_note"]]
    assert len(invalid) == 1
    assert [c.case_id for c in cases] == [r["case_id"] for r in cohort.records if r not in invalid]  # cohort order
    for case in cases:
        assert case.checklist_questions == applicable_questions(case.discharge_info.model_dump())
        assert case.chief_complaint.startswith("Symptoms of") and case.discharge_info.follow_up_appointments
        assert case.provenance == MIMIC_PROVENANCE and not case.synthetic  # a run on them checks every role
    written = log.results.early_stopping.metadata
    assert (
        written["valid"] == len(cases)
        and written["invalid"] == 1
        and written["invalid_case_ids"] == [invalid[0]["case_id"]]
    )
    [score] = log.results.scores
    assert score.metrics["mean"].value == pytest.approx(len(cases) / len(cohort.records))


def test_retries_recover_unreadable_replies_and_are_logged(scripted_run):
    log, _ = scripted_run
    sample = next(s for s in read_eval_log(log.location).samples if s.store["build_cases"]["case"] is not None)
    replies = [e.output.completion for e in sample.events if e.event == "model"]
    assert len(replies) == 2 and not replies[0].startswith("{") and json.loads(replies[1])
    assert sample.store["build_cases"]["attempts"] == 2


def test_invalid_extraction_is_listed_for_audit_not_dropped(cohort, scripted_run):
    _, out = scripted_run
    paths = output_paths(out)
    [bad] = rows(paths["invalid"])
    record = next(r for r in cohort.records if INVALID_MARK in r["discharge_note"])
    assert (
        bad["case_id"] == record["case_id"]
        and bad["hadm_id"] == str(record["hadm_id"])
        and bad["stage"] == "extraction"
    )
    assert (
        "follow_up_appointments: Field required" in bad["problem"]
        and "unreadable extraction reply after 3 tries" in bad["problem"]
    )
    assert json.loads(bad["last_reply"])["chief_complaint"] == "see note"
    audit = rows(paths["audit"])
    assert [r["status"] for r in audit if r["case_id"] == record["case_id"]] == ["invalid"]


def test_audit_puts_every_field_beside_its_note_excerpt(cohort, scripted_run):
    _, out = scripted_run
    audit = rows(output_paths(out)["audit"])
    valid = [r for r in audit if r["status"] == "valid"]
    assert len(valid) == (len(cohort.records) - 1) * (len(EXTRACTED_FIELDS) + 1)
    for row in valid:
        if row["field"] in EXTRACTED_FIELDS and row["value"]:
            assert row["source_section"] and row["source_excerpt"], row
            assert float(row["support"]) >= 0.5, row
    by_field = {r["field"]: r for r in valid if r["case_id"] == valid[0]["case_id"]}
    assert by_field["family_history"]["source_section"] == "Family History"
    assert by_field["family_history"]["value"] == by_field["family_history"]["source_excerpt"]


def test_case_summary_is_written(scripted_run):
    _, out = scripted_run
    summary = json.loads(output_paths(out)["summary_json"].read_text())
    assert summary["n"] == len(load_cases(out)) and summary["age"]["mean"] > 18
    assert output_paths(out)["summary_csv"].read_text().startswith("variable,level,n,percent,mean,sd")


def test_openai_compatible_endpoint_on_127_0_0_1_is_accepted(cohort_file, tmp_path, monkeypatch):
    with LoopbackServer() as server:
        monkeypatch.setenv("BEDSIDE_LOOPBACK_URL", server.base_url)  # the test channel: the tag travels
        assert server.base_url.startswith("http://127.0.0.1:")
        model = get_model("openai-api/loopback/extractor", base_url=server.base_url, api_key="x", memoize=False)
        log = run_task(cohort_file, tmp_path / "cases.jsonl", model, tmp_path / "logs")
        assert log.status == "success"
        assert server.calls["mimic.extract"] == len(load_cases(tmp_path / "cases.jsonl"))  # found by the tag


def test_non_local_model_is_refused_before_anything_is_read_or_sent(cohort_file, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    out = tmp_path / "cases.jsonl"
    with pytest.raises(
        DataUseRefused, match=r"Refusing to send MIMIC-IV-Note text to openai/gpt-5.5.*zero_retention=true"
    ):
        run_task(cohort_file, out, "openai/gpt-5.5", tmp_path / "logs")
    assert not out.exists()


def test_task_built_before_eval_refuses_in_every_sample_without_a_model_call(cohort_file, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    task = build_discharge_cases(cohort=str(cohort_file), out=str(tmp_path / "cases.jsonl"))  # no model known yet
    [log] = eval(task, model="openai/gpt-5.5", log_dir=str(tmp_path / "logs"), display="none", limit=3)
    assert log.status == "error" and "Refusing to send MIMIC-IV-Note text" in log.error.message
    samples = read_eval_log(log.location).samples or []
    assert not [e for s in samples for e in s.events if e.event == "model"]
    assert not (tmp_path / "cases.jsonl").exists()


def test_zero_retention_declaration_lets_a_non_local_model_run(cohort_file, tmp_path):
    # mockllm is not on the local list: refused by default ...
    with pytest.raises(DataUseRefused):
        run_task(cohort_file, tmp_path / "cases.jsonl", "mockllm/model", tmp_path / "logs")
    # ... and runs with the declaration; its canned prose is no extraction: every record is listed
    log = run_task(
        cohort_file, tmp_path / "cases.jsonl", "mockllm/model", tmp_path / "logs", zero_retention=True, retries=0
    )
    assert log.status == "success" and log.eval.task_args["zero_retention"] is True
    assert (tmp_path / "cases.jsonl").read_text() == ""
    invalid = rows(output_paths(tmp_path / "cases.jsonl")["invalid"])
    assert len(invalid) == log.results.total_samples and all(r["stage"] == "extraction" for r in invalid)


def test_default_out_and_bad_parameters(cohort_file, tmp_path):
    assert default_out(tmp_path / "x.cohort.jsonl") == tmp_path / "x.jsonl"
    assert default_out(tmp_path / "cohort.jsonl") == tmp_path / "cohort.cases.jsonl"
    with pytest.raises(ValueError, match="retries"):
        build_discharge_cases(cohort=str(cohort_file), retries=-1)
    with pytest.raises(ValueError, match="zero_retention"):
        build_discharge_cases(cohort=str(cohort_file), zero_retention="maybe")
    with pytest.raises(ValueError, match="out"):
        build_discharge_cases(cohort=str(cohort_file), out=str(cohort_file))
