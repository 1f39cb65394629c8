"""``bedside/human``'s desk without a browser: what a submitted reply must be (and the words of a refusal,
field by field), the journal of a run that answers a call already answered (and only its own run's,
unless asked), the work a person did, and the page's long poll (the browser tests, tests/human/, drive
the page itself)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from http import HTTPStatus

import pytest

from bedside.person_time import extend, length, person_seconds, union
from bedside.providers.human import call_id
from bedside.providers.human_desk import Desk, field_name, reply_problems
from bedside.providers.human_journal import Call, Journal, default_journal

SCHEMA = {"type": "object", "properties": {"failure": {"type": "boolean"}}, "required": ["failure"]}


def a_call(schema=None, text="Hello", run="run-1", case="c1") -> Call:
    messages = [{"role": "system", "text": "You are a judge."}, {"role": "user", "text": text}]
    return Call(
        id=call_id("t", case, 1, "x.judge", 0, messages),
        run=run,
        task="t",
        case=case,
        epoch=1,
        protocol="x.judge",
        role="judge",
        turn=1,
        attempt=0,
        messages=messages,
        schema=schema,
    )


def test_a_refused_reply_says_why_at_each_field():
    assert reply_problems("{}", SCHEMA, {}) == {"failure": "an answer is needed here"}
    assert reply_problems("[true]", SCHEMA, {}) == {"": "expected object"}
    assert reply_problems("yes", SCHEMA, {})[""].startswith("not JSON")
    assert reply_problems('{"failure": false}', SCHEMA, {}) == {}
    rated = {
        "type": "object",
        "properties": {
            "Q6.2": {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}}},
            "clarity": {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}}},
        },
    }
    problems = reply_problems('{"Q6.2": {"answer": "maybe"}, "clarity": {"score": 7}}', rated, {})
    assert problems == {"Q6.2/answer": "choose one of: yes, no", "clarity/score": "must be between 1 and 5"}
    # an array of rows: as many as the form's rows, one per question
    rows = {"type": "object", "properties": {"answers": {"type": "array", "items": {"type": "object"}}}}
    form = {"answers": {"rows": ["q1. one?", "q2. two?"]}}
    assert reply_problems('{"answers": [{}]}', rows, form) == {"answers": "2 answers expected, one per question"}
    assert reply_problems('{"answers": [{}, {}]}', rows, form) == {}


def test_a_refused_field_is_named_as_the_page_shows_it():
    graded = {"type": "string", "enum": ["yes", "no"]}
    reason = {"type": "string"}
    schema = {
        "type": "object",
        "properties": {
            "Q6.2": {"type": "object", "properties": {"answer": graded}, "required": ["answer"]},
            "naturalness": {
                "type": "object",
                "properties": {"score": {"type": "integer"}, "reason": reason},
                "required": ["score", "reason"],
            },
            "answers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"question": reason, "answer": {"anyOf": [reason, {"type": "null"}]}},
                    "required": ["question", "answer"],
                },
            },
            "turns": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"rating": graded, "comment": reason},
                    "required": ["rating"],
                },
            },
        },
    }
    form = {
        "answers": {"rows": [f"q{i}. ?" for i in range(1, 7)], "row_names": [f"q{i}" for i in range(1, 7)]},
        "answers/question": {"row_label": True},
        "turns": {"rows": ["[1] hi", "[3] bye"], "row_names": ["turn 1", "turn 3"]},
    }
    named = {
        path: field_name(path, schema, form) for path in ("Q6.2/answer", "naturalness/score", "naturalness/reason")
    }
    assert named == {
        "Q6.2/answer": "Q6.2",
        "naturalness/score": "naturalness",
        "naturalness/reason": "naturalness reason",
    }
    assert field_name("answers/5/answer", schema, form) == "q6" and field_name("answers", schema, form) == "answers"
    assert (
        field_name("turns/1/rating", schema, form) == "turn 3" and field_name("turns/1/comment", schema, {}) == "row 2"
    )
    # the eval's refusal of a reply names them so too
    rows = {"answers": [{"question": "q", "answer": "a"}] * 5 + [{"question": "q"}]}
    status, refusal = desk_refusal(schema, {k: v for k, v in form.items() if k.startswith("answers")}, rows)
    assert status == HTTPStatus.BAD_REQUEST and refusal["message"].endswith(": q6"), refusal


def desk_refusal(schema: dict, form: dict, reply: dict) -> tuple[HTTPStatus, dict]:
    desk = Desk(0)
    try:
        call = a_call(schema)
        call.form = form
        desk.pending[call.id] = call
        return desk.submit(call.id, json.dumps(reply))
    finally:
        desk.server.shutdown()


def test_the_journal_is_in_the_runs_log_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "elsewhere"))
    log = str(tmp_path / "runs" / "2026-12-07T10-00-00_discharge_abc.eval")
    assert default_journal("bedside/discharge", "abc", log) == tmp_path / "runs" / "human" / "discharge-abc.jsonl"
    # a remote log folder: the journal stays on this machine, in ./logs/human of the folder the eval runs in
    assert (
        default_journal("discharge", "abc", "s3://bucket/runs/x.eval")
        == tmp_path / "logs" / "human" / "discharge-abc.jsonl"
    )


def test_the_page_counts_the_runs_replies_and_cases_from_its_journal(tmp_path):
    path = tmp_path / "replies.jsonl"
    before = Journal(path)
    for case, (start, seconds) in {"c1": (100.0, 5.0), "c2": (200.0, 3.0)}.items():
        call = a_call(case=case)
        call.work = [[start, start + seconds]]
        before.record(call, "hello")
    other = a_call(run="run-2", text="another run's")
    other.work = [[0.0, 50.0]]
    before.record(other, "hi")
    before.record_case(
        "run-1", {"task": "t", "case": "c1", "epoch": 1, "state": "complete", "ending": "it ended", "detail": "scored"}
    )
    # a restarted eval of run-1 (a new desk): the replies and work before the crash count, not run-2's
    desk = Desk(0)
    try:
        desk.case_state("run-1", "t", "c2", 1, "running")  # the case the retried run plays again
        desk.journal(path, "run-1", None, "this_run")
        listing = desk.listing()
        assert listing["answered"] == 2 and listing["work_seconds"] == 8.0
        cases = {c["case"]: c for c in listing["session"]["cases"]}
        assert cases["c1"]["state"] == "complete" and cases["c1"]["ending"] == "it ended"
        assert cases["c2"]["state"] == "running"
        assert [c["case"] for c in listing["session"]["cases"]] == ["c1", "c2"]  # in the order first played
    finally:
        desk.server.shutdown()


def test_a_reply_is_on_disk_and_on_its_own_line_after_a_line_cut_short_by_a_crash(tmp_path, monkeypatch):
    path = tmp_path / "replies.jsonl"
    Journal(path).record(a_call(case="c1"), "first")
    with path.open("a") as f:
        f.write('{"id": "cut short')
    synced: list[int] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), fsync(fd))[1])
    Journal(path).record(a_call(case="c2"), "second")
    assert synced  # the reply was flushed to the disk before the page heard it was accepted
    assert sorted(e["reply"] for e in Journal(path).entries.values()) == ["first", "second"]
    assert len(path.read_text().splitlines()) == 3


def test_calls_keep_the_order_of_their_cases(tmp_path):
    desk = Desk(0)
    journal = desk.journal(tmp_path / "replies.jsonl", "run-1", None, "this_run")

    async def three_calls() -> list[str]:
        waiting = [asyncio.create_task(desk.answer(a_call(case="A"), journal, "this_run", True))]
        await asyncio.sleep(0.05)
        waiting.append(asyncio.create_task(desk.answer(a_call(case="B"), journal, "this_run", True)))
        await asyncio.sleep(0.05)
        waiting.append(asyncio.create_task(desk.answer(a_call(case="A", text="turn 2"), journal, "this_run", True)))
        await asyncio.sleep(0.05)
        order = [c["case"] for c in desk.listing()["pending"]]
        for task in waiting:
            task.cancel()
        return order

    try:
        assert asyncio.run(three_calls()) == ["A", "A", "B"]  # A's later call before B's: A keeps its place
    finally:
        desk.server.shutdown()


def test_the_call_key_is_the_exact_prompt():
    assert a_call().id == a_call().id
    assert a_call(text="Hello!").id != a_call().id


def test_person_time_is_the_union_of_working_intervals():
    work: list[list[float]] = []
    for at in (100.0, 102.0, 104.0, 130.0, 132.0):  # reports 2 s apart, then a pause longer than the gap
        extend(work, at)
    assert work == [[100.0, 104.0], [130.0, 132.0]] and length(work) == 6.0
    assert union([[0, 10], [5, 12], [20, 21]]) == [[0.0, 12.0], [20.0, 21.0]]
    # two calls open side by side count once; an output without intervals counts its seconds
    outputs = [
        {"human": True, "human_seconds": 10.0, "human_intervals": [[0, 10]]},
        {"human": True, "human_seconds": 7.0, "human_intervals": [[5, 12]]},
        {"human": True, "human_seconds": 3.0},
        {"human": False, "human_seconds": 99.0},
        None,
    ]
    assert person_seconds(outputs) == 15.0


def test_an_accepted_reply_is_journaled_and_answers_the_same_call_of_the_same_run(tmp_path):
    path = tmp_path / "replies.jsonl"
    desk = Desk(0)

    async def person_and_model() -> tuple[str, list, bool]:
        journal = desk.journal(path, "run-1", None, "this_run")
        waiting = asyncio.create_task(desk.answer(a_call(SCHEMA), journal, "this_run", True))
        while not desk.listing()["pending"]:
            await asyncio.sleep(0.05)
        [shown] = desk.listing()["pending"]
        assert shown["case"] == "c1" and shown["schema"] == SCHEMA
        status, refusal = desk.submit(shown["id"], "{}")
        assert status == HTTPStatus.BAD_REQUEST and refusal["errors"] == {"failure": "an answer is needed here"}
        desk.save_draft(shown["id"], '{"failure": fa')
        assert desk.listing()["drafts"] == {shown["id"]: '{"failure": fa'}
        desk.seen(shown["id"])
        assert desk.submit(shown["id"], '{"failure": false}')[0] == HTTPStatus.OK
        return await waiting

    reply, intervals, replayed = asyncio.run(person_and_model())
    assert (reply, replayed) == ('{"failure": false}', False) and length(intervals) >= 0
    [entry] = [json.loads(line) for line in path.read_text().splitlines()]
    assert entry["reply"] == '{"failure": false}' and entry["run"] == "run-1"
    state = json.loads((tmp_path / "replies.state").read_text())
    assert state["drafts"] == {} and state["port"] == desk.port  # the draft went with the reply; the port stays
    desk.server.shutdown()
    # a restarted eval of the same run (a new desk on the same journal) answers the same call at once
    again = Desk(0)
    journal = again.journal(path, "run-1", None, "this_run")
    assert asyncio.run(again.answer(a_call(SCHEMA), journal, "this_run", True))[::2] == ('{"failure": false}', True)
    assert again.listing()["pending"] == [] and any("answered from the journal" in n for n in again.session.replays)
    # another run sharing the journal is asked, unless it asks for the journal's replies (announced)
    other = a_call(SCHEMA, run="run-2")
    assert Journal(path).find(other, "this_run") is None
    assert Journal(path).find(other, "across_runs")["reply"] == '{"failure": false}'
    again.server.shutdown()


def test_a_call_keeps_the_work_done_on_it_before_a_crash(tmp_path):
    path = tmp_path / "replies.jsonl"
    desk = Desk(0)

    async def work_then_crash() -> None:
        journal = desk.journal(path, "run-1", None, "this_run")
        task = asyncio.create_task(desk.answer(a_call(), journal, "this_run", True))
        while not desk.listing()["pending"]:
            await asyncio.sleep(0.05)
        [shown] = desk.listing()["pending"]
        for _ in range(3):
            desk.seen(shown["id"])
            await asyncio.sleep(0.6)
        desk.seen(shown["id"])
        journal.save()
        task.cancel()

    asyncio.run(work_then_crash())
    desk.server.shutdown()
    again = Desk(0)

    async def resume() -> tuple[str, list, bool]:
        journal = again.journal(path, "run-1", None, "this_run")
        task = asyncio.create_task(again.answer(a_call(), journal, "this_run", True))
        while not again.listing()["pending"]:
            await asyncio.sleep(0.05)
        [shown] = again.listing()["pending"]
        assert shown["work_seconds"] >= 1.5  # the work before the crash, waiting for this call
        again.submit(shown["id"], "hello")
        return await task

    _, intervals, _ = asyncio.run(resume())
    again.server.shutdown()
    assert length(intervals) >= 1.5


@pytest.mark.eval
def test_the_pages_request_is_held_until_the_pending_calls_change(tmp_path):
    desk = Desk(0)
    journal = desk.journal(tmp_path / "replies.jsonl", "run-1", None, "this_run")
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
            waiting = asyncio.create_task(desk.answer(a_call(), journal, "this_run", True))
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
    again = Desk(0)
    assert again.listing()["version"] != first["version"]
    again.server.shutdown()


@pytest.mark.parametrize("options", [{"journal": "x.jsonl"}, {"port": 8765}])
def test_an_option_of_bedside_human_given_to_another_model_is_one_line(options):
    from bedside.compat import PrerequisiteError
    from bedside.providers.api import BedsideAPI

    with pytest.raises(PrerequisiteError) as refused:
        BedsideAPI("scripted", **options)
    [option] = options
    message = str(refused.value)
    assert "\n" not in message and f"takes no option {option!r}" in message
    assert "--model-role 'grader={model: bedside/human, model_args:" in message
    with pytest.raises(PrerequisiteError, match="unknown option"):
        BedsideAPI("human", jounral="x.jsonl")
