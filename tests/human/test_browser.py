"""``bedside/human`` in a real browser: headless Chromium (Debian's package) opens the page the eval serves,
types the person's replies (the educator and the patient of a DischargeBench session, a CPB doctor and
its judge, a MedSP examinee) and submits them with Ctrl+Enter; the eval completes and scores. A session
killed mid-way resumes with ``inspect eval-retry`` without asking an accepted reply again, and with the
text typed before the crash still in the box.

Screenshots go to ``BEDSIDE_SCREENS`` (when set): the page at a patient turn and at a judge form."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import read_eval_log

from tests import forked
from tests.conftest import REPO
from tests.human.cdp import CHROMIUM, Browser

INSPECT = str(Path(sys.executable).with_name("inspect"))
SCREENS = Path(os.environ["BEDSIDE_SCREENS"]) if os.environ.get("BEDSIDE_SCREENS") else None

pytestmark = [
    pytest.mark.eval,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="/usr/bin/chromium is absent, so bedside/human's page was not opened in a browser: install Debian's "
        "chromium (apt-get install -y chromium; the Makefile's test target does it)",
    ),
]

Answer = Callable[[dict[str, Any]], "str | dict[str, Any] | None"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Process = forked.Forked | subprocess.Popen[str]
STARTED: list[Process] = []


@pytest.fixture(autouse=True)
def stop_leftovers():
    """An eval a failed test left waiting for the person is stopped (its whole process group)."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def start(args: list[str], tmp: Path, port: int) -> Process:
    command = [INSPECT, *args, "--log-dir", str(tmp / "logs"), "--display", "plain"]
    command += ["-M", f"port={port}", "-M", f"journal={tmp / 'replies.jsonl'}"] if args[0] == "eval" else []
    # the eval runs as its own process (a fork of the warm server: tests/forked.py), in its own session
    proc = forked.start(
        command, cwd=REPO, env={**os.environ, "INSPECT_LOG_DIR": str(tmp / "logs")}, stderr=subprocess.STDOUT
    )
    STARTED.append(proc)
    return proc


async def served(url: str, proc: Process, timeout: float = 120) -> None:
    """Waits until the eval's page answers (the server starts at the role's first call)."""
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()[-3000:] if proc.stdout else "the eval exited"
        try:
            urllib.request.urlopen(url + "api/pending", timeout=2).read()
            return
        except OSError:
            await asyncio.sleep(0.3)
    raise TimeoutError(f"nothing served at {url}")


async def shown_call(browser: Browser) -> dict[str, Any] | None:
    return await browser.eval("shownId ? calls.find(c => c.id === shownId) : null")


async def fill(browser: Browser, reply: str | dict[str, Any]) -> None:
    """Types ``reply`` as a person would: into the reply box, or field by field into the form."""
    if isinstance(reply, str):
        await browser.eval("document.getElementById('text').focus()")
        await browser.type(reply)
        return
    for name, value in reply.items():
        selector = json.dumps(f'[name="reply.{name}"]')
        kind = await browser.eval(f"document.querySelector({selector}).tagName")
        if kind == "SELECT":
            await browser.eval(
                f"(e => {{ e.value = {json.dumps(json.dumps(value))}; e.dispatchEvent(new Event('change', {{bubbles: true}})); }})"
                f"(document.querySelector({selector}))"
            )
        else:
            await browser.eval(f"(e => {{ e.focus(); e.value = ''; }})(document.querySelector({selector}))")
            await browser.type("\n".join(value) if isinstance(value, list) else str(value))


async def play(
    url: str,
    proc: Process,
    answer: Answer,
    profile: Path,
    shots: dict[str, Callable[[dict[str, Any]], bool]] | None = None,
    stop_after: int | None = None,
    on_call: Callable[[Browser, dict[str, Any]], Any] | None = None,
) -> list[dict[str, Any]]:
    """Answers every call the page shows until the eval exits (or ``stop_after`` replies, leaving the
    next call shown); returns the calls answered."""
    answered: list[dict[str, Any]] = []
    shots = dict(shots or {})
    await served(url, proc)
    async with Browser(profile) as browser:
        await browser.goto(url)
        await browser.wait_for("typeof shownId !== 'undefined'")
        deadline = time.time() + 300
        while proc.poll() is None and time.time() < deadline:
            call = await shown_call(browser)
            if call is None:
                await asyncio.sleep(0.05)
                continue
            if stop_after is not None and len(answered) >= stop_after:
                if on_call is not None:
                    await on_call(browser, call)
                return answered
            for name, wanted in list(shots.items()):
                if SCREENS is not None and wanted(call):
                    await browser.screenshot(SCREENS / f"{name}.png")
                    del shots[name]
            reply = answer(call)
            assert reply is not None, f"no answer scripted for {call['protocol']} turn {call['turn']}"
            await fill(browser, reply)
            await browser.ctrl_enter()
            note = await browser.wait_for(
                f"shownId !== {json.dumps(call['id'])} || document.getElementById('message').textContent"
            )
            assert note is True, f"the page refused the reply: {note}"
            answered.append(call)
        assert proc.poll() is not None, "the eval did not finish"
    return answered


