"""A DischargeBench run on MIMIC-derived cases: every role is checked before any model call, a role that
is not local is refused in one line naming it and its model (nothing sent), ``zero_retention=true`` lets it
run and is recorded; the synthetic demo cases run anywhere. Cases without provenance are MIMIC-derived by
their ``mimic-<digits>`` id (older case files), or of unknown origin: run with a warning."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from inspect_ai import eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import BatchConfig, GenerateConfig, Model, get_model

from bedside.discharge.mimic.data_use import MIMIC_PROVENANCE, DataUseRefused
from bedside.discharge.mimic.eval_guard import APPROVED, check_role_models
from bedside.discharge.records import load_cases
from bedside.tasks.discharge import discharge
from tests import forked
from tests.conftest import scripted
from tests.discharge.mimic.guarded import DEMO, REMOTE, at, write_mimic_cases

pytestmark = pytest.mark.eval

ROLES = ("patient", "monitor", "grader")


@pytest.fixture
def mimic_cases(tmp_path):
    """Two demo cases written as build-cases writes them (provenance MIMIC-IV-Note)."""
    path = write_mimic_cases(tmp_path / "cases.jsonl", limit=2)
    assert all(c.provenance == MIMIC_PROVENANCE for c in load_cases(path))
    return path


def run(data, model, roles, tmp_path, **task_args):
    [log] = eval(
        "bedside/discharge",
        task_args={"data": str(data), "min_turns": 2, "max_turns": 2, **task_args},
        model=model,
        model_roles=roles,
        log_dir=str(tmp_path / "logs"),
        display="none",
        limit=1,
    )
    return log


def test_mimic_cases_run_when_every_role_is_on_the_loopback_server(mimic_cases, server, tmp_path):
    assert server.base_url.startswith("http://127.0.0.1:")
    log = run(mimic_cases, at(server.base_url), {r: at(server.base_url, r) for r in ROLES}, tmp_path)
    assert log.status == "success" and server.total_calls > 0
    [sample] = read_eval_log(log.location).samples
    [allowed] = [e.data for e in sample.events if e.event == "info" and e.source == "data_use"]
    assert set(allowed["roles"]) == {"educator", *ROLES} and allowed["zero_retention"] is False
    assert log.eval.metadata["zero_retention"] is False


@pytest.mark.parametrize("remote_role", ["educator", *ROLES])
def test_a_non_local_role_is_refused_in_one_line_before_anything_is_sent(mimic_cases, server, tmp_path, remote_role):
    model = at(REMOTE, "educator") if remote_role == "educator" else at(server.base_url)
    roles = {r: at(REMOTE, r) if r == remote_role else at(server.base_url, r) for r in ROLES}
    with pytest.raises(DataUseRefused) as refused:
        run(mimic_cases, model, roles, tmp_path)
    message = str(refused.value)
    assert message.startswith(f"Model role {remote_role}: Refusing to send MIMIC-IV-Note text to openai-api/x/")
    assert REMOTE in message and "zero_retention=true" in message and "\n" not in message
    assert server.total_calls == 0


def test_an_unbound_role_is_checked_as_the_model_under_test(mimic_cases, server, tmp_path):
    with pytest.raises(DataUseRefused, match="^Model role educator: .*llm.example.org"):
        run(mimic_cases, at(REMOTE), {"grader": at(server.base_url)}, tmp_path)
    assert server.total_calls == 0


def test_a_task_built_before_eval_refuses_in_every_sample_without_a_model_call(mimic_cases, server, tmp_path):
    task = discharge(data=str(mimic_cases), min_turns=2, max_turns=2)  # no model known yet
    roles = {"patient": at(server.base_url), "monitor": at(REMOTE), "grader": at(server.base_url)}
    [log] = eval(task, model=at(server.base_url), model_roles=roles, log_dir=str(tmp_path), display="none")
    assert log.status == "error" and "Model role monitor: Refusing to send MIMIC-IV-Note text" in log.error.message
    assert not [e for s in read_eval_log(log.location).samples or [] for e in s.events if e.event == "model"]
    assert server.total_calls == 0


def test_zero_retention_lets_a_non_local_role_run_and_is_recorded(mimic_cases, tmp_path):
    check_role_models({"monitor": at(REMOTE)}, zero_retention=True)  # declared: no refusal
    with pytest.raises(DataUseRefused):
        check_role_models({"monitor": at(REMOTE)}, zero_retention=False)
    log = run(mimic_cases, scripted(), {r: scripted() for r in ROLES}, tmp_path, zero_retention=True)
    assert log.status == "success" and log.eval.task_args["zero_retention"] is True
    assert log.eval.metadata["zero_retention"] is True
    [sample] = read_eval_log(log.location).samples
    assert [e.data["zero_retention"] for e in sample.events if e.event == "info" and e.source == "data_use"] == [True]


def test_synthetic_demo_cases_run_anywhere(monkeypatch):
    """No check on cases without a restricted provenance, even with every role remote."""
    import bedside.compat

    monkeypatch.setattr(bedside.compat, "resolving_eval_tasks", lambda: True)
    monkeypatch.setattr(bedside.compat, "active_model", lambda: at(REMOTE))
    task = discharge()
    assert all(getattr(s, "__name__", "") != "data_use_check" for s in getattr(task.setup, "solvers", [task.setup]))


def test_mimic_cases_refused_while_the_task_is_built(mimic_cases, monkeypatch):
    import bedside.compat

    monkeypatch.setattr(bedside.compat, "resolving_eval_tasks", lambda: True)
    monkeypatch.setattr(bedside.compat, "active_model", lambda: at(REMOTE))
    monkeypatch.setattr("bedside.discharge.mimic.eval_guard.get_model", lambda: at(REMOTE))
    # no role bound (Inspect leaves the roles of an earlier eval in this process set)
    monkeypatch.setattr("bedside.discharge.mimic.eval_guard.model_roles", lambda: {})
    with pytest.raises(DataUseRefused, match="^Model role educator"):
        discharge(data=str(mimic_cases))


# --- case files written before cases carried a provenance ----------------------------------------
def demo_as(path, **fields):
    """The first two demo cases rewritten: ``fields`` set, ``case_id`` formatted with the line number, no
    provenance."""
    lines = [json.loads(line) for line in DEMO.read_text().splitlines()[:2]]
    cases = [{k: v for k, v in c.items() if k != "provenance"} for c in lines]
    path.write_text(
        "".join(
            json.dumps({**c, **fields, "case_id": fields.get("case_id", c["case_id"]).format(i)}) + "\n"
            for i, c in enumerate(cases, 1)
        )
    )
    return path


@pytest.fixture
def legacy_mimic_cases(tmp_path):
    """Cases as an older bedside build-cases wrote them: ids mimic-<hadm_id>, no provenance, not synthetic."""
    path = demo_as(tmp_path / "legacy.jsonl", synthetic=False, case_id="mimic-2000000{}")
    assert all(c.provenance is None and not c.synthetic for c in load_cases(path))
    return path


@pytest.mark.parametrize("remote_role", ["educator", "grader"])
def test_cases_with_a_mimic_style_id_and_no_provenance_are_refused_saying_why(
    legacy_mimic_cases, server, tmp_path, remote_role
):
    model = at(REMOTE, "educator") if remote_role == "educator" else at(server.base_url)
    roles = {r: at(REMOTE, r) if r == remote_role else at(server.base_url, r) for r in ROLES}
    with pytest.raises(DataUseRefused) as refused:
        run(legacy_mimic_cases, model, roles, tmp_path)
    message = str(refused.value)
    assert message.startswith(f"Model role {remote_role}: Refusing to send MIMIC-IV-Note text to openai-api/x/")
    assert "case mimic-20000001 has no provenance but a MIMIC-style id" in message and "\n" not in message
    assert server.total_calls == 0


def test_a_legacy_case_file_built_before_eval_refuses_in_every_sample(legacy_mimic_cases, server, tmp_path):
    task = discharge(data=str(legacy_mimic_cases), min_turns=2, max_turns=2)  # no model known yet
    roles = {"patient": at(server.base_url), "monitor": at(server.base_url), "grader": at(REMOTE)}
    [log] = eval(task, model=at(server.base_url), model_roles=roles, log_dir=str(tmp_path), display="none")
    assert log.status == "error" and "Model role grader: Refusing to send MIMIC-IV-Note text" in log.error.message
    assert "has no provenance but a MIMIC-style id" in log.error.message
    assert server.total_calls == 0


def test_legacy_mimic_cases_run_on_local_roles_and_the_log_says_why_they_were_checked(
    legacy_mimic_cases, server, tmp_path
):
    log = run(legacy_mimic_cases, at(server.base_url), {r: at(server.base_url, r) for r in ROLES}, tmp_path)
    assert log.status == "success" and server.total_calls > 0
    [sample] = read_eval_log(log.location, resolve_attachments=True).samples
    [allowed] = [e.data for e in sample.events if e.event == "info" and e.source == "data_use"]
    assert allowed["data_use"] == "allowed" and allowed["provenance"] is None
    assert allowed["treated_as_mimic"].startswith(f"case {sample.id} has no provenance but a MIMIC-style id")


def remote_build(monkeypatch):
    """Build the task as ``inspect eval`` would with every model remote."""
    import bedside.compat

    monkeypatch.setattr(bedside.compat, "resolving_eval_tasks", lambda: True)
    monkeypatch.setattr(bedside.compat, "active_model", lambda: at(REMOTE))
    monkeypatch.setattr("bedside.discharge.mimic.eval_guard.get_model", lambda: at(REMOTE))
    # no role bound (Inspect leaves the roles of an earlier eval in this process set)
    monkeypatch.setattr("bedside.discharge.mimic.eval_guard.model_roles", lambda: {})


def setup_names(task):
    return [getattr(s, "__name__", "") for s in getattr(task.setup, "solvers", [task.setup])]


def test_a_synthetic_case_with_a_mimic_style_id_runs_anywhere(tmp_path, monkeypatch):
    remote_build(monkeypatch)
    synthetic = demo_as(tmp_path / "synthetic.jsonl", synthetic=True, case_id="mimic-3000000{}")
    assert "data_use_check" not in setup_names(discharge(data=str(synthetic)))


def test_a_case_of_unknown_origin_runs_with_a_warning(tmp_path, monkeypatch, caplog):
    unknown = demo_as(tmp_path / "unknown.jsonl", synthetic=False, case_id="ward-{}")
    with caplog.at_level("WARNING", logger="bedside.discharge.mimic.eval_guard"):
        remote_build(monkeypatch)
        task = discharge(data=str(unknown))  # every model remote: built, not refused
    assert "data_use_check" not in setup_names(task)
    [line] = [r.getMessage() for r in caplog.records if r.name == "bedside.discharge.mimic.eval_guard"]
    assert line.startswith("2 of 2 cases (ward-1, ward-2) are of unknown origin (no provenance, not marked synthetic")
    monkeypatch.undo()

    log = run(unknown, scripted(), {r: scripted() for r in ROLES}, tmp_path)
    assert log.status == "success"
    [sample] = read_eval_log(log.location, resolve_attachments=True).samples
    [warned] = [e.data for e in sample.events if e.event == "info" and e.source == "data_use"]
    assert warned["data_use"] == "unknown origin" and warned["warning"].startswith("case ward-1 is of unknown origin")

    demo = run(DEMO, scripted(), {r: scripted() for r in ROLES}, tmp_path / "demo")  # synthetic: no warning
    [demo_sample] = read_eval_log(demo.location).samples
    assert not [e for e in demo_sample.events if e.event == "info" and e.source == "data_use"]


# --- bedside rescore: the new grader reads the notes too ---------------------------------------------
def test_rescore_of_a_mimic_run_refuses_a_remote_grader_before_any_call(mimic_cases, server, tmp_path, capsys):
    from bedside.cli import main
    from bedside.reporting.load import read_run
    from bedside.reporting.rescore import check_data_use, rescore

    log = run(mimic_cases, scripted(), {r: scripted() for r in ROLES}, tmp_path)
    assert log.status == "success"
    with pytest.raises(ValueError) as refused:
        rescore([log.location], at(REMOTE, "judge"), tmp_path / "out")
    message = str(refused.value)
    assert message.startswith(f"{log.location}: Model role grader: Refusing to send MIMIC-IV-Note text to openai-api/")
    assert REMOTE in message and "has provenance MIMIC-IV-Note" in message and "\n" not in message
    assert not list((tmp_path / "out").glob("*.eval"))
    grader = ["--grader", "openai-api/x/judge", "-M", f"base_url={REMOTE}", "-M", "api_key=x"]
    assert main(["rescore", log.location, *grader, "--out", str(tmp_path / "cli")]) == 2
    assert "Refusing to send MIMIC-IV-Note" in capsys.readouterr().out

    with pytest.raises(ValueError) as refused:  # the simulated patient's checker reads the notes too
        rescore([log.location], None, tmp_path / "checker", simulator_checker=at(REMOTE, "judge"))
    assert str(refused.value).startswith(f"{log.location}: Model role simulator_checker: Refusing to send MIMIC")
    assert not list((tmp_path / "checker").glob("*.eval"))

    check_data_use(read_run(log.location), log.location, "grader", at(REMOTE), zero_retention=True)  # declared
    [local] = rescore([log.location], at(server.base_url, "judge"), tmp_path / "local")  # a local grader re-judges
    assert server.total_calls > 0
    assert read_eval_log(str(local), header_only=True).eval.metadata["bedside_rescore"]["zero_retention"] is False
    [declared] = rescore([log.location], scripted(), tmp_path / "declared", zero_retention=True)
    assert read_eval_log(str(declared), header_only=True).eval.metadata["bedside_rescore"]["zero_retention"] is True
    for sample in read_eval_log(str(declared)).samples or []:  # the grader let through, in each sample it judged
        assert {"by": "bedside rescore", "zero_retention": True}.items() <= sample.store[APPROVED][-1].items()


def test_rescore_of_a_synthetic_run_takes_any_grader(tmp_path):
    from bedside.reporting.load import read_run
    from bedside.reporting.rescore import check_data_use

    log = run(DEMO, scripted(), {r: scripted() for r in ROLES}, tmp_path)
    check_data_use(read_run(log.location), log.location, "grader", at(REMOTE), zero_retention=False)  # no refusal


# --- the judges through a batch API: an upload of the transcripts, checked as a live call ------------
#: Inspect's batch timing cut to fractions of a second
FAST_BATCH = GenerateConfig(batch=BatchConfig(send_delay=0.05, tick=0.05))


def batched_at(url: str) -> Model:
    """A grader of OpenAI's provider in batch mode at ``url``."""
    return get_model("openai/judge", base_url=url, api_key="x", memoize=False, config=FAST_BATCH)


