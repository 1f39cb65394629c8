"""The loopback server's Batch API (``tests/loopback/batches.py``), through OpenAI's own client: files up and
down, a batch's life (validating, in progress, its end), its result and error files in OpenAI's shapes, and
what fails: a request fault inside a batch, a batch that expires half done, one that fails validation, a
cancelled one. Inspect's batch client against it: ``tests/test_batch_judges.py``."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from openai import BadRequestError, NotFoundError, OpenAI
from openai.types import Batch
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from loopback_channel import BODY_KEY
from tests.loopback.requests import NOT_JSON_REPLY, Fault
from tests.loopback.server import UNKNOWN_REPLY, LoopbackServer

PROTOCOL = "discharge.patient"  # a protocol whose script answers any prompt


def line(custom_id: str, model: str = "judge", text: str = "Rate this session.", **body: Any) -> dict[str, Any]:
    """A Chat Completions request line of a batch input file."""
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": text}], **body},
    }


def submit(client: OpenAI, lines: list[dict[str, Any]], endpoint: str = "/v1/chat/completions") -> Batch:
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    uploaded = client.files.create(file=("batch.jsonl", io.BytesIO(data)), purpose="batch")
    return client.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h")


def results(client: OpenAI, file_id: str | None) -> dict[str, dict[str, Any]]:
    """The lines of a result file, by custom id."""
    if file_id is None:
        return {}
    text = client.files.content(file_id).read().decode()
    return {record["custom_id"]: record for record in map(json.loads, text.splitlines())}


def finished(client: OpenAI, batch: Batch) -> Batch:
    for _ in range(200):
        batch = client.batches.retrieve(batch.id)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
        time.sleep(0.02)
    raise AssertionError(f"batch {batch.id} still {batch.status}")


def client_of(server: LoopbackServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="loopback", max_retries=0)


def test_a_batch_is_answered_line_by_line_as_the_live_endpoint_answers():
    with LoopbackServer() as server:
        client = client_of(server)
        tagged = line("b", **{BODY_KEY: {"name": PROTOCOL, "situation": {}}})
        inspect_style = line("c", extra_body={BODY_KEY: {"name": PROTOCOL, "situation": {}}})  # Inspect's batcher
        batch = submit(client, [line("a"), tagged, inspect_style])
        assert batch.status == "validating" and batch.endpoint == "/v1/chat/completions"
        done = finished(client, batch)
        assert done.status == "completed" and done.error_file_id is None
        assert done.request_counts.model_dump() == {"total": 3, "completed": 3, "failed": 0}
        out = results(client, done.output_file_id)
        assert set(out) == {"a", "b", "c"}
        for record in out.values():
            assert record["error"] is None and record["response"]["status_code"] == 200
            ChatCompletion.model_validate(record["response"]["body"])  # what Inspect's batcher reads
        assert out["a"]["response"]["body"]["choices"][0]["message"]["content"] == UNKNOWN_REPLY
        # the protocol rides in the body (or its extra_body), as the live endpoint reads it from the header
        assert server.calls == {"<unknown>": 1, PROTOCOL: 2}
        assert out["b"]["response"]["body"]["choices"][0]["message"]["content"] != UNKNOWN_REPLY
        assert server.found_by == {"<unknown>": 1, "body": 2}
        # the input and the output file stay stored until deleted, as at a provider
        assert {f["purpose"] for f in server.batches.stored} == {"batch", "batch_output"}
        assert client.files.delete(done.input_file_id).deleted
        assert [f["purpose"] for f in server.batches.stored] == ["batch_output"]
        stats = server.stats()
        assert stats["batches"] == {"completed": 1} and stats["batch_requests"] == {"answered": 3}
        assert stats["files"] == {"batch": 1, "batch_output": 1}


def test_a_batch_ends_batch_delay_seconds_after_its_creation():
    with LoopbackServer(batch_delay=0.3) as server:
        client = client_of(server)
        batch = submit(client, [line("a")])
        assert client.batches.retrieve(batch.id).status == "in_progress"
        time.sleep(0.35)
        assert client.batches.retrieve(batch.id).status == "completed"
        assert server.stats()["retrievals"] == {batch.id: 2}


def test_responses_api_lines_get_response_objects():
    with LoopbackServer() as server:
        client = client_of(server)
        request = {
            "custom_id": "r",
            "method": "POST",
            "url": "/v1/responses",
            "body": {
                "model": "gpt-5.5",
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
                "extra_body": {BODY_KEY: {"name": PROTOCOL, "situation": {}}},
            },
        }
        done = finished(client, submit(client, [request], endpoint="/v1/responses"))
        body = results(client, done.output_file_id)["r"]["response"]["body"]
        response = Response.model_validate(body)
        assert response.output_text and response.usage.input_tokens > 0
        assert server.calls == {PROTOCOL: 1}


def test_a_request_fault_fails_that_request_only_in_openais_error_file_shape():
    faults = [
        Fault("http_500", models="broken"),
        Fault("context_length", models="long"),
        Fault("not_json", models="prose"),
    ]
    with LoopbackServer(faults=faults) as server:
        client = client_of(server)
        lines = [line("ok"), line("broken", model="broken"), line("long", model="long"), line("prose", model="prose")]
        done = finished(client, submit(client, lines))
        assert done.status == "completed"
        assert done.request_counts.model_dump() == {"total": 4, "completed": 2, "failed": 2}
        out, errors = results(client, done.output_file_id), results(client, done.error_file_id)
        assert set(out) == {"ok", "prose"} and set(errors) == {"broken", "long"}
        assert out["prose"]["response"]["body"]["choices"][0]["message"]["content"] == NOT_JSON_REPLY
        # github.com/openai/openai-openapi/issues/302: the status and error body under "response", "error" null
        broken = errors["broken"]
        assert broken["error"] is None and broken["response"]["status_code"] == 500
        assert broken["response"]["body"]["error"]["type"] == "server_error"
        long = errors["long"]["response"]
        assert long["status_code"] == 400 and long["body"]["error"]["code"] == "context_length_exceeded"
        assert server.faults == {"http_500": 1, "context_length": 1, "not_json": 1}
        assert server.stats()["batch_requests"] == {"answered": 2, "status_500": 1, "status_400": 1}


def test_an_expired_batch_answered_every_other_request():
    with LoopbackServer(faults=["batch_expired"]) as server:
        client = client_of(server)
        done = finished(client, submit(client, [line(str(i)) for i in range(5)]))
        assert done.status == "expired" and done.expired_at is not None
        assert done.request_counts.model_dump() == {"total": 5, "completed": 3, "failed": 2}
        assert set(results(client, done.output_file_id)) == {"0", "2", "4"}
        errors = results(client, done.error_file_id)
        assert set(errors) == {"1", "3"}
        assert all(e["response"] is None and e["error"]["code"] == "batch_expired" for e in errors.values())


def test_a_batch_that_fails_validation_answers_nothing():
    with LoopbackServer(faults=["batch_failed"]) as server:
        client = client_of(server)
        done = finished(client, submit(client, [line("a"), line("b")]))
        assert done.status == "failed" and done.output_file_id is None and done.error_file_id is None
        assert [e.line for e in done.errors.data] == [1, 2]
        assert server.total_calls == 0


def test_a_batch_fault_is_drawn_per_batch_and_matches_the_batchs_model():
    with LoopbackServer(faults=[Fault("batch_failed", 1.0, models="doomed")]) as server:
        client = client_of(server)
        assert finished(client, submit(client, [line("a", model="doomed")])).status == "failed"
        assert finished(client, submit(client, [line("a", model="fine")])).status == "completed"
    with LoopbackServer(faults=["batch_expired:0.5"], fault_seed=3) as server:
        client = client_of(server)
        statuses = {finished(client, submit(client, [line("a"), line("b")])).status for _ in range(12)}
        assert statuses == {"completed", "expired"}  # the same file content, a fresh draw each time


def test_a_cancelled_batch_answers_nothing():
    with LoopbackServer(batch_delay=30) as server:
        client = client_of(server)
        batch = submit(client, [line("a"), line("b")])
        assert client.batches.cancel(batch.id).status == "cancelling"
        done = finished(client, batch)
        assert done.status == "cancelled" and done.output_file_id is None
        errors = results(client, done.error_file_id)
        assert {e["error"]["code"] for e in errors.values()} == {"batch_cancelled"} and server.total_calls == 0


def test_bad_batch_requests_are_refused_as_openai_refuses_them():
    with LoopbackServer() as server:
        client = client_of(server)
        with pytest.raises(BadRequestError, match="no such file"):
            client.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
        uploaded = client.files.create(file=("b.jsonl", io.BytesIO(b"{}\n")), purpose="batch")
        with pytest.raises(BadRequestError, match="endpoint"):
            client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h")
        with pytest.raises(NotFoundError):
            client.batches.retrieve("batch_nope")
        with pytest.raises(NotFoundError):
            client.files.content("file-nope")


def test_a_rule_holds_batch_faults_or_request_faults_not_both():
    assert Fault.parse("batch_expired:0.5:gpt-4.1").kinds == ("batch_expired",)
    with pytest.raises(ValueError, match="holds no request fault"):
        Fault("batch_expired,http_500")
    # a batch fault rule never fires on a live request
    with LoopbackServer(faults=["batch_failed"]) as server:
        reply = client_of(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == UNKNOWN_REPLY and not server.faults
