"""Reply protocols: one pydantic model per reply serves parsing, the local grammar and structured output."""

from __future__ import annotations

import pytest
from inspect_ai.model import ChatMessageUser
from pydantic import BaseModel

from bedside.discharge.protocols import JUDGE_CHECKLIST, JUDGE_FACTUAL, MONITOR, ChecklistAnswer, keyed
from bedside.protocols import Protocol, bare_boolean
from bedside.tasks.discharge import discharge
from tests.conftest import run, scripted


class Judgement(BaseModel):
    failure: bool
    reason: str = ""


BOOLEAN = Protocol("test.boolean", Judgement, bare_bool="failure")


@pytest.mark.parametrize(
    "reply,value",
    [
        ("True", True),
        ("false", False),
        ("**True**", True),
        (" FALSE.\n", False),
        ('{"failure": true, "reason": "x"}', True),
        ('```json\n{"failure": "False"}\n```', False),
    ],
)
def test_boolean_protocol_accepts_bare_true_false(reply, value):
    assert BOOLEAN.parse(reply).failure is value


def test_bare_boolean_only_where_declared_and_never_guessed():
    assert bare_boolean("True, because the doctor agreed") is None
    with pytest.raises(ValueError):
        BOOLEAN.parse("The doctor failed.")
    with pytest.raises(ValueError):
        MONITOR.parse("PASS")  # the monitor protocol is JSON only


@pytest.mark.eval
def test_monitor_recorded_only_fields_never_make_a_verdict_unreadable():
    v = MONITOR.parse(
        '{"verdict": "warn", "issue": "too_chatty", "action": "escalate", "reasoning": ["a", "b"],'
        ' "severity": "Minor", "session_complete": "false"}'
    )
    assert (v.verdict, v.issue, v.action, v.severity, v.session_complete) == (
        "WARN",
        "too_chatty",
        "escalate",
        "minor",
        False,
    )
    v = MONITOR.parse('{"verdict": "PASS"}')
    assert v.issue == "none" and v.action == "none" and v.reasoning == ""
    with pytest.raises(ValueError, match="verdict"):
        MONITOR.parse('{"verdict": "MAYBE"}')  # what Algorithm 1 acts on must be readable
    # ... while the schema (a local model's grammar, structured output) still offers only the paper's values
    props = MONITOR.json_schema()["properties"]
    assert "role_drift" in props["issue"]["enum"] and "hard_stop" in props["action"]["enum"]
    with pytest.raises(ValueError, match="severity"):
        MONITOR.parse('{"verdict": "FAIL", "severity": "catastrophic"}')


def test_factual_reply_as_the_papers_list_or_a_structured_object():
    items = [{"question": "q", "answer": "a"}] * 6
    import json

    assert (
        len(JUDGE_FACTUAL.read_json(json.dumps(items))[0].answers) == 6
        and len(JUDGE_FACTUAL.parse(json.dumps(items))) == 6
    )
    assert len(JUDGE_FACTUAL.read_json(json.dumps({"answers": items}))[0].answers) == 6


def test_keyed_models_require_every_id():
    proto = JUDGE_CHECKLIST.using(keyed("C", ["Q1", "Q2.1"], ChecklistAnswer))
    assert proto.json_schema()["required"] == ["Q1", "Q2.1"]
    with pytest.raises(ValueError, match="Q2.1"):
        proto.parse('{"Q1": {"answer": "yes"}}')


def test_tag_carries_name_schema_and_budget():
    [tagged] = MONITOR.tag([ChatMessageUser(content="x")])
    meta = tagged.metadata["bedside_protocol"]
    assert (
        meta["name"] == "discharge.monitor" and meta["max_tokens"] == 768 and "verdict" in meta["schema"]["properties"]
    )
    assert "$ref" not in str(JUDGE_FACTUAL.json_schema())  # refs inlined for grammars and ResponseSchema


@pytest.mark.eval
def test_structured_output_requests_the_reply_schema(tmp_path):
    log = run(
        discharge(structured_output=True),
        roles={"patient": scripted(), "monitor": scripted(), "grader": scripted()},
        log_dir=tmp_path,
        limit=1,
    )
    events = [e for e in log.samples[0].events if e.event == "model"]
    by_role: dict = {}
    for e in events:
        by_role.setdefault(e.role, []).append(e.config.response_schema)
    assert all(s is None for s in by_role[None])  # the educator writes prose
    assert all(s is not None and s.name == "discharge_patient" for s in by_role["patient"][:3])
    assert all(s is not None and s.name == "discharge_monitor" for s in by_role["monitor"])
    assert {s.name for s in by_role["grader"] if s is not None} >= {
        "discharge_judge_quality",
        "discharge_judge_checklist",
        "discharge_judge_factual",
    }
    assert log.samples[0].scores["encounter_outcome"].answer == "clean_complete"
    plain = run(
        discharge(),
        roles={"patient": scripted(), "monitor": scripted(), "grader": scripted()},
        log_dir=tmp_path / "plain",
        limit=1,
    )
    assert all(e.config.response_schema is None for e in plain.samples[0].events if e.event == "model")


@pytest.mark.eval
def test_structured_output_in_medsp_and_cpb(tmp_path):
    """Every task takes -T structured_output: the JSON calls carry their reply model's schema."""
    from bedside.tasks.cpb import cpb_control
    from bedside.tasks.medsp import medsp
    from tests.cpb import synthetic

    grader_roles = {"patient": scripted(), "environment": scripted(), "grader": scripted()}
    log = run(medsp(structured_output=True), roles=grader_roles, log_dir=tmp_path / "m", limit=1)
    schemas = {e.role: e.config.response_schema for e in log.samples[0].events if e.event == "model"}
    assert schemas["environment"] is not None and schemas["grader"] is not None and schemas["patient"] is not None
    data = synthetic.write_data(tmp_path / "cpb")
    log = run(
        cpb_control(data=str(data), structured_output=True),
        roles={"grader": scripted()},
        log_dir=tmp_path / "c",
        limit=2,
    )
    judge = [e for e in log.samples[0].events if e.event == "model" and e.role == "grader"]
    assert judge and all(e.config.response_schema is not None for e in judge)
    assert log.samples[0].scores["cpb_overreaction"].value["unscored"] == 0
