"""``bedside/human``'s desk without a browser: what a submitted reply must be, and the journal that answers a
call already answered (the browser tests, tests/human/, drive the page itself)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from http import HTTPStatus

import pytest

from bedside.providers.human import Call, Desk, call_id, schema_problem

SCHEMA = {"type": "object", "properties": {"failure": {"type": "boolean"}}, "required": ["failure"]}


def a_call(schema=None, text="Hello") -> Call:
    messages = [{"role": "system", "text": "You are a judge."}, {"role": "user", "text": text}]
    return Call(
        id=call_id("t", "c1", 1, "x.judge", 0, messages),
        task="t",
        case="c1",
        epoch=1,
        protocol="x.judge",
        role="judge",
        turn=1,
        attempt=0,
        messages=messages,
        schema=schema,
    )


def test_a_form_reply_must_be_the_schemas_object():
    assert schema_problem("{}", SCHEMA) == "missing field(s): failure"
    assert schema_problem("[true]", SCHEMA) == "the reply must be a JSON object"
    assert schema_problem("yes", SCHEMA).startswith("not JSON")
    assert schema_problem('{"failure": false}', SCHEMA) is None


def test_the_call_key_is_the_exact_prompt():
    assert a_call().id == a_call().id
    assert a_call(text="Hello!").id != a_call().id


def test_an_accepted_reply_is_journaled_and_answers_the_same_call_again(tmp_path):
    journal = tmp_path / "replies.jsonl"
    desk = Desk(0, journal)

    async def person_and_model() -> tuple[str, float, bool]:
        waiting = asyncio.create_task(desk.answer(a_call(SCHEMA)))
        while not desk.listing()["pending"]:
            await asyncio.sleep(0.05)
        [shown] = desk.listing()["pending"]
        assert shown["case"] == "c1" and shown["schema"] == SCHEMA
        assert desk.submit(shown["id"], "{}") == (HTTPStatus.BAD_REQUEST, "missing field(s): failure")
        desk.save_draft(shown["id"], '{"failure": fa')
        assert desk.listing()["drafts"] == {shown["id"]: '{"failure": fa'}
        assert desk.submit(shown["id"], '{"failure": false}')[0] == HTTPStatus.OK
        return await waiting

    reply, seconds, replayed = asyncio.run(person_and_model())
    assert (reply, replayed) == ('{"failure": false}', False) and seconds > 0
    assert json.loads(journal.read_text())["reply"] == '{"failure": false}'
    assert json.loads(journal.with_suffix(".drafts.json").read_text()) == {}  # the draft went with the reply
    desk.server.shutdown()
    # a restarted eval (a new desk on the same journal) answers the same call from the journal, at once
    again = Desk(0, journal)
    assert asyncio.run(again.answer(a_call(SCHEMA)))[::2] == ('{"failure": false}', True)
    assert again.listing()["pending"] == []
    again.server.shutdown()


@pytest.mark.eval
def test_the_pages_request_is_held_until_the_pending_calls_change(tmp_path):
    desk = Desk(0, tmp_path / "replies.jsonl")
    try:
        first = desk.listing()
        assert first["pending"] == []
        # nothing changes: the request is held for the whole wait and returns the same version
        start = time.perf_counter()
        assert desk.listing(first["version"], wait=0.3)["version"] == first["version"]
        assert time.perf_counter() - start >= 0.3

        # a call opened while the page waits: the held request returns with it, long before the wait ends
        async def a_call_opens_while_the_page_waits() -> tuple[dict, float]:
            start = time.perf_counter()
            held = asyncio.create_task(asyncio.to_thread(desk.listing, first["version"], 30.0))
            await asyncio.sleep(0.2)
            waiting = asyncio.create_task(desk.answer(a_call()))
            shown = await held
            seconds = time.perf_counter() - start
            assert desk.submit(shown["pending"][0]["id"], "hi")[0] == HTTPStatus.OK
            await waiting
            return shown, seconds

        shown, seconds = asyncio.run(a_call_opens_while_the_page_waits())
        assert [c["case"] for c in shown["pending"]] == ["c1"] and seconds < 10
        assert shown["version"] != first["version"]
        # the accepted reply is a change too
        assert desk.listing(shown["version"], wait=5)["pending"] == []
        # over HTTP, as the page asks
        url = f"{desk.url}api/pending?after={shown['version']}"
        with urllib.request.urlopen(url.replace(shown["version"], "unknown"), timeout=5) as answer:
            assert json.load(answer)["version"] == desk.version  # another version: answered at once
    finally:
        desk.server.shutdown()
    # a restarted eval's desk never has the version a page saw before
    again = Desk(0, tmp_path / "replies.jsonl")
    assert again.listing()["version"] != first["version"]
    again.server.shutdown()
