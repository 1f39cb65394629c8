"""MedSP protocols (reply models, a prompt per protocol), the scripted roles, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessageSystem, ChatMessageUser

from bedside.calls import ReplyParseError
from bedside.medsp.protocols import (
    ENVIRONMENT,
    EXAMINEE,
    PATIENT,
    EnvironmentReply,
    ExamineeReply,
    PatientReply,
    evaluator_reply,
)
from bedside.medsp.protocols import read_environment as parse_environment
from bedside.medsp.protocols import read_examinee as parse_examinee
from bedside.medsp.protocols import read_patient as parse_patient
from bedside.medsp.records import SimState, load_scenarios
from bedside.medsp.samples import DEMO_DIR
from bedside.parts import all_protocols, protocol
from bedside.providers.scripted import ScriptedEngine
from bedside.scorers.medsp.evaluator import BedsideEvaluatorPrompts
from bedside.scorers.simulator import checker_prompt
from bedside.simulator_checks import PatientTranscript, SpokenTurn
from bedside.solvers.medsp import BedsidePrompts
from tests import forked
from tests.conftest import REPO

SCENARIO = next(s for s in load_scenarios(DEMO_DIR).scenarios if s.case_id == "bedside_demo_anaphylaxis")
INSPECT = str(Path(sys.executable).parent / "inspect")
P = BedsidePrompts()
E = BedsideEvaluatorPrompts()


def checker_view(script: str, said: str) -> PatientTranscript:
    turns = (SpokenTurn(0, "examinee", said), SpokenTurn(1, "patient", "I feel dizzy."))
    return PatientTranscript(script={"sp_script": script}, turns=turns)


def prompts_as_sent() -> dict[str, list]:
    """Each protocol's messages as bedside sends them (system prompt, last user message)."""
    state = SimState(latest_environment_feedback=[P.first_feedback()], total_turns=1)
    turn = P.examinee_turn("c", "c", state)
    exam = P.examinee_system(SCENARIO)
    overlay, consult = P.specialist("Toxicology", turn)
    vote_overlay, vote = P.vote("Toxicology", {"speak": "Hello", "actions": ["Check glucose"], "eos": False})
    candidates = [{"index": 0, "speak": "Hi", "actions": ["Check glucose"], "eos": False}]
    items = SCENARIO.rubric.items()
    return {
        "medsp.examinee": [exam, turn],
        "medsp.patient": [P.patient_system(SCENARIO), P.patient_turn("c", "c", state, "Hello")],
        "medsp.environment": [
            P.environment_system(SCENARIO),
            P.environment_turn("c", "c", state, "Hello", ["x"], ["Hi"], True),
        ],
        "medsp.evaluator": [E.evaluator_system(items), E.evaluator_user("c", "c", state)],
        "medsp.bon_selector": [exam, P.selector(turn, candidates)],
        "medsp.panel_domains": [exam, P.domains(5)],
        "medsp.panel_specialist": [f"{exam}\n\n{overlay}", consult],
        "medsp.panel_integrator": [exam, P.integrator(turn, {"Toxicology": "Give charcoal."}, "")],
        "medsp.panel_vote": [f"{exam}\n\n{vote_overlay}", vote],
        # the simulator's LLM checker: one user message
        "medsp.simulator_checker": [checker_prompt(checker_view(P.patient_system(SCENARIO), "Hello"))],
    }


def test_every_protocol_has_a_prompt():
    sent = prompts_as_sent()
    medsp = {p.name for p in all_protocols() if p.name.startswith("medsp.")}
    assert set(medsp) == set(sent)
    assert all(len(parts) in (1, 2) and all(p.strip() for p in parts) for parts in sent.values())


def test_reply_models_are_required_in_the_schema_and_lenient_in_reading():
    for protocol, fields in (
        (EXAMINEE, ["speak", "actions", "eos"]),
        (PATIENT, ["speak", "actors_present"]),
        (
            ENVIRONMENT,
            [
                "feedback",
                "events",
                "actors_present",
                "action_assessments",
                "patient_status",
                "progress_index",
                "state_label",
                "should_end",
                "completion_reason",
            ],
        ),
    ):
        assert protocol.json_schema()["required"] == fields
    turn = ExamineeReply.model_validate({"speak": None, "actions": "Check glucose", "eos": "yes"})
    assert turn == ExamineeReply(speak="", actions=["Check glucose"], eos=True)
    assert ExamineeReply.model_validate({}) == ExamineeReply(speak="", actions=[], eos=False)  # an empty turn is a turn
    assert ExamineeReply.model_validate({"speak": " Hi ", "actions": [" a ", "", 3], "eos": "maybe"}).actions == [
        "a",
        "3",
    ]
    sp = PatientReply.model_validate({"speak": "Just one line.", "actors_present": ["Patient"]})
    assert sp.speak == ["Just one line."] and sp.actors_present == {"Patient": ""}
    env = EnvironmentReply.model_validate(
        {
            "feedback": "BP 120/80.",
            "action_assessments": [{"raw": "a", "status": "EXECUTED"}, {"raw": "b", "status": "done"}, "c"],
            "progress_index": "2",
            "should_end": "true",
        }
    )
    assert env.feedback == ["BP 120/80."] and env.events == [] and env.progress_index == 2 and env.should_end
    assert [a.status for a in env.action_assessments] == ["executed", "unsupported", "unsupported"]
    assert EnvironmentReply.model_validate({"progress_index": -3}).progress_index == 0
    assert EnvironmentReply.model_validate({"progress_index": "next"}).progress_index is None
    # the evaluator's model for one call has exactly the call's items
    model = evaluator_reply(["PC.1", "ICS.2"])
    assert set(model.model_json_schema()["$defs"]["RubricItems"]["required"]) == {"PC.1", "ICS.2"}
    with pytest.raises(ValueError, match="met"):
        model.model_validate({"items": {"PC.1": {"met": "maybe"}, "ICS.2": {"met": True}}})


