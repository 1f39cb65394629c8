"""-T structured_output: ``auto`` by default (structured output only where the official code uses it, on
providers that support it); ``true`` against a server that rejects the JSON-schema response format (as
llama-cpp-python's server does) fails fast with one line naming the option and the server's message."""

from __future__ import annotations

import os
import sys

import pytest
from inspect_ai import eval
from inspect_ai.model import get_model

import bedside.protocols as protocols
from bedside.cpb.protocols import FAILURE_JUDGE, OVERREACTION_JUDGE
from bedside.tasks.discharge import discharge
from tests import forked
from tests.conftest import REPO
from tests.loopback.server import LLAMA_CPP_JSON_SCHEMA_ERROR, LoopbackServer

SERVER_WORDS = "Input should be 'text' or 'json_object'"


def test_the_loopback_server_answers_like_llama_cpp_python():
    assert SERVER_WORDS in LLAMA_CPP_JSON_SCHEMA_ERROR


@pytest.mark.eval
def test_cli_fails_fast_with_one_line_naming_the_option_and_the_servers_message(tmp_path):
    with LoopbackServer(json_schema=False) as server:
        env = dict(os.environ, **server.env, COLUMNS="400")
        inspect = os.path.join(os.path.dirname(sys.executable), "inspect")
        result = forked.run(
            [
                inspect,
                "eval",
                "bedside/discharge",
                "--model",
                "openai-api/loopback/educator",
                "--model-role",
                "patient=openai-api/loopback/patient",
                "--model-role",
                "monitor=openai-api/loopback/monitor",
                "--model-role",
                "grader=openai-api/loopback/grader",
                "-T",
                "structured_output=true",
                "--limit",
                "1",
                "--log-dir",
                str(tmp_path / "logs"),
                "--display",
                "plain",
            ],
            env=env,
            timeout=600,
            cwd=REPO,
        )
        rejected, answered = server.rejected_json_schema, server.total_calls
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    # Inspect's banner of the registered hooks (the loopback test channel's) comes before the message
    banner = ("inspect_ai v", "- hooks enabled:", "  bedside_loopback_channel:")
    lines = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith(banner)]
    assert len(lines) == 1, out
    assert (
        lines[0].startswith("-T structured_output=true: openai-api/loopback/educator does not accept")
        and SERVER_WORDS in lines[0]
    )
    assert "Traceback" not in out
    assert rejected == 1 and answered == 0  # one probe, no retries, no model call


@pytest.mark.eval
def test_python_api_stops_at_the_first_sample_with_the_same_message(tmp_path, monkeypatch):
    with LoopbackServer(json_schema=False) as server:
        monkeypatch.setenv("LOOPBACK_BASE_URL", server.base_url)
        monkeypatch.setenv("BEDSIDE_LOOPBACK_URL", server.base_url)
        monkeypatch.setenv("LOOPBACK_API_KEY", "x")
        model = lambda role: get_model(f"openai-api/loopback/{role}", memoize=False)  # noqa: E731
        [log] = eval(
            discharge(structured_output=True),
            model=model("educator"),
            log_dir=str(tmp_path),
            display="none",
            model_roles={r: model(r) for r in ("patient", "monitor", "grader")},
            limit=2,
        )
        rejected, answered = server.rejected_json_schema, server.total_calls
    assert (
        log.status == "error"
        and "-T structured_output=true" in str(log.error.message)
        and SERVER_WORDS in str(log.error.message)
    )
    assert rejected == 1 and answered == 0


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


def test_auto_asks_for_structured_output_only_where_the_official_code_does(monkeypatch):
    monkeypatch.setattr(protocols, "structured_output", lambda: "auto")
    assert OVERREACTION_JUDGE.config(_Named("openai/gpt-4o")).response_schema is not None
    assert OVERREACTION_JUDGE.config(_Named("vllm/Qwen/Qwen3-8B")).response_schema is not None
    # an OpenAI-compatible server of unknown make, or a bedside provider: not assumed to support it
    assert OVERREACTION_JUDGE.config(_Named("openai-api/llamacpp/model")).response_schema is None
    assert OVERREACTION_JUDGE.config(_Named("bedside/scripted")).response_schema is None
    assert FAILURE_JUDGE.config(_Named("openai/gpt-4o")).response_schema is None  # upstream: plain True/False
    monkeypatch.setattr(protocols, "structured_output", lambda: False)
    assert OVERREACTION_JUDGE.config(_Named("openai/gpt-4o")).response_schema is None
    monkeypatch.setattr(protocols, "structured_output", lambda: True)
    assert FAILURE_JUDGE.config(_Named("bedside/scripted")).response_schema is not None
