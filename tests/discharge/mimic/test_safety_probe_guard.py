"""The safety probe on transcripts whose notes come from MIMIC-derived cases: the grader (the one role the
probe calls; unbound: the model under test in its place) is checked before any model call, a grader that is
not local is refused in one line naming the role and its model (nothing sent), ``zero_retention=true`` lets
it run and is recorded; the model under test is never called, so it is not checked; the synthetic demo
cases run anywhere."""

from __future__ import annotations

import json

import pytest
from inspect_ai import eval
from inspect_ai.log import read_eval_log

from bedside.discharge.mimic.data_use import DataUseRefused
from bedside.discharge.safety_probe import PROBES
from bedside.tasks.discharge_safety_probe import discharge_safety_probe
from tests.conftest import scripted
from tests.discharge.mimic.guarded import REMOTE, at, write_mimic_cases

pytestmark = pytest.mark.eval


@pytest.fixture
def mimic_cases(tmp_path):
    """The demo cases the shipped probes refer to, written as build-cases writes them (provenance MIMIC-IV-Note)."""
    return write_mimic_cases(tmp_path / "cases.jsonl")


def run(cases, model, roles, tmp_path, **task_args):
    [log] = eval(
        "bedside/discharge_safety_probe",
        task_args={"data": str(PROBES), "cases": str(cases), **task_args},
        model=model,
        model_roles=roles,
        log_dir=str(tmp_path / "logs"),
        display="none",
        limit=1,
    )
    return log


def data_use_events(log):
    [sample] = read_eval_log(log.location, resolve_attachments=True).samples
    return [e.data for e in sample.events if e.event == "info" and e.source == "data_use"]


def test_a_local_grader_runs_and_the_remote_model_under_test_is_never_called(mimic_cases, server, tmp_path):
    log = run(mimic_cases, at(REMOTE, "educator"), {"grader": at(server.base_url, "grader")}, tmp_path)
    assert log.status == "success" and server.total_calls > 0
    [allowed] = data_use_events(log)
    assert allowed["data_use"] == "allowed" and set(allowed["roles"]) == {"grader"}
    assert allowed["roles"]["grader"]["base_url"] == server.base_url
    assert allowed["zero_retention"] is False and log.eval.metadata["zero_retention"] is False


def test_a_remote_grader_is_refused_in_one_line_before_anything_is_sent(mimic_cases, server, tmp_path):
    with pytest.raises(DataUseRefused) as refused:
        run(mimic_cases, at(server.base_url), {"grader": at(REMOTE, "grader")}, tmp_path)
    message = str(refused.value)
    assert message.startswith("Model role grader: Refusing to send MIMIC-IV-Note text to openai-api/x/grader")
    assert REMOTE in message and "zero_retention=true" in message and "\n" not in message
    assert f"case {json.loads(mimic_cases.read_text().splitlines()[0])['case_id']} has provenance" in message
    assert server.total_calls == 0


def test_an_unbound_grader_is_checked_as_the_model_under_test_it_falls_back_to(mimic_cases, server, tmp_path):
    with pytest.raises(DataUseRefused, match=r"^Model role grader: Refusing .* openai-api/x/educator .*llm\.example"):
        run(mimic_cases, at(REMOTE, "educator"), {}, tmp_path)
    assert server.total_calls == 0


def test_a_probe_task_built_before_eval_refuses_in_every_sample_without_a_model_call(mimic_cases, server, tmp_path):
    task = discharge_safety_probe(data=str(PROBES), cases=str(mimic_cases))  # no model known yet
    [log] = eval(
        task, model=at(server.base_url), model_roles={"grader": at(REMOTE)}, log_dir=str(tmp_path), display="none"
    )
    assert log.status == "error" and "Model role grader: Refusing to send MIMIC-IV-Note text" in log.error.message
    assert not [e for s in read_eval_log(log.location).samples or [] for e in s.events if e.event == "model"]
    assert server.total_calls == 0


def test_zero_retention_lets_a_remote_grader_run_and_is_recorded(mimic_cases, tmp_path):
    log = run(mimic_cases, scripted(), {"grader": scripted()}, tmp_path, zero_retention=True)
    assert log.status == "success"
    assert log.eval.task_args["zero_retention"] is True and log.eval.metadata["zero_retention"] is True
    assert [e["zero_retention"] for e in data_use_events(log)] == [True]


def test_the_synthetic_demo_probe_runs_anywhere(monkeypatch):
    """The shipped transcripts on the shipped synthetic cases: no check, even with every model remote."""
    import bedside.compat

    monkeypatch.setattr(bedside.compat, "resolving_eval_tasks", lambda: True)
    monkeypatch.setattr(bedside.compat, "active_model", lambda: at(REMOTE))
    monkeypatch.setattr("bedside.discharge.mimic.eval_guard.get_model", lambda: at(REMOTE))
    task = discharge_safety_probe()
    assert "data_use_check" not in [getattr(s, "__name__", "") for s in getattr(task.setup, "solvers", [task.setup])]


def test_mimic_probe_cases_are_refused_while_the_task_is_built(mimic_cases, monkeypatch):
    """The same remote models as above, MIMIC-derived cases: refused while Inspect builds the task."""
    import bedside.compat

    monkeypatch.setattr(bedside.compat, "resolving_eval_tasks", lambda: True)
    monkeypatch.setattr(bedside.compat, "active_model", lambda: at(REMOTE))
    monkeypatch.setattr("bedside.discharge.mimic.eval_guard.get_model", lambda: at(REMOTE))
    # no role bound (Inspect leaves the roles of an earlier eval in this process set)
    monkeypatch.setattr("bedside.discharge.mimic.eval_guard.model_roles", lambda: {})
    with pytest.raises(DataUseRefused, match="^Model role grader: "):
        discharge_safety_probe(cases=str(mimic_cases))
