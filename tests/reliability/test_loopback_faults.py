"""The loopback server's fault modes on their own: what a client sees for each kind,
deterministic draws, model/protocol filters, counters, ``GET /stats`` and the request log, and how
Inspect's ``openai-api`` provider maps a context-length error."""

from __future__ import annotations

import asyncio
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, ModelOutput, get_model
from openai import OpenAI

from tests.loopback.__main__ import main
from tests.loopback.requests import BATCH_FAULTS
from tests.loopback.server import (
    CONTENT_FAULTS,
    CONTEXT_LENGTH,
    FAULT_KINDS,
    NOT_JSON_REPLY,
    TRANSPORT_FAULTS,
    Fault,
    LoopbackServer,
    spoil,
)
from tests.reliability.helpers import ServerProcess, fast_model

#: the faults of one request (a whole batch's faults are tests/loopback/test_batches.py's)
REQUEST_FAULTS = tuple(kind for kind in FAULT_KINDS if kind not in BATCH_FAULTS)

#: the header bedside sends with a discharge.patient call (the server reads the protocol from it)
TAGGED = {"X-Bedside-Protocol": "discharge.patient"}
PATIENT = [
    {"role": "system", "content": "You are roleplaying as a real hospital patient. Your name is Ann."},
    {"role": "user", "content": "Hello, I am your nurse today."},
]

#: what the ``openai`` client raises (or returns) for each kind, with its retries off
EXPECTED = {
    "http_500": ("InternalServerError", "Error code: 500"),
    "http_503": ("InternalServerError", "Error code: 503"),
    "rate_limit": ("RateLimitError", "Error code: 429"),
    "timeout": ("APITimeoutError", "timed out"),
    "reset": ("APIConnectionError", "Connection error"),
    "truncated": ("APIConnectionError", "Connection error"),
    "context_length": ("BadRequestError", "context length"),
}


@pytest.mark.eval
def test_every_kind_as_the_openai_client_sees_it():
    # one rule per kind, selected by the model name
    # the client's timeout (2 s: time for a busy machine to answer every other kind) below the hang
    rules = [Fault(kind, 1.0, models=[kind]) for kind in REQUEST_FAULTS]
    with LoopbackServer(faults=rules, hang=4.0, retry_after=0.2) as server:
        client = OpenAI(api_key="x", base_url=server.base_url, default_headers=TAGGED, max_retries=0, timeout=2.0)
        for kind in REQUEST_FAULTS:
            try:
                reply = client.chat.completions.create(model=kind, messages=PATIENT)
            except Exception as ex:  # noqa: BLE001 - the point is which exception
                assert kind in EXPECTED, f"{kind}: unexpected {ex!r}"
                name, text = EXPECTED[kind]
                assert type(ex).__name__ == name and text in str(ex), (kind, ex)
                if kind == "rate_limit":
                    assert ex.response.headers["retry-after"] == "1" and ex.response.headers["retry-after-ms"] == "200"
                if kind == "context_length":
                    assert ex.code == "context_length_exceeded" and ex.status_code == 400
                continue
            assert kind in CONTENT_FAULTS, f"{kind} was answered"
            content = reply.choices[0].message.content
            assert content == NOT_JSON_REPLY if kind == "not_json" else json.loads(content) == {}
        assert server.faults == {kind: 1 for kind in REQUEST_FAULTS}
        assert server.requests == len(REQUEST_FAULTS)
        assert server.total_calls == len(CONTENT_FAULTS)  # only HTTP 200 answers count as calls
        # a model no rule names is answered normally
        ok = client.chat.completions.create(model="patient", messages=PATIENT)
        assert json.loads(ok.choices[0].message.content)["utterance"]


def test_missing_fields_drops_the_first_key():
    verdict = json.dumps({"verdict": "PASS", "issue": "none", "session_complete": False})
    assert json.loads(spoil("missing_fields", verdict)) == {"issue": "none", "session_complete": False}
    assert json.loads(spoil("missing_fields", '{"utterance": "hi"}')) == {}
    assert json.loads(spoil("missing_fields", '[{"question": "q", "answer": "a"}]')) == [{"answer": "a"}]
    assert spoil("not_json", verdict) == NOT_JSON_REPLY