@pytest.mark.eval
def test_parsers_retry_replies_without_json():
    assert parse_examinee('```json\n{"speak": "Hi", "actions": [], "eos": false}\n```').repaired
    for parser in (parse_examinee, parse_patient, parse_environment):
        with pytest.raises(ReplyParseError, match="unreadable"):
            parser("I would check the vital signs first.")
    sp = parse_patient('{"speak": ["Hello.", "Mother: He is scared."], "actors_present": {"Patient": "x"}}')
    assert sp.message == "Hello.\nMother: He is scared." and sp.data["warnings"] == [
        "speaker 'Mother' is not in actors_present"
    ]


#: what each scripted agent reads about its call (in a sample: from the scenario and the turns so far)
SITUATIONS = {
    "medsp.examinee": dict(packet=SCENARIO.examinee.text()),
    "medsp.environment": dict(
        materials=SCENARIO.environment_controller.text(), speech="Hello", actions=["x"], eos=True, all_actions=["x"]
    ),
    "medsp.patient": dict(script=SCENARIO.sp_actor.text(), speech="Hello"),
}


@pytest.mark.eval
def test_scripted_roles_are_deterministic_and_parse():
    sent = prompts_as_sent()
    for name in ("medsp.examinee", "medsp.environment", "medsp.patient"):
        messages = protocol(name).tag(
            [ChatMessageSystem(content=sent[name][0]), ChatMessageUser(content=sent[name][1])]
        )
        a = ScriptedEngine().reply_for(name, messages, 0, SITUATIONS[name])
        assert a == ScriptedEngine().reply_for(name, messages, 0, SITUATIONS[name])
    exam = [ChatMessageSystem(content=sent["medsp.examinee"][0]), ChatMessageUser(content=sent["medsp.examinee"][1])]
    turn = parse_examinee(ScriptedEngine().reply_for(EXAMINEE.name, EXAMINEE.tag(exam), 0, SITUATIONS[EXAMINEE.name]))
    assert turn.data["actions"][0] == "Cardiac monitor, pulse oximetry and vital signs" and turn.data["eos"] is False


def test_unknown_scripted_option_is_an_error():
    with pytest.raises(ValueError, match="medsp_examinee_plan"):
        ScriptedEngine(medsp_examinee_turnz=3)


def cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "INSPECT_LOG_DIR": str(tmp_path)}
    return forked.run([INSPECT, *args], cwd=REPO, env=env, timeout=300)


def run_cli(targets: list[str], tmp_path: Path) -> None:
    """One ``inspect eval`` of every target (one log each), with each log checked."""
    roles = []
    for role in ("patient", "environment", "grader"):
        roles += ["--model-role", f"{role}=bedside/scripted"]
    out_dir = tmp_path / "logs"
    proc = cli(
        "eval",
        *targets,
        "--model",
        "bedside/scripted",
        *roles,
        "--limit",
        "1",
        "-T",
        "max_turns=3",
        "-T",
        "scaling=best_of_n",
        "-T",
        "n=2",
        "--display",
        "none",
        "--log-dir",
        str(out_dir),
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    logs = [read_eval_log(str(f)) for f in out_dir.glob("*.eval")]
    assert sorted(log.eval.task_file or log.eval.task for log in logs) == sorted(targets)
    for log in logs:
        assert log.status == "success" and log.eval.task_args["max_turns"] == 3
        assert set(log.eval.model_roles) == {"patient", "environment", "grader"}
        assert len(log.samples) == 1 and all(s.scores["medsp_rubric"].value["examinee_turns"] <= 3 for s in log.samples)
        assert all(
            len(t["data"]["best_of_n"]["candidates"]) == 2
            for s in log.samples
            for t in s.store["MedSPStore:history"]
            if t["role"] == "examinee"
        )
        assert log.eval.metadata["data_report"]["scenarios"] == 7 and log.eval.metadata["prompts"] == "bedside"


@pytest.mark.eval
def test_cli_by_path_and_by_entry_point(tmp_path):
    import bedside._registry

    assert "medsp" in bedside._registry.benchmarks.task_functions()
    run_cli(["tasks/medsp.py", "bedside/medsp"], tmp_path)


@pytest.mark.eval
def test_cli_rejects_a_bad_prompts_path_in_one_line(tmp_path):
    proc = cli(
        "eval",
        "tasks/medsp.py",
        "--model",
        "bedside/scripted",
        "-T",
        f"prompts={tmp_path}",
        "--limit",
        "1",
        "--display",
        "plain",
        tmp_path=tmp_path,
    )
    assert proc.returncode != 0
    out = " ".join((proc.stdout + proc.stderr).split())
    assert (
        "Bad parameter 'prompts'" in out and "not a clone of the official MedSP1000" in out and "Traceback" not in out
    )