@pytest.fixture
def server_counts_as_remote(monkeypatch):
    """The guard reads a model's address only: the loopback server, at 127.0.0.1, counts as remote here, so
    that what a refusal keeps from leaving is visible on its counters."""
    monkeypatch.setattr("bedside.discharge.mimic.data_use.is_loopback", lambda url: False)


def test_a_batched_grader_is_refused_before_any_upload_as_a_live_one(
    mimic_cases, server, tmp_path, server_counts_as_remote
):
    roles = {"patient": scripted(), "monitor": scripted(), "grader": batched_at(server.base_url)}
    with pytest.raises(DataUseRefused) as refused:
        run(mimic_cases, scripted(), roles, tmp_path)
    assert str(refused.value).startswith(
        "Model role grader: Refusing to send MIMIC-IV-Note text to openai/judge (base URL"
    )
    assert server.stats()["files"] == {} and server.requests == 0  # nothing uploaded, nothing sent
    log = run(mimic_cases, scripted(), roles, tmp_path / "declared", zero_retention=True)  # declared: it runs
    assert log.status == "success" and server.stats()["files"]["batch"] >= 1
    [sample] = read_eval_log(log.location).samples
    assert all(e.config.batch for e in sample.events if e.event == "model" and e.role == "grader")


def test_rescore_through_a_batch_api_refuses_a_remote_grader_before_any_upload(
    mimic_cases, server, tmp_path, server_counts_as_remote
):
    from tests.conftest import bedside_command

    [log] = eval(
        "bedside/discharge",
        task_args={"data": str(mimic_cases), "min_turns": 2, "max_turns": 2},
        model=scripted(),
        model_roles={r: scripted() for r in ROLES},
        log_dir=str(tmp_path / "conversations"),
        display="none",
        limit=1,
        score=False,
    )
    grader = ["--grader", "openai/judge", "-M", f"base_url={server.base_url}", "-M", "api_key=x"]
    batch = ["--batch", "{send_delay: 0.05, tick: 0.05}"]
    refused = bedside_command("rescore", log.location, *grader, *batch, "--out", str(tmp_path / "judged"))
    assert refused.returncode == 2 and "Model role grader: Refusing to send MIMIC-IV-Note text" in refused.stdout
    assert server.stats()["files"] == {} and server.requests == 0 and not list((tmp_path / "judged").glob("*.eval"))
    declared = bedside_command(
        "rescore", log.location, *grader, *batch, "--zero-retention", "--out", str(tmp_path / "ok")
    )
    assert declared.returncode == 0, declared.stdout
    assert server.stats()["files"]["batch"] >= 1 and server.stats()["batch_requests"]["answered"] > 0
    [written] = (tmp_path / "ok").glob("*.eval")
    header = read_eval_log(str(written), header_only=True).eval
    assert header.metadata["bedside_rescore"]["zero_retention"] is True
    assert header.model_roles["grader"].config.batch == BatchConfig(send_delay=0.05, tick=0.05)