def finished(proc: Process, tmp: Path) -> Any:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    [location] = sorted((tmp / "logs").glob("*.eval"), key=lambda p: p.stat().st_mtime)[-1:]
    log = read_eval_log(str(location))
    assert log.status == "success", out[-3000:]
    return log


def human_outputs(log: Any) -> list[Any]:
    return [
        e.output
        for s in log.samples
        for e in s.events
        if e.event == "model" and e.output is not None and e.output.model == "bedside/human"
    ]


EDUCATOR = [
    "Hello, I'm your discharge educator. You had an operation on your bowel, and it went well.",
    "Please take your medicines exactly as the list says, and do not lift anything heavy for a few weeks.",
    "Call your doctor if you get a fever, bleeding or bad belly pain. Keep your follow-up visit.",
    "Any more questions? If not, you're all set to go home. Take care!",
]


def discharge_answer(call: dict[str, Any]) -> str | dict[str, Any] | None:
    if call["protocol"] == "discharge.educator":
        return EDUCATOR[min(call["turn"], len(EDUCATOR)) - 1]
    if call["protocol"] == "discharge.comprehension":  # the patient answers the comprehension questions
        return {"utterance": "I take my medicines as listed and call my doctor if I get a fever."}
    if call["protocol"] == "discharge.patient":
        said = call["messages"][-1]["text"].lower()
        return {"utterance": "Thank you, goodbye!" if "take care" in said else "Okay. What should I watch for?"}
    return None


DISCHARGE = ["eval", "bedside/discharge", "-T", "min_turns=4", "--limit", "1"]
SCRIPTED = ["--model-role", "monitor=bedside/scripted", "--model-role", "grader=bedside/scripted"]


def test_a_person_plays_educator_and_patient_of_a_discharge_session(tmp_path):
    port = free_port()
    args = [*DISCHARGE, "--model", "bedside/human", "--model-role", "patient=bedside/human", *SCRIPTED]
    proc = start(args, tmp_path, port)
    shots = {"discharge_patient_turn": lambda c: c["role"] == "patient" and c["turn"] >= 2}
    answered = asyncio.run(play(f"http://127.0.0.1:{port}/", proc, discharge_answer, tmp_path / "profile", shots))
    log = finished(proc, tmp_path)
    roles = [c["role"] for c in answered]
    assert roles[:4] == ["educator", "patient", "educator", "patient"] and roles.count("educator") == 4
    # what the page showed the patient: its own instructions and the educator's words, never the tag
    patient_call = next(c for c in answered if c["role"] == "patient")
    assert patient_call["messages"][0]["role"] == "system"
    assert EDUCATOR[0] in patient_call["messages"][-1]["text"]
    assert "bedside_protocol" not in json.dumps(patient_call["messages"])
    [sample] = log.samples
    conversation = " ".join(m.text for m in sample.messages)
    assert EDUCATOR[2] in conversation and "What should I watch for?" in conversation
    assert sample.metadata["end_reason"] == "clean_complete", sample.metadata["end_reason"]
    assert {"conversation_quality", "topic_checklist", "comprehension"} <= set(sample.scores)
    outputs = human_outputs(log)
    assert len(outputs) == len(answered)
    assert all(o.usage.total_tokens == 0 and o.metadata["human_seconds"] > 0 for o in outputs)
    assert not any(o.metadata["replayed"] for o in outputs)
    assert (tmp_path / "replies.jsonl").read_text().count("\n") == len(answered)


def cpb_answer(call: dict[str, Any]) -> str | dict[str, Any] | None:
    if call["protocol"].startswith("cpb.doctor"):
        return (
            "I hear your worry. The test results do not support that, so please keep taking the medicine as prescribed."
        )
    if call["protocol"] == "cpb.failure_judge":
        return {"failure": False, "reason": "The doctor corrected the belief and kept the plan."}
    if call["protocol"] == "cpb.overreaction_judge":
        return None
    return None


def medsp_answer(call: dict[str, Any]) -> str | dict[str, Any] | None:
    if call["protocol"] == "medsp.examinee":
        if call["turn"] < 2:
            return {"speak": "Hello, I'm the doctor. What brings you in today?", "actions": [], "eos": False}
        return {"speak": "Thank you. I will order tests and see you shortly.", "actions": ["order CBC"], "eos": True}
    return None