def _bodies(n: int) -> list[dict]:
    return [
        {"model": "patient", "seed": i % 3, "messages": [*PATIENT[:1], {"role": "user", "content": f"Question {i}?"}]}
        for i in range(n)
    ]


def _faulted(server: LoopbackServer, bodies: list[dict], workers: int) -> set[tuple[int, str]]:
    import urllib.error
    import urllib.request

    def post(body: dict) -> tuple[int, str] | None:
        req = urllib.request.Request(
            f"{server.base_url}/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", **TAGGED},
        )
        try:
            with urllib.request.urlopen(req, timeout=10):
                return None
        except urllib.error.HTTPError as ex:
            return (bodies.index(body), str(ex.code))

    with ThreadPoolExecutor(workers) as pool:
        return {r for r in pool.map(post, bodies) if r is not None}


@pytest.mark.eval
def test_draws_are_deterministic_and_independent_of_arrival_order():
    bodies = _bodies(300)
    rule = Fault("http_500,http_503", 0.1)
    with LoopbackServer(faults=[rule], fault_seed=7) as a:
        first = _faulted(a, bodies, workers=1)
    shuffled = bodies[:]
    random.Random(3).shuffle(shuffled)
    with LoopbackServer(faults=[rule], fault_seed=7) as b:
        second = _faulted(b, shuffled, workers=8)
    assert {(bodies.index(shuffled[i]), code) for i, code in second} == first
    assert 15 <= len(first) <= 45  # 10 % of 300, loosely
    with LoopbackServer(faults=[rule], fault_seed=8) as c:
        assert _faulted(c, bodies, workers=1) != first  # another seed, other faults
    # a repeated request gets a fresh draw each time (so a retry can succeed)
    with LoopbackServer(faults=[Fault("http_500", 0.5)]) as d:
        outcomes = [bool(_faulted(d, bodies[:1], workers=1)) for _ in range(40)]
        assert 5 < sum(outcomes) < 35 and d.requests == 40


@pytest.mark.eval
def test_rules_filter_by_model_and_protocol():
    rules = [Fault("not_json", 1.0, protocols=["discharge.monitor"]), Fault("http_500", 1.0, models=["grader"])]
    with LoopbackServer(faults=rules) as server:
        client = OpenAI(api_key="x", base_url=server.base_url, default_headers=TAGGED, max_retries=0)
        reply = client.chat.completions.create(model="patient", messages=PATIENT)  # no rule matches
        assert json.loads(reply.choices[0].message.content)["utterance"]
        with pytest.raises(Exception, match="Error code: 500"):
            client.chat.completions.create(model="grader", messages=PATIENT)
        assert server.fault_routes == {("grader", "discharge.patient", "http_500"): 1}
        assert server.calls == {"discharge.patient": 1}


@pytest.mark.eval
def test_fault_specs_and_bad_values():
    rule = Fault.parse("http_500,reset:0.25:educator,patient:discharge.monitor")
    assert rule.kinds == ("http_500", "reset") and rule.rate == 0.25
    assert rule.models == {"educator", "patient"} and rule.protocols == {"discharge.monitor"}
    assert Fault.parse("timeout").rate == 1.0 and Fault.parse("not_json:1::discharge.monitor").models == frozenset()
    for bad in ("explode:0.1", "http_500:2", "http_500:x", ":0.1", "a:b:c:d:e"):
        with pytest.raises(ValueError):
            Fault.parse(bad)
    with pytest.raises(ValueError, match="context_limit"):
        LoopbackServer(context_limit=0)
    with pytest.raises(SystemExit):
        main(["--fault", "explode:0.1"])