def conversations_only(mimic_cases, tmp_path, **roles_and_args):
    """Step 1 of the two-step run on MIMIC-derived cases: the conversations, scripted, no judge (``--no-score``)."""
    roles = {r: scripted() for r in ROLES} | roles_and_args.pop("roles", {})
    [log] = eval(
        "bedside/discharge",
        task_args={"data": str(mimic_cases), "min_turns": 2, "max_turns": 2, **roles_and_args},
        model=scripted(),
        model_roles=roles,
        log_dir=str(tmp_path / "conversations"),
        display="none",
        limit=1,
        score=False,
    )
    assert log.status == "success", log.error
    return log


def inspect_score(log, grader_url: str, out, grader: str = "openai/judge") -> None:
    """Step 2 as the docs write it, run by Inspect's own command line (in this process): ``inspect score LOG
    --action overwrite --output-file OUT --model-role 'grader={model: openai/judge, ..., batch: ...}'``."""
    from tests.compat import forget_models, inspect_cli

    forget_models()
    batch = "{send_delay: 0.05, tick: 0.05}"
    role = f"grader={{model: {grader}, model_args: {{base_url: {grader_url}, api_key: x}}, batch: {batch}}}"
    argv = ["score", log.location, "--action", "overwrite", "--output-file", str(out), "--model-role", role]
    inspect_cli().main(args=[*argv, "--display", "none"], prog_name="inspect", standalone_mode=False)


