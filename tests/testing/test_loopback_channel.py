"""The call tag (protocol name and render context) travels over HTTP only to the loopback test channel:
a real OpenAI-compatible server (any base URL other than ``BEDSIDE_LOOPBACK_URL``) gets neither the
``X-Bedside-Protocol`` header nor the ``bedside_tag`` body field, so its request and Inspect's cache key
carry nothing of bedside's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from inspect_ai.model import ChatMessageUser, GenerateConfig, get_model

from bedside.calls import ask, loopback_channel, loopback_config
from bedside.protocols import BODY_KEY, LOOPBACK_URL_ENV, protocol
from bedside.testing.loopback import UNKNOWN, LoopbackServer

CONTEXT = {"personality_description": "a neutral patient.", "behavior_overlay": "", "correction": None}


class HeaderRecorder(LoopbackServer):
    """The loopback endpoint, keeping each request's body and bedside header."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: list[tuple[str | None, dict[str, Any]]] = []

    def _read(self, body: dict[str, Any], header: str | None = None):  # noqa: ANN202
        self.seen.append((header, body))
        return super()._read(body, header)


def _ask(server: LoopbackServer) -> str:
    model = get_model("openai-api/loopback/patient", base_url=server.base_url, api_key="x", memoize=False)
    answer = asyncio.run(
        ask(
            model,
            "Hello, I am your nurse today.",
            protocol("discharge.patient"),
            retries=0,
            who="patient",
            context=CONTEXT,
        )
    )
    return answer.replies[-1] if answer.replies else ""


def test_a_server_that_is_not_the_test_channel_gets_no_bedside_header_or_body(monkeypatch):
    with HeaderRecorder() as server:
        monkeypatch.delenv(LOOPBACK_URL_ENV, raising=False)
        _ask(server)
        monkeypatch.setenv(LOOPBACK_URL_ENV, "http://127.0.0.1:1/v1")  # another server is the channel
        _ask(server)
        assert [header for header, _ in server.seen] == [None, None]
        assert not any(BODY_KEY in body for _, body in server.seen)
        assert server.found_by == {UNKNOWN: 2}


def test_the_test_channel_gets_the_protocol_header_and_the_render_context(monkeypatch):
    with HeaderRecorder() as server:
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        reply = _ask(server)
        [(header, body)] = server.seen
        assert header == "discharge.patient"
        assert body[BODY_KEY] == {"name": "discharge.patient", "context": CONTEXT}
        assert server.calls == {"discharge.patient": 1} and '"utterance"' in reply


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
        assert not loopback_channel(model)
        asyncio.run(model.generate("hello"))
        assert loopback_channel(model)


@pytest.mark.parametrize("name", ["openai/gpt-5.5", "anthropic/claude-x", "bedside/scripted"])
def test_other_providers_are_never_the_channel(name, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    monkeypatch.setenv(LOOPBACK_URL_ENV, "https://api.openai.com/v1")
    model = get_model(name, memoize=False)
    assert not loopback_channel(model)
    tagged = protocol("discharge.patient").tag([ChatMessageUser(content="hi")], CONTEXT)
    config = loopback_config(model, tagged, GenerateConfig())
    assert config.extra_headers is None and config.extra_body is None


def test_only_the_test_doubles_get_the_render_context(monkeypatch):
    """A real model's tag holds the protocol alone (its log does not hold each prompt twice); the
    scripted model and the loopback channel get the render context."""
    from inspect_ai.model import ModelOutput

    from bedside.calls import generate_checked, reads_context
    from bedside.protocols import tag_of

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.delenv(LOOPBACK_URL_ENV, raising=False)
    real = get_model("openai/gpt-5.5", memoize=False)
    scripted = get_model("bedside/scripted", memoize=False)
    assert not reads_context(real) and reads_context(scripted)
    with LoopbackServer() as server:
        loopback = get_model("openai-api/loopback/patient", base_url=server.base_url, api_key="x", memoize=False)
        assert not reads_context(loopback)
        monkeypatch.setenv(LOOPBACK_URL_ENV, server.base_url)
        assert reads_context(loopback)

    seen = []

    async def fake_generate(messages, config=None):  # noqa: ANN001, ANN202
        seen.append(tag_of(messages))
        return ModelOutput.from_content(model="x", content='{"utterance": "hi"}')

    monkeypatch.setattr(real, "generate", fake_generate)
    asyncio.run(
        generate_checked(
            real, [ChatMessageUser(content="hi")], GenerateConfig(), protocol("discharge.patient"), CONTEXT
        )
    )
    assert seen[0] is not None and seen[0].name == "discharge.patient" and not seen[0].context
