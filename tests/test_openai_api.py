"""Every bedside task through Inspect's real ``openai-api/...`` provider, against the loopback server.

The models are ``openai-api/loopback/<role>``, with the endpoint and key read from
``LOOPBACK_BASE_URL`` / ``LOOPBACK_API_KEY`` as for a user's API key or a vLLM server: HTTP, the
``openai`` client, Inspect's request and response conversion (see ``tests/loopback_helpers.py``; the
last test runs the literal ``inspect eval`` command line). The server sees only what a real endpoint
sees (no protocol tags), so these runs also check that every prompt announces its protocol.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model

from bedside.tasks.cpb import cpb, cpb_control
from bedside.tasks.discharge import discharge
from bedside.tasks.medsp import medsp
from tests import forked
from tests.conftest import REPO, shared_path, store
from tests.loopback.server import UNKNOWN, UNKNOWN_REPLY, LoopbackServer
from tests.loopback_helpers import (
    LOOPBACK,
    assert_answered_as_tagged,
    assert_scored,
    assert_through_openai_api,
    loopback_env,
    model_events,
    run_loopback,
)

INSPECT = str(Path(sys.executable).parent / "inspect")


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running, loopback_env(running):
        yield running


# ---------------------------------------------------------------------------------------------
# the server on its own


def _post(url: str, body: dict) -> tuple[int, dict, float]:
    async def go() -> tuple[int, dict, float]:
        async with aiohttp.ClientSession() as client:
            start = time.perf_counter()
            async with client.post(f"{url}/chat/completions", json=body) as response:
                return response.status, await response.json(), time.perf_counter() - start

    return asyncio.run(go())


#: what bedside's calls send to an openai-api server with every discharge.patient call
PATIENT_HEADER = {"X-Bedside-Protocol": "discharge.patient"}


@pytest.mark.eval
def test_plain_chat_completion_with_the_openai_client():
    from openai import OpenAI

    with LoopbackServer() as server:
        client = OpenAI(api_key="x", base_url=server.base_url)
        messages = [
            {"role": "system", "content": "You are roleplaying as a real hospital patient. Your name is Ann."},
            {"role": "user", "content": "Hello, I am your nurse today."},
        ]
        # the protocol travels as a header (as bedside's openai-api calls send it), never in the prompt
        completion = client.chat.completions.create(
            model="patient", messages=messages, seed=3, extra_headers=PATIENT_HEADER
        )
        untagged = client.chat.completions.create(model="patient", messages=messages, seed=3)
        assert untagged.choices[0].message.content == UNKNOWN_REPLY
        assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
        assert completion.model == "patient" and isinstance(completion.created, int)
        [choice] = completion.choices
        assert choice.finish_reason == "stop" and choice.message.role == "assistant"
        assert choice.message.content and choice.message.content != UNKNOWN_REPLY
        usage = completion.usage
        prompt_chars = sum(len(m["content"]) for m in messages)
        assert usage.prompt_tokens == prompt_chars // 4 + 1
        assert usage.completion_tokens == len(choice.message.content) // 4 + 1
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
        # deterministic: the same request (and seed) gives the same reply
        again = client.chat.completions.create(model="patient", messages=messages, seed=3, extra_headers=PATIENT_HEADER)
        assert again.choices[0].message.content == choice.message.content

        # a prompt of no bedside protocol gets the fixed reply; content parts are read as text
        other = client.chat.completions.create(
            model="x", messages=[{"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]}]
        )
        assert other.choices[0].message.content == UNKNOWN_REPLY
        assert server.calls == Counter({"discharge.patient": 2, UNKNOWN: 2})

        assert {m.id for m in client.models.list().data} >= {"educator", "patient", "grader"}

        # streaming, for providers run with -M stream=true
        stream = client.chat.completions.create(
            model="patient",
            messages=messages,
            seed=3,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=PATIENT_HEADER,
        )
        chunks = list(stream)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == choice.message.content
        assert chunks[-1].usage.total_tokens == usage.total_tokens


def test_inspect_provider_streaming():
    # -M stream=true: Inspect's openai-api provider reads the server-sent events
    messages = [
        ChatMessageSystem(content="You are roleplaying as a real hospital patient. Your name is Ann."),
        ChatMessageUser(content="Hello, I am your nurse today."),
    ]
    with LoopbackServer() as server:
        for stream in (True, False):
            model = get_model(
                f"{LOOPBACK}/patient", base_url=server.base_url, api_key="x", memoize=False, stream=stream
            )
            output = asyncio.run(model.generate(messages, config=GenerateConfig(extra_headers=PATIENT_HEADER)))
            assert output.stop_reason == "stop" and output.completion != UNKNOWN_REPLY
            assert output.usage.input_tokens > 0 and output.usage.output_tokens > 0
            if stream:
                streamed = output
        assert output.completion == streamed.completion and output.usage == streamed.usage
        assert server.calls == Counter({"discharge.patient": 2})


@pytest.mark.eval
def test_malformed_request_is_a_400():
    with LoopbackServer() as server:
        status, body, _ = _post(server.base_url, {"model": "x"})
        assert status == 400 and body["error"]["type"] == "invalid_request_error"
        assert server.total_calls == 0


@pytest.mark.eval
def test_response_format_name_selects_the_protocol():
    with LoopbackServer() as server:
        body = {
            "model": "patient",
            "messages": [{"role": "user", "content": "Say something."}],  # no marker in the prompt
            "response_format": {"type": "json_schema", "json_schema": {"name": "discharge_patient", "schema": {}}},
        }
        status, reply, _ = _post(server.base_url, body)
        assert status == 200 and reply["choices"][0]["message"]["content"] != UNKNOWN_REPLY
        assert server.calls == Counter({"discharge.patient": 1})


@pytest.mark.eval
def test_latency_is_honoured():
    with LoopbackServer(latency=0.2) as server:
        status, _, elapsed = _post(server.base_url, {"model": "x", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and elapsed >= 0.2
    with LoopbackServer(latency=0.2, jitter=0.05) as server:
        delays = [server._delay() for _ in range(200)]
        assert all(0.15 <= d <= 0.25 for d in delays) and len(set(delays)) > 1


def test_unknown_scripted_option_is_refused_before_starting():
    with pytest.raises(ValueError, match="unknown option"):
        LoopbackServer(options={"no_such_option": 1})


# ---------------------------------------------------------------------------------------------
# the tasks through openai-api/loopback/<role>

DISCHARGE_JUDGES = {
    "discharge.judge_quality",
    "discharge.judge_checklist",
    "discharge.judge_reference",
    "discharge.judge_comprehension",
    "discharge.judge_factual",
}


@pytest.mark.eval
def test_discharge_through_openai_api(server, tmp_path):
    task = discharge(min_turns=4, max_turns=30, cache_references=False)
    log, calls = run_loopback(server, task, ["patient", "monitor", "grader"], tmp_path, limit=2)
    assert_scored(log, 2)
    assert_through_openai_api(log, {"patient", "monitor", "grader"})
    for sample in log.samples:
        events = model_events(sample)
        assert assert_answered_as_tagged(events) == len(events)  # every DischargeBench call is tagged
        assert sample.store["EncounterStore:end_reason"] == "clean_complete"
        rec = store(sample)
        assert len(rec["history"]) >= 4 and rec["role_fallbacks"] == []
        assert sample.scores["encounter_outcome"].value["clean_complete"] == 1.0
    # the server answered every role's protocols, each from the model bound to that role
    assert calls == {
        "educator": {"discharge.educator"},
        "patient": {"discharge.patient", "discharge.comprehension"},
        "monitor": {"discharge.monitor"},
        "grader": DISCHARGE_JUDGES,
    }


@pytest.mark.eval
def test_discharge_structured_output_through_openai_api(server, tmp_path):
    # -T structured_output=true: JSON replies are requested with a json_schema response_format,
    # whose name names the protocol (every call also names it in the X-Bedside-Protocol header)
    before = Counter(server.found_by)
    task = discharge(min_turns=4, max_turns=30, cache_references=False, structured_output=True)
    log, calls = run_loopback(server, task, ["patient", "monitor", "grader"], tmp_path, limit=1)
    assert_scored(log, 1)
    assert_through_openai_api(log, {"patient", "monitor", "grader"})
    [sample] = log.samples
    assert sample.store["EncounterStore:end_reason"] == "clean_complete"
    found_by = Counter(server.found_by) - before
    assert found_by["response_format"] > 0 and found_by["header"] > 0 and UNKNOWN not in found_by
    schema_calls = [e for e in model_events(sample) if e.config.response_schema is not None]
    assert len(schema_calls) == found_by["response_format"]
    assert calls["patient"] == {"discharge.patient", "discharge.comprehension"}


@pytest.mark.eval
def test_medsp_through_openai_api(server, tmp_path):
    log, calls = run_loopback(server, medsp(), ["patient", "environment", "grader"], tmp_path, limit=2)
    assert_scored(log, 2)
    assert_through_openai_api(log, {"patient", "environment", "grader"})
    assert calls == {
        "educator": {"medsp.examinee"},
        "patient": {"medsp.patient"},
        "environment": {"medsp.environment"},
        "grader": {"medsp.evaluator"},
    }


@pytest.mark.eval
@pytest.mark.shared
@pytest.mark.parametrize(
    ("make_task", "judge"),
    [(cpb, "cpb.failure_judge"), (cpb_control, "cpb.overreaction_judge")],
    ids=["cpb", "control"],
)
def test_cpb_through_openai_api(server, tmp_path, make_task, judge):
    data = shared_path("data", "cpb-bench")
    log, calls = run_loopback(server, make_task(data=str(data)), ["grader"], tmp_path, limit=3)
    assert_scored(log, 3)
    assert_through_openai_api(log, {"grader"})
    # the doctor (model under test) answers doctor prompts only; the grader judges
    assert set(calls) == {"educator", "grader"}, calls
    assert calls["educator"] and all(name.startswith("cpb.doctor") for name in calls["educator"]), calls
    assert calls["grader"] == {judge}, calls


@pytest.mark.eval
def test_inspect_cli_against_a_standalone_server(tmp_path):
    # what a user types: `python -m tests.loopback` in one process, `inspect eval` in another
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.loopback", "--port", "0", "--latency", "0.001"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        banner = [server.stdout.readline() for _ in range(4)]
        base_url = banner[0].split()[-1]
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1"), banner
        assert any(f"LOOPBACK_BASE_URL={base_url}" in line for line in banner), banner
        env = {**os.environ, "LOOPBACK_API_KEY": "x", "LOOPBACK_BASE_URL": base_url, "BEDSIDE_LOOPBACK_URL": base_url}
        command = [
            INSPECT,
            "eval",
            "bedside/medsp",
            "--model",
            f"{LOOPBACK}/educator",
            "--model-role",
            f"patient={LOOPBACK}/patient",
            "--model-role",
            f"environment={LOOPBACK}/environment",
            "--model-role",
            f"grader={LOOPBACK}/grader",
            "--limit",
            "1",
            "--log-dir",
            str(tmp_path),
            "--display",
            "none",
        ]
        proc = forked.run(command, cwd=REPO, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
    [log_file] = list(tmp_path.glob("*.eval"))
    log = read_eval_log(str(log_file))
    assert log.status == "success" and log.eval.model == f"{LOOPBACK}/educator"
    assert_scored(log, 1)
    assert {e.role for e in model_events(log.samples[0])} == {None, "patient", "environment", "grader"}