def test_inspect_score_refuses_a_batched_grader_before_any_upload(
    mimic_cases, server, tmp_path, server_counts_as_remote
):
    """``inspect score`` runs a log's scorers without bedside's re-judging check: each DischargeBench judge checks
    its grader before its first call (the batch upload included) on a MIMIC-derived case, and refuses one that
    is neither local nor let read the case by the run (its sample's record), in one line naming the way to
    declare zero retention (bedside rescore --zero-retention: inspect score cannot)."""
    log = conversations_only(mimic_cases, tmp_path)
    with pytest.raises(DataUseRefused) as refused:
        inspect_score(log, server.base_url, tmp_path / "judged.eval")
    message = str(refused.value)
    assert message.startswith("Model role grader: Refusing to send MIMIC-IV-Note text to openai/judge (base URL")
    assert "bedside rescore LOG --grader MODEL --zero-retention" in message and "\n" not in message
    assert "has provenance MIMIC-IV-Note" in message
    assert server.stats()["files"] == {} and server.requests == 0  # nothing uploaded, nothing sent
    assert not (tmp_path / "judged.eval").exists()


def test_inspect_score_takes_the_grader_the_run_let_read_the_cases(
    mimic_cases, server, tmp_path, server_counts_as_remote, monkeypatch
):
    """A run that bound the batched grader and declared zero retention (-T zero_retention=true) let it read the
    cases (recorded per sample): ``inspect score`` with that grader judges through the Batch API; with another
    one it refuses."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # Inspect rebuilds the run's roles from the log (keys not recorded)
    batched = batched_at(server.base_url)
    log = conversations_only(mimic_cases, tmp_path, roles={"grader": batched}, zero_retention=True)
    [sample] = read_eval_log(log.location).samples
    assert {"model": "openai/judge", "base_url": server.base_url, "zero_retention": True, "by": "inspect eval"} in (
        sample.store[APPROVED]
    )
    inspect_score(log, server.base_url, tmp_path / "judged.eval")
    [judged] = read_eval_log(str(tmp_path / "judged.eval")).samples
    assert judged.scores and server.stats()["files"]["batch"] >= 1 and server.stats()["batch_requests"]["answered"] > 0
    with pytest.raises(DataUseRefused, match="^Model role grader: Refusing to send MIMIC-IV-Note text to openai/other"):
        inspect_score(log, server.base_url, tmp_path / "other.eval", grader="openai/other")  # not let through


def test_inspect_score_refusal_is_one_message_without_a_traceback(mimic_cases, tmp_path):
    """As a user sees it: ``inspect score`` exits 1 with the refusal, no Python traceback, nothing judged."""
    log = conversations_only(mimic_cases, tmp_path)
    role = f"grader={{model: openai/judge, model_args: {{base_url: {REMOTE}}}, batch: true}}"
    command = [str(Path(sys.executable).parent / "inspect"), "score", log.location, "--action", "overwrite"]
    command += ["--output-file", str(tmp_path / "judged.eval"), "--model-role", role]
    done = forked.run(command, env={**os.environ, "OPENAI_API_KEY": "x", "COLUMNS": "400"}, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Model role grader: Refusing to send MIMIC-IV-Note text to openai/judge" in output
    assert "Traceback" not in output and not (tmp_path / "judged.eval").exists()


def test_every_judge_of_a_panel_is_checked(mimic_cases, server, tmp_path):
    """A grader panel whose second judge is not local is refused, naming that judge, before anything is sent."""
    roles = {r: at(server.base_url, r) for r in ROLES}
    roles["grader"] = [at(server.base_url, "grader"), at(REMOTE, "grader")]
    with pytest.raises(DataUseRefused, match=r"^Model role grader \(judge 2\): Refusing to send MIMIC-IV-Note text"):
        run(mimic_cases, at(server.base_url), roles, tmp_path)
    assert server.total_calls == 0


def test_a_bound_simulator_checker_is_checked_as_every_role(mimic_cases, server, tmp_path):
    """The simulated patient's checker reads the note: bound to a remote model it is refused, before anything
    is sent; on the loopback server it runs and the log records it among the roles allowed."""
    roles = {r: at(server.base_url, r) for r in ROLES}
    remote = {**roles, "simulator_checker": at(REMOTE, "checker")}
    with pytest.raises(DataUseRefused, match="^Model role simulator_checker: Refusing to send MIMIC-IV-Note text"):
        run(mimic_cases, at(server.base_url), remote, tmp_path, simulator_check=True)
    assert server.total_calls == 0

    local = {**roles, "simulator_checker": at(server.base_url, "checker")}
    log = run(mimic_cases, at(server.base_url), local, tmp_path / "local", simulator_check=True)
    assert log.status == "success"
    [sample] = read_eval_log(log.location).samples
    [allowed] = [e.data for e in sample.events if e.event == "info" and e.source == "data_use"]
    assert set(allowed["roles"]) == {"educator", *ROLES, "simulator_checker"}
