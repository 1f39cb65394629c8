"""MedSP protocols (markers in the prompt files, schemas), the scripted roles, and the CLI."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

from bedside.prompts import render
from bedside.protocols import all_protocols, detect
from bedside.providers.scripted import ScriptedEngine
from bedside.records.medsp import load_scenarios
from bedside.samples.medsp import DEMO_DIR
from bedside.solvers.medsp import panel_personas, parse_environment, parse_examinee
from tests.conftest import REPO, scripted

SCENARIO = next(s for s in load_scenarios(DEMO_DIR).scenarios if s.case_id == "bedside_demo_anaphylaxis")
INSPECT = str(Path(sys.executable).parent / "inspect")


def rendered() -> dict[str, str]:
    persona = panel_personas(1, "Emergency medicine")[0]
    return {
        "medsp.examinee": render("medsp/examinee.j2", packet=SCENARIO.examinee.text(), max_turns=12),
        "medsp.patient": render("medsp/patient.j2", packet=SCENARIO.sp_actor.text()),
        "medsp.environment": render("medsp/environment.j2", packet=SCENARIO.environment_controller.text()),
        "medsp.evaluator": render("medsp/evaluator_system.j2"),
        "medsp.panel_specialist": render("medsp/panel_specialist.j2", packet="p", max_turns=3, **persona),
        "medsp.panel_integrator": render("medsp/panel_integrator.j2", packet="p", max_turns=3),
    }


def test_every_marker_is_in_its_prompt_and_detected():
    prompts = rendered()
    medsp = [p for p in all_protocols() if p.name.startswith("medsp.")]
    assert {p.name for p in medsp} == set(prompts)
    for protocol in medsp:
        messages = [ChatMessageSystem(content=prompts[protocol.name]), ChatMessageUser(content="go")]
        assert protocol.marker in prompts[protocol.name]
        assert detect(messages).name == protocol.name
    assert detect([ChatMessageSystem(content=prompts["medsp.examinee"])]).json_schema()["required"] == ["speak", "actions", "eos"]


def test_environment_prompt_carries_the_controller_rules():
    text = rendered()["medsp.environment"]
    for rule in ("declarative", "Never recommend, hint or imply", "Never invent a team member",
                 'goes only into "unsupported"', "actors_present"):
        assert rule in text, rule


def test_scripted_roles_are_deterministic_and_parse():
    prompts = rendered()
    model = scripted()
    env_open = [ChatMessageSystem(content=prompts["medsp.environment"]), ChatMessageUser(content=render("medsp/environment_kickoff.j2"))]
    a = asyncio.run(model.generate(env_open, config=GenerateConfig())).completion
    b = asyncio.run(scripted().generate(env_open, config=GenerateConfig())).completion
    assert a == b and parse_environment(a).data["actors_present"] == ["Nurse"]
    exam = [ChatMessageSystem(content=prompts["medsp.examinee"]), ChatMessageUser(content="[Environment: opening scene]")]
    turn = parse_examinee(asyncio.run(model.generate(exam, config=GenerateConfig())).completion)
    assert turn.data["actions"][0] == "Cardiac monitor, pulse oximetry and vital signs" and not turn.ends_session


def test_examinee_parser_repairs_and_rejects():
    assert parse_examinee('{"speak": "Hi", "actions": "Check glucose", "eos": "false"}').repaired
    assert parse_examinee('{"speak": "", "actions": [], "eos": true}').ends_session
    with pytest.raises(ValueError, match="says nothing"):
        parse_examinee('{"speak": " ", "actions": [], "eos": false}')
    with pytest.raises(ValueError, match="does not match the schema"):
        parse_examinee('{"speak": "Hi", "actions": [{"x": 1}], "eos": false}')


def test_unknown_scripted_option_is_an_error():
    with pytest.raises(ValueError, match="medsp_examinee_plan"):
        ScriptedEngine(medsp_examinee_turnz=3)


def cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "INSPECT_LOG_DIR": str(tmp_path)}
    return subprocess.run([INSPECT, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


def registered() -> bool:
    import bedside._registry

    return hasattr(bedside._registry, "medsp")


def run_cli(target: str, tmp_path: Path) -> None:
    roles = []
    for role in ("patient", "environment", "grader"):
        roles += ["--model-role", f"{role}=bedside/scripted"]
    out_dir = tmp_path / target.replace("/", "_")
    proc = cli("eval", target, "--model", "bedside/scripted", *roles, "--limit", "1", "-T", "max_turns=3",
               "-T", "scaling=best_of_n", "-T", "n=2", "--display", "none", "--log-dir", str(out_dir), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [log_file] = list(out_dir.glob("*.eval"))
    log = read_eval_log(str(log_file))
    assert log.status == "success" and log.eval.task_args["max_turns"] == 3
    assert set(log.eval.model_roles) == {"patient", "environment", "grader"}
    assert len(log.samples) == 1 and all(s.scores["medsp_rubric"].value["examinee_turns"] <= 3 for s in log.samples)
    assert all(len(t["data"]["best_of_n"]["candidates"]) == 2 for s in log.samples
               for t in s.store["MedSPStore:history"] if t["role"] == "examinee")
    assert log.eval.metadata["data_report"]["scenarios"] == 7


def test_cli_by_path(tmp_path):
    run_cli("tasks/medsp.py", tmp_path)


def test_cli_by_entry_point(tmp_path):
    import bedside._registry

    if not hasattr(bedside._registry, "medsp"):
        pytest.skip("bedside/medsp is not registered yet: bedside/_registry.py needs `from bedside.tasks.medsp import medsp`")
    run_cli("bedside/medsp", tmp_path)
