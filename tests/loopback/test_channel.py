"""The loopback test channel's hook (``tests/loopback/channel/loopback_channel.py``) sends a call's protocol
and situation over HTTP to the loopback test server only: a real OpenAI-compatible server (any base URL other than
``BEDSIDE_LOOPBACK_URL``) gets neither the ``X-Bedside-Protocol`` header nor the ``bedside_call`` body
field, so its request and Inspect's cache key carry nothing of bedside's; production code passes nothing
for it (the hook gathers the situation itself)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from inspect_ai.model import get_model

from bedside.calls import ask
from bedside.discharge import scripted as discharge_scripts
from bedside.parts import protocol
from loopback_channel import BODY_KEY, LOOPBACK_URL_ENV, LoopbackChannel, on_channel
from tests.loopback.server import UNKNOWN, LoopbackServer

SITUATION = {"personality": "neutral", "behavior": "none", "corrected": False}


class HeaderRecorder(LoopbackServer):
    """The loopback endpoint, keeping each request's body and bedside header."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: list[tuple[str | None, dict[str, Any]]] = []

    def _read(self, body: dict[str, Any], header: str | None = None):  # noqa: ANN202
        self.seen.append((header, body))
        return super()._read(body, header)


@pytest.fixture(autouse=True)
def situation(monkeypatch):
    """The patient's situation outside a sample (in a sample it is read from the sample's metadata)."""
    monkeypatch.setitem(discharge_scripts.SITUATIONS, "discharge.patient", lambda call: dict(SITUATION))


def _ask(server: LoopbackServer) -> str:
    model = get_model("openai-api/loopback/patient", base_url=server.base_url, api_key="x", memoize=False)
    answer = asyncio.run(
        ask(model, "Hello, I am your nurse today.", protocol("discharge.patient"), retries=0, who="patient")
    )
    return answer.replies[-1] if answer.replies else ""


def test_a_server_that_is_not_the_test_channel_gets_no_bedside_header_or_body(monkeypatch):
    with HeaderRecorder() as server:
        monkeypatch.delenv(LOOPBACK_URL_ENV, raising=False)
        assert not LoopbackChannel().enabled()
        _ask(server)
        monkeypatch.setenv(LOOPBACK_URL_ENV, "http://127.0.0.1:1/v1")  # another server is the channel
        assert LoopbackChannel().enabled()
        _ask(server)
        assert [header for header, _ in server.seen] == [None, None]
        assert not any(BODY_KEY in body for _, body in server.seen)
        assert server.found_by == {UNKNOWN: 2}


def test_the_test_channel_gets_the_protocol_header_and_the_situation(monkeypatch):
    with HeaderRecorder() as server:
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        reply = _ask(server)
        [(header, body)] = server.seen
        assert header == "discharge.patient"
        # and, as every situation, the sample and epoch the call runs in (here none: epoch 1 of no sample)
        assert body[BODY_KEY] == {"name": "discharge.patient", "situation": {**SITUATION, "sample": "|1"}}
        assert server.calls == {"discharge.patient": 1} and '"utterance"' in reply


def test_the_server_answers_with_the_situation_it_was_sent(monkeypatch):
    """A behaviour the situation switches on (the persona's stress line at the patient's 2nd turn)
    reaches the server's reply."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

    monkeypatch.setitem(SITUATION, "behavior", "false_belief")
    with LoopbackServer() as server:
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        model = get_model("openai-api/loopback/patient", base_url=server.base_url, api_key="x", memoize=False)
        messages = [
            ChatMessageUser(content="Hello."),
            ChatMessageAssistant(content='{"utterance": "Hi."}'),
            ChatMessageUser(content="You were here for pneumonia."),
        ]
        answer = asyncio.run(ask(model, messages, protocol("discharge.patient"), retries=0, who="patient"))
    assert answer.value.message == discharge_scripts.STRESS_LINES["false_belief"]


def test_the_channel_may_name_several_servers(monkeypatch):
    with HeaderRecorder() as first, HeaderRecorder() as second:
        monkeypatch.setenv(LOOPBACK_URL_ENV, f"{first.base_url}, {second.base_url}")
        _ask(first)
        _ask(second)
        assert [header for header, _ in first.seen + second.seen] == ["discharge.patient", "discharge.patient"]


def test_a_vllm_model_is_on_the_channel_once_it_knows_its_server(monkeypatch):
    """``vllm/`` learns its base URL at its first call (so that call goes untagged); from then on it is
    on the channel like ``openai-api/``."""
    with LoopbackServer() as server:
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        model = get_model("vllm/Qwen/Qwen3.5-9B", base_url=server.base_url, memoize=False)
        assert not on_channel(model)
        asyncio.run(model.generate("hello"))
        assert on_channel(model)


@pytest.mark.parametrize("name", ["anthropic/claude-x", "bedside/scripted"])
def test_other_providers_are_never_the_channel(name, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    monkeypatch.setenv(LOOPBACK_URL_ENV, "https://api.anthropic.com")
    assert not on_channel(get_model(name, memoize=False))


def test_openai_models_are_on_the_channel_at_a_server_it_names_only(monkeypatch):
    """``openai/`` (whose batch mode the server's Batch API serves) at a loopback server's address, by its
    ``base_url`` or ``OPENAI_BASE_URL`` (which only its client reads); OpenAI's own API never."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setenv(LOOPBACK_URL_ENV, "http://127.0.0.1:9/v1")
    assert not on_channel(get_model("openai/gpt-5.5", memoize=False))
    assert on_channel(get_model("openai/gpt-5.5", base_url="http://127.0.0.1:9/v1", memoize=False))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert on_channel(get_model("openai/gpt-5.5", memoize=False))


def test_a_call_tag_holds_the_protocol_alone():
    """A call's tag (in the log, on its last input message) names the protocol, its reply schema and
    budget, and what a person answering on bedside/human's page reads beside each field (``form``);
    nothing the test doubles read travels in it."""
    from inspect_ai.model import ChatMessageUser

    from bedside.protocols import TAG

    [tagged] = protocol("discharge.patient").tag([ChatMessageUser(content="hi")])
    assert set(tagged.metadata[TAG]) == {"name", "schema", "max_tokens", "form"}


PLUGIN_PROBE = """
from importlib.metadata import entry_points

for plugin in entry_points(group="inspect_ai"):  # as Inspect loads its plugins, before an eval
    plugin.load()
import loopback_channel
print(loopback_channel.__file__, loopback_channel._registered)
"""


@pytest.mark.eval
def test_every_process_of_the_test_environment_loads_the_channel_as_an_inspect_plugin(tmp_path):
    """In any folder (the crash test's ``inspect eval`` runs in its own), with the variable set at start."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != LOOPBACK_URL_ENV}
    for named, registered in (("http://127.0.0.1:1/v1", True), (None, False)):
        run_env = {**env, LOOPBACK_URL_ENV: named} if named else env
        done = subprocess.run(
            [sys.executable, "-c", PLUGIN_PROBE], cwd=tmp_path, env=run_env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        path, flag = done.stdout.split()
        assert path.endswith("tests/loopback/channel/loopback_channel.py") and flag == str(registered)
