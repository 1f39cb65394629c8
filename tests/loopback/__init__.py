"""The loopback test server: an OpenAI-compatible HTTP server on 127.0.0.1 that plays every bedside role
with the scripted replies (:mod:`bedside.providers.scripted`), so that tests and benchmarks run bedside's
tasks through Inspect's real ``openai-api`` provider with no network and no model weights.

- :mod:`tests.loopback.server`: :class:`~tests.loopback.server.LoopbackServer` (in a thread of the test);
- :mod:`tests.loopback.requests`: reading a request, fault injection, the error responses;
- :mod:`tests.loopback.__main__`: ``python -m tests.loopback`` (in the repository root), the server as a
  process of its own;
- ``tests/loopback/channel/``: the test channel, an Inspect plugin installed into the test environment
  only, that sends each call's protocol and *situation* (what its script reads from the sample,
  :mod:`bedside.providers.scripts`) to the server, never to any other server (``loopback_channel``).

None of it is part of bedside: the wheel does not ship it and bedside never imports it
(docs/testing.md).
"""
