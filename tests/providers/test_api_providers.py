"""A fresh install can use Inspect's API providers: `--model openai/...`, `anthropic/...`,
`vllm/...` (against a server) and `openai-api/<service>/...` construct without missing clients."""

from __future__ import annotations

import tomllib

import pytest
from inspect_ai.model import get_model

from tests.conftest import REPO


@pytest.mark.parametrize(
    "name,args",
    [
        ("openai/gpt-5.5", {"api_key": "sk-test"}),
        ("anthropic/claude-sonnet-4-6", {"api_key": "sk-ant-test"}),
        ("vllm/meta-llama/Llama-3.3-70B-Instruct", {"base_url": "http://127.0.0.1:9/v1", "api_key": "x"}),
        ("openai-api/loopback/patient", {"base_url": "http://127.0.0.1:9/v1", "api_key": "x"}),
    ],
)
def test_provider_constructs_offline(name, args):
    model = get_model(name, memoize=False, **args)  # no network needed to construct a client
    assert str(model) == name


def test_dependencies_declare_the_clients_and_a_vllm_extra():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {d.split("=")[0].split(">")[0].split("<")[0].strip() for d in project["dependencies"]}
    assert {"openai", "anthropic", "inspect-ai"} <= names
    assert any(d.startswith("vllm") for d in project["optional-dependencies"]["vllm"])


def test_the_docs_bind_the_grader_in_every_eval_example():
    from tests.docs_commands import documented_commands

    # the documented commands, continuations joined and shell variables ($ROLES) expanded
    commands = [c.text for c in documented_commands() if c.program in ("inspect eval", "inspect eval-set")]
    assert commands, "the docs show eval commands"
    for command in commands:
        if "--model bedside/scripted" in command or "discharge_build_cases" in command or "--no-score" in command:
            continue  # scripted runs; the case builder has no judge; a run without scoring calls none
        assert "grader=" in command, command
    assert any("VLLM_BASE_URL=" in command for command in commands)
