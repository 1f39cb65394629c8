"""Running bedside tasks through Inspect's ``openai-api`` provider against :mod:`tests.loopback.server`.

Models are ``openai-api/loopback/<role>``, with the endpoint and key read from ``LOOPBACK_BASE_URL``
and ``LOOPBACK_API_KEY`` (:func:`loopback_env`) as for a user's API key or vLLM server.

One pitfall: Inspect memoizes models created from a model *string* by the string (the environment
is not part of the key), for the whole process. A second server on another port would then be
reached through the first server's client, which retries a dead port for minutes. The helpers here
therefore build each model with ``get_model(..., memoize=False)`` (the same provider, the same
environment lookup, a fresh client), so any number of servers can run one after another in one
pytest process. Tests that pass plain strings to ``eval`` should run in a subprocess (the CLI).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task, eval
from inspect_ai.log import EvalLog, EvalSample, read_eval_log
from inspect_ai.model import Model, get_model

from bedside.protocols import tag_of
from bedside.providers.scripted import ScriptedEngine
from loopback_channel import BODY_KEY, LOOPBACK_URL_ENV
from tests.loopback.server import ENV_API_KEY, ENV_BASE_URL, UNKNOWN, UNKNOWN_REPLY, LoopbackServer

LOOPBACK = "openai-api/loopback"
#: bedside/scripted with default options: what the loopback server (default options) answers
ENGINE = ScriptedEngine()


@contextmanager
def loopback_env(server: LoopbackServer) -> Iterator[LoopbackServer]:
    """``LOOPBACK_API_KEY`` / ``LOOPBACK_BASE_URL`` point at ``server`` (restored afterwards)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_API_KEY, "loopback-test-key")
        mp.setenv(ENV_BASE_URL, server.base_url)
        mp.setenv(LOOPBACK_URL_ENV, server.base_url)
        yield server


def loopback_model(name: str) -> Model:
    """``openai-api/loopback/<name>``, resolved from the environment now, not memoized."""
    return get_model(f"{LOOPBACK}/{name}", memoize=False)


def run_loopback(
    server: LoopbackServer, task: Task, roles: list[str], log_dir: Path, **eval_args: Any
) -> tuple[EvalLog, dict[str, set[str]]]:
    """``task`` with ``openai-api/loopback/educator`` under test and each role bound to
    ``openai-api/loopback/<role>`` (the environment must point at ``server``). Returns the log
    (asserted successful) and the protocols the server answered in this run per model name,
    e.g. ``{"patient": {"discharge.patient", ...}, ...}`` (asserted: none unknown, one request per
    model event)."""
    before = Counter(server.routes)
    [log] = eval(
        task,
        model=loopback_model("educator"),
        model_roles={role: loopback_model(role) for role in roles},
        log_dir=str(log_dir),
        display="none",
        **eval_args,
    )
    assert log.status == "success", log.error
    log = read_eval_log(log.location, resolve_attachments=True)
    routes = Counter(server.routes) - before
    assert UNKNOWN not in {protocol for _, protocol in routes}, routes
    assert sum(routes.values()) == sum(len(model_events(s)) for s in log.samples or [])
    by_model: dict[str, set[str]] = {}
    for model, protocol in routes:
        by_model.setdefault(model, set()).add(protocol)
    return log, by_model


def model_events(sample: EvalSample) -> list[Any]:
    return [e for e in sample.events if e.event == "model"]


def assert_scored(log: EvalLog, n: int) -> None:
    assert log.samples is not None and len(log.samples) == n
    for sample in log.samples:
        assert sample.error is None, sample.error
        assert sample.scores, f"sample {sample.id} has no scores"


def assert_through_openai_api(log: EvalLog, roles: set[str]) -> None:
    """Every model call (model under test and each role) went through openai-api and was answered
    with the usage the server reported."""
    assert log.eval.model == f"{LOOPBACK}/educator"
    for sample in log.samples or []:
        events = model_events(sample)
        assert {e.role for e in events} >= roles | {None}
        assert all(e.model.startswith(LOOPBACK + "/") for e in events), {e.model for e in events}
        assert all(e.error is None and e.output.completion != UNKNOWN_REPLY for e in events)
        assert all(e.output.usage and e.output.usage.total_tokens > 0 for e in events)
        assert_answered_as_tagged(events)
    usage = log.stats.model_usage
    assert f"{LOOPBACK}/educator" in usage and all(u.total_tokens > 0 for u in usage.values())


def assert_answered_as_tagged(events: list[Any]) -> int:
    """The server answered each tagged call exactly as ``bedside/scripted`` does when it dispatches on
    the call's protocol tag and the situation the test channel's hook sent with it (the logged call's
    ``extra_body``, :mod:`loopback_channel`). Returns how many calls were tagged (calls a
    benchmark does not tag are checked by the role -> protocol routes only)."""
    tagged = 0
    for e in events:
        tag = tag_of(e.input)
        if tag is None:
            continue
        tagged += 1
        sent = (e.config.extra_body or {}).get(BODY_KEY) or {}
        assert sent.get("name") == tag.name, f"a {tag.name} call went without its protocol"
        expected = ENGINE.reply_for(tag.name, e.input, int(e.config.seed or 0), sent.get("situation"))
        assert e.output.completion == expected, f"a {tag.name} prompt was answered as another protocol"
    return tagged