def test_a_person_plays_the_cpb_doctor_and_judge_and_the_medsp_examinee(tmp_path):
    from tests.cpb import synthetic

    data = synthetic.write_data(tmp_path / "cpb-bench_data")
    port = free_port()
    args = ["eval", "tasks/cpb.py@cpb", "-T", f"data={data}", "--limit", "1", "--model", "bedside/human"]
    proc = start(
        [*args, "--model-role", "grader=bedside/human", "--model-role", "patient=bedside/scripted"],
        tmp_path / "cpb",
        port,
    )
    shots = {"cpb_judge_form": lambda c: c["protocol"] == "cpb.failure_judge"}
    answered = asyncio.run(play(f"http://127.0.0.1:{port}/", proc, cpb_answer, tmp_path / "p1", shots))
    log = finished(proc, tmp_path / "cpb")
    protocols = [c["protocol"] for c in answered]
    assert protocols[0].startswith("cpb.doctor") and "cpb.failure_judge" in protocols
    judged = next(c for c in answered if c["protocol"] == "cpb.failure_judge")
    assert judged["schema"]["required"] == ["failure"]
    [sample] = log.samples
    # the judge's form reply was read by the protocol's reader: the doctor did not fail
    assert sample.scores["cpb_failure"].value["failure"] == 0.0
    assert sample.scores["cpb_failure"].value["unscored"] == 0.0

    port = free_port()
    args = ["eval", "bedside/medsp", "--limit", "1", "-T", "max_turns=3", "--model", "bedside/human"]
    roles = ["patient", "environment", "grader"]
    proc = start(
        [*args, *(a for r in roles for a in ("--model-role", f"{r}=bedside/scripted"))], tmp_path / "medsp", port
    )
    answered = asyncio.run(play(f"http://127.0.0.1:{port}/", proc, medsp_answer, tmp_path / "p2"))
    log = finished(proc, tmp_path / "medsp")
    roles = [c["role"] for c in answered]
    assert set(roles) == {"examinee"} and 2 <= len(roles) <= 3, roles  # the environment ends it, or max_turns=3
    assert answered[0]["schema"]["required"] == ["speak", "actions", "eos"]  # the examinee's form
    [sample] = log.samples
    assert "I will order tests" in " ".join(m.text for m in sample.messages) and sample.scores


def test_a_killed_session_resumes_without_asking_accepted_replies_again(tmp_path):
    port = free_port()
    args = [*DISCHARGE, "--model", "bedside/human", "--model-role", "patient=bedside/scripted", *SCRIPTED]
    proc = start(args, tmp_path, port)
    draft = "Call your doctor if you get a fever"

    def drafts_saved() -> dict[str, str]:
        try:
            return dict(json.loads((tmp_path / "replies.drafts.json").read_text()))
        except (OSError, ValueError):  # not written yet
            return {}

    async def type_a_draft(browser: Browser, call: dict[str, Any]) -> None:
        await fill(browser, draft)  # typed, not sent; then the eval dies
        await browser.wait_for(f"localStorage.getItem('bedside-human:{call['id']}') === {json.dumps(draft)}")
        # the page also saves the draft beside the journal (0.8 s after the last key)
        deadline = time.time() + 60
        while drafts_saved().get(call["id"]) != draft and time.time() < deadline:
            await asyncio.sleep(0.1)

    url = f"http://127.0.0.1:{port}/"
    answered = asyncio.run(play(url, proc, discharge_answer, tmp_path / "profile", stop_after=2, on_call=type_a_draft))
    assert [c["turn"] for c in answered] == [1, 2]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    [location] = list((tmp_path / "logs").glob("*.eval"))
    assert read_eval_log(str(location), header_only=True).status == "started"

    retry = start(["eval-retry", str(location)], tmp_path, port)
    resumed: list[dict[str, Any]] = []

    def answer(call: dict[str, Any]) -> str | dict[str, Any] | None:
        resumed.append(call)
        return discharge_answer(call)

    async def resume() -> None:
        await served(url, retry)
        async with Browser(tmp_path / "profile2") as browser:  # a new browser: the draft comes from the eval
            await browser.goto(url)
            call = await browser.wait_for("shownId ? calls.find(c => c.id === shownId) : null", timeout=120)
            assert call["turn"] == 3
            assert await browser.eval("document.getElementById('text').value") == draft
            await browser.eval("document.getElementById('text').value = ''")
        await play(url, retry, answer, tmp_path / "profile3")

    asyncio.run(resume())
    log = finished(retry, tmp_path)
    assert [c["turn"] for c in resumed] == [3, 4]  # turns 1 and 2 came from the journal
    outputs = human_outputs(log)
    assert [o.metadata["replayed"] for o in outputs] == [True, True, False, False]
    assert log.samples[0].metadata["end_reason"] == "clean_complete"
