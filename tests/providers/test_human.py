"""``bedside/human``'s desk without a browser: what a submitted reply must be, and the journal that answers a
call already answered (the browser tests, tests/human/, drive the page itself)."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus

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
