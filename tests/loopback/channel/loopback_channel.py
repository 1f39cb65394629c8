"""The loopback test channel: what a call to bedside's loopback test server (:mod:`tests.loopback.server`)
carries besides the request any OpenAI-compatible server gets, and the Inspect hook that adds it.

The server plays every bedside role with the scripted replies (:mod:`bedside.providers.scripted`), which
need the call's protocol and *situation* (what the role reads about the call from the sample it runs in,
:mod:`bedside.providers.scripts`). The server runs apart from the sample (another thread, possibly another
process), so the situation is gathered in the Inspect process, just before the call, by the hook
:class:`LoopbackChannel` (Inspect's ``on_before_model_generate``, which runs before the cache lookup and
whose changes to the call's config reach the request): the protocol name as the header
``X-Bedside-Protocol`` (:data:`HEADER`) and the name with the situation in the request body
(:data:`BODY_KEY`, ``extra_body``).

Only calls to the test channel get them: a model whose provider speaks the OpenAI API over HTTP
(``openai-api/...``, ``vllm/...``, and OpenAI's own ``openai/...``, whose batch mode the server serves)
and whose base URL is one that ``BEDSIDE_LOOPBACK_URL``
(:data:`LOOPBACK_URL_ENV`) names (the server's ``env`` exports it; several servers: their URLs
separated by commas). With the variable unset the hook is off; any other server's request, and
Inspect's cache key for it, carry nothing of bedside's. (A ``vllm/`` model learns its base URL at its
first call, so that call goes untagged.) A call in batch mode (``GenerateConfig(batch=...)``) gets the
body field only: Inspect's batcher puts requests with different headers into different batches, and a
batch of bedside's judges mixes protocols as it does on OpenAI's API.

This module is not part of bedside: bedside never imports it, and the wheel does not ship it. It is an
Inspect plugin of its own, installed into the test environment only (``make`` installs
``tests/loopback/channel/`` beside bedside, editable): Inspect loads every ``inspect_ai`` entry point of
the environment, so each process there — a test, a fork of the test suite's fork server, a fresh
``inspect eval`` in any folder, a command a developer types beside ``python -m tests.loopback`` — loads
this module, which registers the hook (:func:`register`) when its environment names a loopback server.
A process that imports the server (:mod:`tests.loopback.server`: a test that sets the variable later)
registers it too. Inspect prints a banner of the registered hooks before every eval, even of disabled
ones, so a run with no test server shows nothing of the test channel.
"""

from __future__ import annotations

import os
from typing import Any

from inspect_ai.hooks import BeforeModelGenerate, Hooks, hooks

from bedside.protocols import tag_of

#: the variable naming the base URL(s) of the loopback test channel (exported by ``LoopbackServer.env``;
#: several servers: comma-separated)
LOOPBACK_URL_ENV = "BEDSIDE_LOOPBACK_URL"
#: the request header naming the call's protocol, on the test channel only
HEADER = "X-Bedside-Protocol"
#: the request-body key holding the protocol name and the call's situation, on the test channel only
BODY_KEY = "bedside_call"


def channel_urls() -> set[str]:
    """The base URLs ``BEDSIDE_LOOPBACK_URL`` names (none: the channel is off)."""
    return {url.strip().rstrip("/") for url in os.environ.get(LOOPBACK_URL_ENV, "").split(",")} - {""}


def on_channel(model: Any) -> bool:
    """Whether ``model`` (an Inspect ``Model``) talks to a loopback test server (module docstring)."""
    urls = channel_urls()
    if not urls or not str(model).startswith(("openai-api/", "vllm/", "openai/")):
        return False
    # the model's own base URL; else its client's (``openai/`` reads ``OPENAI_BASE_URL`` into its client only)
    base_url = getattr(model.api, "base_url", None) or getattr(getattr(model.api, "client", None), "base_url", None)
    return str(base_url or "").rstrip("/") in urls


class LoopbackChannel(Hooks):
    """Adds the protocol and the situation to the calls of the test channel (module docstring)."""

    def enabled(self) -> bool:
        return bool(channel_urls())

    async def on_before_model_generate(self, data: BeforeModelGenerate) -> None:
        from bedside.providers.scripts import situation_of

        tag = tag_of(data.input)
        if tag is None or not on_channel(generating_model()):
            return
        config = data.config
        if not config.batch:  # a batch carries one set of headers (module docstring)
            config.extra_headers = {**(config.extra_headers or {}), HEADER: tag.name}
        config.extra_body = {
            **(config.extra_body or {}),
            BODY_KEY: {"name": tag.name, "situation": situation_of(tag.name, data.input)},
        }


def generating_model() -> Any:
    """The Inspect ``Model`` whose ``generate()`` runs on the current call stack, or None. Inspect's
    ``on_before_model_generate`` hooks are given the model's name only, not the model; they run inside
    ``Model._generate`` (its retried ``generate`` closure), whose ``self`` is the model (the hook needs the
    model's base URL). It reads Inspect's call stack, not its API: check it when the ``inspect-ai`` pin
    moves (``tests/loopback/test_channel.py`` fails if it finds no model)."""
    import sys
    from types import FrameType

    from inspect_ai.model import Model

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Model):
            return candidate
        frame = frame.f_back
    return None


_registered = False


def register() -> None:
    """Registers :class:`LoopbackChannel` with Inspect (once per process; module docstring)."""
    global _registered
    if not _registered:
        hooks(name="bedside_loopback_channel", description="bedside's loopback test channel")(LoopbackChannel)
        _registered = True


# loaded as an Inspect plugin (module docstring): registered where a loopback server is named
if channel_urls():
    register()