@pytest.mark.eval
def test_stats_endpoint_and_request_log_survive_the_client(tmp_path):
    log = tmp_path / "requests.jsonl"
    with ServerProcess("--fault", "http_503:1:grader", request_log=log) as server:
        client = OpenAI(api_key="x", base_url=server.base_url, default_headers=TAGGED, max_retries=0)
        client.chat.completions.create(model="patient", messages=PATIENT)
        with pytest.raises(Exception, match="503"):
            client.chat.completions.create(model="grader", messages=PATIENT)
        stats = server.stats()
        assert stats["requests"] == 2 and stats["answered"] == 1 and stats["faults"] == {"http_503": 1}
        assert stats["calls"] == {"discharge.patient": 1} and stats["peak_connections"] >= 1
        lines = server.log_lines()
    assert [(x["n"], x["model"], x["protocol"], x["outcome"]) for x in lines] == [
        (1, "patient", "discharge.patient", "answered"),
        (2, "grader", "discharge.patient", "http_503"),
    ]
    assert len({x["key"] for x in lines}) == 2


@pytest.mark.eval
def test_rate_limit_retry_after_is_honoured_by_the_openai_client():
    # the openai client (its own 2 retries by default) waits Retry-After; Inspect's backoff does not read it
    with LoopbackServer(faults=[Fault("rate_limit", 1.0)], retry_after=0.6) as server:
        client = OpenAI(api_key="x", base_url=server.base_url, default_headers=TAGGED, max_retries=1)
        start = time.perf_counter()
        with pytest.raises(Exception, match="429"):
            client.chat.completions.create(model="patient", messages=PATIENT)
        assert time.perf_counter() - start >= 0.6 and server.requests == 2


def test_context_length_error_becomes_model_length_without_retries():
    # Inspect's openai-api provider maps OpenAI's context_length_exceeded 400 to a ModelOutput with
    # stop_reason="model_length" (not an exception, not retried): bedside's encounter then ends "error"
    messages = [ChatMessageSystem(content=PATIENT[0]["content"]), ChatMessageUser(content="x" * 400)]
    with LoopbackServer(context_limit=50) as server:
        model = get_model(
            "openai-api/loopback/patient", base_url=server.base_url, api_key="x", memoize=False, max_retries=0
        )
        output = asyncio.run(model.generate(messages, config=GenerateConfig(max_retries=3)))
        assert output.stop_reason == "model_length" and "maximum context length is 50 tokens" in output.completion
        assert server.requests == 1 and server.faults == {CONTEXT_LENGTH: 1}
        short = asyncio.run(model.generate(messages[:1] + [ChatMessageUser(content="Hi")]))
        assert short.stop_reason == "stop" and server.total_calls == 1


@pytest.mark.eval
def test_transport_faults_are_retried_by_inspect_and_counted(monkeypatch):
    # every transport fault once, then an answer: Inspect retries each (its own backoff, shortened)
    # and the server saw exactly one request per attempt (an attempt of 2 s: an answer on a busy
    # machine is never cut off and retried; the hang outlasts it). The 12 calls run side by side,
    # so their attempt timeouts overlap.
    with LoopbackServer(faults=[Fault(TRANSPORT_FAULTS, 0.5)], hang=4.0) as server:
        monkeypatch.setenv("LOOPBACK_BASE_URL", server.base_url)
        monkeypatch.setenv("BEDSIDE_LOOPBACK_URL", server.base_url)
        monkeypatch.setenv("LOOPBACK_API_KEY", "x")
        model = fast_model("patient")
        messages = [ChatMessageSystem(content=PATIENT[0]["content"])]
        config = GenerateConfig(max_retries=8, attempt_timeout=2)

        async def ask_all() -> list[ModelOutput]:
            asks = (
                model.generate([*messages, ChatMessageUser(content=f"Question {i}?")], config=config) for i in range(12)
            )
            return list(await asyncio.gather(*asks))

        outputs = asyncio.run(ask_all())
        assert all(o.stop_reason == "stop" and o.completion for o in outputs)
        assert server.total_calls == 12
        assert server.requests == 12 + sum(server.faults.values()) and server.faults
