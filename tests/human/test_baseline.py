"""A run with a person as the educator is a normal log: in a sweep's leaderboard it is the row labelled
``human``, with its n and interval, and paired differences against each model on the shared cases. The
person is played here by a thread posting to the page's API (the browser tests drive the page itself)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
from inspect_ai import eval

from bedside.reporting.load import HUMAN_LABEL, load
from bedside.reporting.sweep import case_values, leaderboard
from tests.human.test_browser import discharge_answer, free_port

pytestmark = pytest.mark.eval

ROLES = {r: "bedside/scripted" for r in ("patient", "monitor", "grader")}


def answer_calls(url: str, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            pending = json.load(urllib.request.urlopen(url + "api/pending", timeout=2))["pending"]
        except OSError:
            time.sleep(0.3)
            continue
        for call in pending:
            reply = discharge_answer(call)
            text = reply if isinstance(reply, str) else json.dumps(reply)
            body = json.dumps({"id": call["id"], "text": text}).encode()
            urllib.request.urlopen(
                urllib.request.Request(url + "api/reply", body, {"Content-Type": "application/json"})
            )
        time.sleep(0.2)


def test_the_human_run_is_a_leaderboard_row_with_paired_differences(tmp_path):
    port = free_port()
    stop = threading.Event()
    person = threading.Thread(target=answer_calls, args=(f"http://127.0.0.1:{port}/", stop), daemon=True)
    person.start()
    try:
        [human] = eval(
            "bedside/discharge",
            model="bedside/human",
            model_args={"port": port, "journal": str(tmp_path / "j.jsonl")},
            model_roles=ROLES,
            limit=3,
            task_args={"min_turns": 4},
            log_dir=str(tmp_path / "human"),
            display="none",
        )
    finally:
        stop.set()
    [scripted] = eval(
        "bedside/discharge",
        model="bedside/scripted",
        model_roles=ROLES,
        limit=2,
        task_args={"min_turns": 4},
        log_dir=str(tmp_path / "scripted"),
        display="none",
    )
    assert human.status == scripted.status == "success"
    ranking, pairs = leaderboard(case_values(load([human.location, scripted.location])))
    key = "tcs"  # the topic checklist score
    rows = ranking[ranking["key"] == key]
    assert set(rows["model"]) == {HUMAN_LABEL, "bedside/scripted"}
    mine = rows[rows["model"] == HUMAN_LABEL].iloc[0]
    assert mine["n"] == 3 and mine["ci_lower"] <= mine["mean"] <= mine["ci_upper"]
    pair = pairs[pairs["key"] == mine["key"]].iloc[0]
    assert {pair["model_a"], pair["model_b"]} == {HUMAN_LABEL, "bedside/scripted"}
    assert pair["n_pairs"] == 2  # only the cases both have
