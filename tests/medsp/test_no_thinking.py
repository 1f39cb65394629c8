"""Roles without thinking, as the official MedSP1000 client runs deepseek*/qwen* models: the
paper-comparable recipe of bedside/medsp/README.md gives each role an ``extra_body`` through Inspect's per-role generate config,
and every SP, environment and evaluator request carries it while the examinee's does not."""

from __future__ import annotations

from typing import Any

import pytest
from inspect_ai import eval
from inspect_ai.model import GenerateConfig, get_model

from bedside.tasks.medsp import medsp
from tests.compat import parse_model_role_cli_args
from tests.docs_commands import documented_commands
from tests.loopback.server import LoopbackServer
from tests.loopback_helpers import LOOPBACK, loopback_env

NO_THINKING = {"thinking": {"type": "disabled"}}
ROLES = ("patient", "environment", "grader")


def readme_recipe() -> list[str]:
    """The ``--model-role`` values of the documented paper-comparable command (found by content: the
    MedSP1000 eval that binds deepseek-v4-pro roles), with the block's ``$NOTHINK`` expanded."""
    [command] = [
        c
        for c in documented_commands()
        if c.program == "inspect eval" and "tasks/medsp.py" in c.argv and "deepseek-v4-pro" in c.text
    ]
    return [command.argv[i + 1] for i, a in enumerate(command.argv) if a == "--model-role"]


def test_the_readme_recipe_gives_every_role_the_no_thinking_body(monkeypatch):
    # the client is built, never called: a placeholder endpoint and key (the recipe: set your own)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/v1")
    roles = tuple(readme_recipe())
    assert len(roles) == 3
    parsed = parse_model_role_cli_args(roles)
    assert set(parsed) == set(ROLES)
    for role, model in parsed.items():
        assert str(model) == "openai-api/deepseek/deepseek-v4-pro", role
        assert model.config.extra_body == NO_THINKING, role


class RecordingServer(LoopbackServer):
    """The loopback endpoint, keeping each request's body (what a provider receives)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bodies: list[dict[str, Any]] = []

    async def _intercept(self, request):  # noqa: ANN001
        self.bodies.append(request.body)
        return None


@pytest.mark.eval
def test_each_role_request_carries_the_field_and_the_examinee_does_not(tmp_path):
    with RecordingServer() as server, loopback_env(server):
        config = GenerateConfig(extra_body=NO_THINKING)  # = the recipe's role mapping
        roles = {r: get_model(f"{LOOPBACK}/{r}", config=config, memoize=False) for r in ROLES}
        [log] = eval(
            medsp(),
            model=get_model(f"{LOOPBACK}/examinee", memoize=False),
            model_roles=roles,
            limit=1,
            log_dir=str(tmp_path),
            display="none",
        )
        assert log.status == "success", log.error
        by_model: dict[str, list[dict[str, Any]]] = {}
        for body in server.bodies:
            by_model.setdefault(body["model"], []).append(body)
    assert set(by_model) == {"examinee", *ROLES}
    for role in ROLES:  # the openai client merges extra_body into the request's JSON
        assert all(b.get("thinking") == {"type": "disabled"} for b in by_model[role]), role
    assert not any("thinking" in b for b in by_model["examinee"])
