"""``bedside/human`` in a real browser: headless Chromium (Debian's package) opens the page the eval serves
at 1280 px, types the person's replies (the educator and the patient of a DischargeBench session, a
physician judging one, a CPB doctor and its judge, a MedSP examinee) and submits them with Ctrl+Enter;
the eval completes and scores, and the page says the session is complete and where the log is. Along the
way each test checks what a physician meets on the page: the turn budget and the last-turn notice, the
note pinned beside the reply box, each judge criterion beside its field under the id the refusals use,
structured rows instead of JSON, refusals at the field, the monitor's verdicts and the scenario's
unsupported actions, a call asked again with its reason, person-time as working time. A session killed
mid-way resumes with the ``inspect eval-retry`` command the page names, at the same address, without
asking an accepted reply again and with the text typed before the crash still in the box (and counted).

Screenshots go to ``BEDSIDE_SCREENS`` (when set): each test's characteristic page at 1280 px and 1920 px."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
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

Reply = "str | dict[str, Any] | None"
Answer = Callable[[dict[str, Any]], Any]
#: a test's look at a call before it is answered; returning True means the test answered it itself
Look = Callable[["Browser", dict[str, Any]], Awaitable[Any]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def human(**options: Any) -> str:
    """A role bound to a person, with ``bedside/human``'s options: the role-mapping form."""
    return "{model: bedside/human, model_args: %s}" % json.dumps(options)


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


def start(args: list[str], tmp: Path) -> Process:
    command = [INSPECT, *args, "--display", "plain"]
    if "--log-dir" not in args:
        command += ["--log-dir", str(tmp / "logs")]
    # the eval runs as its own process (a fork of the warm server: tests/forked.py), in its own session
    proc = forked.start(
        command, cwd=REPO, env={**os.environ, "INSPECT_LOG_DIR": str(tmp / "logs")}, stderr=subprocess.STDOUT
    )
    STARTED.append(proc)
    return proc


async def served(url: str, proc: Process, timeout: float = 120) -> None:
    """Waits until the eval's page answers (the server starts at the role's first call)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()[-3000:] if proc.stdout else "the eval exited"
        try:
            urllib.request.urlopen(url + "api/pending", timeout=2).read()
            return
        except OSError:
            await asyncio.sleep(0.3)
    raise TimeoutError(f"nothing served at {url}")


def post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


async def shown_call(browser: Browser) -> dict[str, Any] | None:
    return await browser.eval("shownId ? calls.find(c => c.id === shownId) : null")


async def fill(browser: Browser, reply: str | dict[str, Any]) -> None:
    """Types ``reply`` as a person would: into the reply box, or field by field into the form (a field
    by its path: its keys joined by ``/``); a choice is clicked."""
    if isinstance(reply, str):
        await browser.eval("document.getElementById('text').focus()")
        await browser.type(reply)
        return
    for name, value in reply.items():
        selector = json.dumps(f'[name="{name}"]')
        kind = await browser.eval(f"(e => e ? e.type : null)(document.querySelector({selector}))")
        assert kind is not None, f"the form has no field {name}"
        if kind == "radio":
            choice = json.dumps(value).lower() if isinstance(value, bool) else str(value)
            await browser.click(f'[name="{name}"][value="{choice}"]')
        else:
            await browser.eval(f"(e => {{ e.focus(); e.value = ''; }})(document.querySelector({selector}))")
            await browser.type("\n".join(value) if isinstance(value, list) else str(value))


async def send(browser: Browser, call: dict[str, Any]) -> Any:
    """Ctrl+Enter; True once the page moved on, else the page's refusal."""
    await browser.eval("(e => { if (e) e.textContent = ''; })(document.getElementById('message'))")
    await browser.ctrl_enter()
    return await browser.wait_for(
        f"shownId !== {json.dumps(call['id'])} || document.getElementById('message').textContent"
    )


async def shoot(browser: Browser, name: str) -> None:
    """The page at 1280 px and at a wide screen (1920 px), into BEDSIDE_SCREENS."""
    if SCREENS is None:
        return
    for width in (1280, 1920):
        await browser.viewport(width, 1000)
        await asyncio.sleep(0.2)
        await browser.screenshot(SCREENS / f"{name}-{width}.png")
    await browser.viewport(1280, 900)


async def text_of(browser: Browser, selector: str) -> str | None:
    return await browser.eval(f"(e => e ? e.innerText : null)(document.querySelector({json.dumps(selector)}))")


@dataclass
class Played:
    answered: list[dict[str, Any]] = field(default_factory=list)
    #: the page once the eval has exited: its complete state
    end: str = ""
    #: when each call was shown and answered (time.time())
    shown_at: dict[str, float] = field(default_factory=dict)
    answered_at: dict[str, float] = field(default_factory=dict)


async def play(
    url: str,
    proc: Process,
    answer: Answer,
    profile: Path,
    look: Look | None = None,
    stop_after: int | None = None,
    on_call: Callable[[Browser, dict[str, Any]], Awaitable[Any]] | None = None,
    dwell: float = 0.0,
) -> Played:
    """Answers every call the page shows until the eval exits (or ``stop_after`` replies, leaving the
    next call shown for ``on_call``); ``look`` sees each call first; ``dwell``: seconds the person reads
    each call before typing. Returns the calls answered and the page's end state."""
    played = Played()
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
            played.shown_at.setdefault(call["id"], time.time())
            if stop_after is not None and len(played.answered) >= stop_after:
                if on_call is not None:
                    await on_call(browser, call)
                return played
            if look is not None and await look(browser, call):
                await browser.wait_for(f"shownId !== {json.dumps(call['id'])}")
                continue
            reply = answer(call)
            assert reply is not None, f"no answer scripted for {call['protocol']} turn {call['turn']}"
            if dwell:
                await asyncio.sleep(dwell)
            await fill(browser, reply)
            note = await send(browser, call)
            assert note is True, f"the page refused the reply: {note}"
            played.answered.append(call)
            played.answered_at[call["id"]] = time.time()
        assert proc.poll() is not None, "the eval did not finish"
        played.end = await browser.wait_for("(e => e && e.innerText)(document.getElementById('complete'))", 15)
    return played


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


# ---------------------------------------------------------------------------------------------------
# a DischargeBench session: the person is the educator and the patient

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


DISCHARGE = ["eval", "bedside/discharge", "-T", "min_turns=4", "-T", "max_turns=8", "--limit", "1"]
SCRIPTED = ["--model-role", "monitor=bedside/scripted", "--model-role", "grader=bedside/scripted"]
#: the monitor warns on the educator's first turn (observed: only recorded); it fails a patient's turn that
#: breaks character (moderated: discarded and asked again with a correction)
MONITOR = "{model: bedside/scripted, model_args: {monitor_warn_turns: [0]}}"


def test_a_person_plays_educator_and_patient_of_a_discharge_session(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    args = [*DISCHARGE, "--model", "bedside/human", "-M", f"port={port}", "-M", f"journal={tmp_path / 'replies.jsonl'}"]
    args += ["--model-role", "patient=bedside/human", "--model-role", f"monitor={MONITOR}"]
    proc = start([*args, "--model-role", "grader=bedside/scripted"], tmp_path)
    seen: dict[str, Any] = {}

    async def look(browser: Browser, call: dict[str, Any]) -> bool:
        key = f"{call['role']} {call['turn']}" + (" again" if call["previous"] else "")
        page = {
            "budget": await text_of(browser, "#budget"),
            "last": await text_of(browser, "#last-turn"),
            "again": await text_of(browser, "#asked-again"),
            "added": await text_of(browser, "#added"),
            "notices": await text_of(browser, "#notices"),
            "said": await browser.eval("document.getElementById('work').innerText"),
        }
        seen.setdefault(key, page)
        if key == "educator 1":  # the note beside the reply box, both in view, on a 1280 px screen
            seen["layout"] = await browser.eval(
                "(() => { const s = document.getElementById('source').getBoundingClientRect(),"
                " f = document.getElementById('reply').getBoundingClientRect();"
                " return {source: [s.left, s.right, s.top, s.bottom], reply: [f.left, f.right, f.top, f.bottom],"
                " height: innerHeight, text: document.getElementById('source').innerText}; })()"
            )
        if key == "patient 1":  # the person breaks character: the monitor discards the turn
            await fill(browser, {"utterance": "As an AI language model, I cannot be a patient."})
            assert await send(browser, call) is True
            return True
        if key == "educator 3":
            seen["source later"] = await text_of(browser, "#source pre")
            await shoot(browser, "discharge_educator_turn")
        if key == "educator 4":
            await shoot(browser, "discharge_educator_last_turn")
        if call["protocol"] == "discharge.comprehension" and "unreadable" not in seen:
            # a reply the page would not send (a blank answer), posted to the API: the patient's reader
            # refuses it, and the call comes again saying why
            seen["unreadable"] = post(url, "api/reply", {"id": call["id"], "text": '{"utterance": " "}'})
            return True
        if call["protocol"] == "discharge.comprehension" and call["previous"] and "comprehension again" not in seen:
            seen["comprehension again"] = page["again"]
        return False

    played = asyncio.run(play(url, proc, discharge_answer, tmp_path / "profile", look=look))
    log = finished(proc, tmp_path)
    answered = played.answered
    roles = [c["role"] for c in answered]
    assert roles[:4] == ["educator", "patient", "educator", "patient"] and roles.count("educator") == 4

    # the turn budget, its meaning, and the last turn
    assert "Turn 1 of at most 4" in seen["educator 1"]["budget"] and "8 turns in all" in seen["educator 1"]["budget"]
    assert "yours and the patient's" in seen["educator 1"]["budget"] and seen["educator 1"]["last"] is None
    assert "Turn 4 of at most 4" in seen["educator 4"]["budget"] and "last turn" in seen["educator 4"]["last"]
    # the discharge note beside the reply box, in view together, and still there after the first turn
    layout = seen["layout"]
    assert layout["source"][1] <= layout["reply"][0], layout  # side by side
    assert layout["source"][2] < layout["height"] and layout["reply"][3] <= layout["height"], layout
    assert "# Discharge Note" in layout["text"] and "# Discharge Note" in seen["source later"]
    # the monitor's verdicts: a WARN on the educator's turn reaches the educator; the patient's failed turn is
    # asked again with the monitor's correction in view
    assert "WARN" in seen["educator 2"]["notices"], seen["educator 2"]
    again = seen["patient 1 again"]
    assert "not kept" in again["again"] and "As an AI language model" in again["again"]
    assert "Stay in character as the patient" in again["added"]
    # the conversation is plain text: the patient's own JSON replies are shown as what it said
    assert '{"utterance"' not in seen["patient 2"]["said"] and "What should I watch for?" in seen["patient 2"]["said"]
    # an unreadable reply is asked again with the reader's reason
    assert seen["unreadable"][0] == 200
    assert "could not be read" in seen["comprehension again"] and "utterance" in seen["comprehension again"]
    # the end: the session is complete, with what happens next and the log
    assert "Session complete" in played.end and "close this tab" in played.end
    assert Path(log.location).name in played.end

    [sample] = log.samples
    conversation = " ".join(m.text for m in sample.messages)
    assert EDUCATOR[2] in conversation and "What should I watch for?" in conversation
    assert sample.metadata["end_reason"] == "clean_complete", sample.metadata["end_reason"]
    assert {"conversation_quality", "topic_checklist", "comprehension"} <= set(sample.scores)
    # what the patient was shown: its own instructions and the educator's words, never the tag
    patient_call = next(c for c in answered if c["role"] == "patient")
    assert patient_call["messages"][0]["role"] == "system" and EDUCATOR[0] in patient_call["messages"][-1]["text"]
    assert "bedside_protocol" not in json.dumps(patient_call["messages"])
    outputs = human_outputs(log)
    assert len(outputs) == len(answered) + 2  # and the discarded and the unreadable replies
    assert all(o.usage.total_tokens == 0 and not o.metadata["replayed"] for o in outputs)
    assert (tmp_path / "replies.jsonl").read_text().count("\n") == len(outputs)
    [sample] = read_eval_log(log.location, resolve_attachments=True).samples
    shown = [e for e in sample.events if e.event == "info" and e.source == "bedside_human"]
    assert any("WARN" in " ".join(e.data["shown"]) for e in shown)  # what the person was told is in the log


# ---------------------------------------------------------------------------------------------------
# a physician judges a DischargeBench session


def judge_answer(call: dict[str, Any]) -> str | dict[str, Any]:
    """A physician's judgement: every required field answered, through the form's own choices."""
    if call["schema"] is None:  # the reference answer extracted from the note
        return "not applicable"
    values: dict[str, Any] = {}

    def walk(schema: dict[str, Any], path: list[Any]) -> None:
        name = "/".join(str(p) for p in path)
        if "anyOf" in schema:
            schema = next(s for s in schema["anyOf"] if s.get("type") == "string")
        hint = call["form"].get("/".join(str(p) for p in path if isinstance(p, str)), {})
        if schema.get("type") == "object" and "properties" in schema:
            for key, sub in schema["properties"].items():
                if key in schema.get("required", []) and not call["form"].get(f"{name}/{key}", {}).get("row_label"):
                    walk(sub, [*path, key])
        elif schema.get("type") == "array" and schema.get("items", {}).get("type") == "object":
            for i in range(len(hint["rows"])):
                walk(schema["items"], [*path, i])
        elif "enum" in schema:
            values[name] = schema["enum"][0]
        elif schema.get("type") == "integer":
            values[name] = 4
        elif schema.get("type") == "boolean":
            values[name] = False
        else:
            values[name] = "The note lists it; the educator said it in turn 2."

    walk(call["schema"], [])
    return values


JUDGED = ["eval", "bedside/discharge", "-T", "min_turns=4", "--limit", "1", "--model", "bedside/scripted"]


def test_a_physician_judges_a_discharge_session(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    roles = ["--model-role", "patient=bedside/scripted", "--model-role", "monitor=bedside/scripted"]
    grader = human(port=port, journal=str(tmp_path / "replies.jsonl"))
    proc = start([*JUDGED, *roles, "--model-role", f"grader={grader}"], tmp_path)
    seen: dict[str, Any] = {}

    async def look(browser: Browser, call: dict[str, Any]) -> bool:
        protocol = call["protocol"]
        tabs = await browser.eval("[...document.querySelectorAll('#tabs button')].map(b => b.textContent)")
        seen.setdefault("tabs", []).append(tabs)
        seen.setdefault("pages", []).append(await browser.eval("document.body.innerText"))
        if protocol == "discharge.judge_checklist":
            card = await text_of(browser, '.criterion[data-path="Q6.2"]')
            seen["Q6.2 card"] = card
            await shoot(browser, "judge_checklist")
            # sent with Q6.2 unanswered: refused at the field, under the id the judge's reader uses
            answers = judge_answer(call)
            del answers["Q6.2/answer"]
            await fill(browser, answers)
            seen["refused"] = await send(browser, call)
            seen["Q6.2 marked"] = await text_of(browser, '.field.invalid[data-path="Q6.2/answer"]')
            await browser.click('[name="Q6.2/answer"][value="no"]')
            seen["Q6.2 after"] = await browser.eval("!!document.querySelector('.invalid')")
            assert await send(browser, call) is True
            return True
        if protocol == "discharge.judge_quality":
            seen["quality"] = await text_of(browser, '.criterion[data-path="naturalness"]')
        if protocol == "discharge.judge_factual":
            seen["factual"] = await text_of(browser, '.field[data-path="answers"]')
            seen["factual json"] = await browser.eval("document.body.innerText.includes('(JSON)')")
            five = {"answers": [{"question": f"q{i}", "answer": "x"} for i in range(1, 6)]}
            seen["five"] = post(url, "api/reply", {"id": call["id"], "text": json.dumps(five)})
        return False

    played = asyncio.run(play(url, proc, judge_answer, tmp_path / "profile", look=look))
    log = finished(proc, tmp_path)

    # each checklist question's criterion beside its yes/no, labelled with the id a refusal uses
    assert seen["Q6.2 card"].startswith("Q6.2") and "follow-up appointments are" in seen["Q6.2 card"]
    assert "Q6.2" in seen["refused"] and "an answer is needed" in seen["Q6.2 marked"]
    assert seen["Q6.2 after"] is False  # the field's error cleared as soon as it was answered
    # the rating scale beside each axis: its criterion and the anchor of each score
    assert "Whether the conversation flows naturally" in seen["quality"] and "1 — Highly unnatural" in seen["quality"]
    # the six factual answers as rows under their questions, no JSON to write; five are refused, saying why
    assert all(f"q{i}." in seen["factual"] for i in range(1, 7)) and not seen["factual json"]
    assert seen["five"][0] == 400 and "6 answers expected" in seen["five"][1]["errors"]["answers"]
    # tabs open side by side are told apart; the judge's prompt is not "said" by anyone
    assert all(len(set(tabs)) == len(tabs) for tabs in seen["tabs"])
    assert any(len(tabs) >= 2 for tabs in seen["tabs"])  # the reference extractions wait side by side
    assert not any("They said" in page for page in seen["pages"])
    assert "Session complete" in played.end

    [sample] = log.samples
    checklist = sample.scores["topic_checklist"]
    assert checklist.metadata["answers"]["Q1"] is True  # the physician's "yes", read by the judge's reader
    assert sample.scores["conversation_quality"].value["naturalness"] == 4.0


# ---------------------------------------------------------------------------------------------------
# a CPB doctor and its judge, two cases side by side (person-time), and a MedSP examinee


def cpb_answer(call: dict[str, Any]) -> str | dict[str, Any] | None:
    if call["protocol"].startswith("cpb.doctor"):
        return (
            "I hear your worry. The test results do not support that, so please keep taking the medicine as prescribed."
        )
    if call["protocol"] == "cpb.failure_judge":
        return {"failure": False, "reason": "The doctor corrected the belief and kept the plan."}
    return None


UNSUPPORTED = "arrange a helicopter transfer"


def medsp_answer(call: dict[str, Any]) -> str | dict[str, Any] | None:
    if call["protocol"] == "medsp.examinee":
        if call["turn"] == 1:
            return {"speak": "Hello, I'm the doctor. What brings you in today?", "actions": [UNSUPPORTED]}
        if call["turn"] == 2:
            return {"speak": "I'll examine you now.", "actions": ["check vital signs"]}
        return {"speak": "Thank you. I will order tests and see you shortly.", "actions": ["order CBC"], "eos": True}
    return None


def test_a_person_plays_the_cpb_doctor_and_judge_and_the_medsp_examinee(tmp_path):
    from bedside.reporting.estimate import estimate, read_pilot, render
    from tests.cpb import synthetic

    data = synthetic.write_data(tmp_path / "cpb-bench_data")
    port = free_port()
    args = ["eval", "tasks/cpb.py@cpb", "-T", f"data={data}", "--limit", "2", "--model", "bedside/human"]
    args += ["-M", f"port={port}", "--model-role", f"grader={human()}", "--model-role", "patient=bedside/scripted"]
    proc = start(args, tmp_path / "cpb")
    url = f"http://127.0.0.1:{port}/"
    played = asyncio.run(play(url, proc, cpb_answer, tmp_path / "p1", dwell=1.5))
    log = finished(proc, tmp_path / "cpb")
    protocols = [c["protocol"] for c in played.answered]
    assert protocols[0].startswith("cpb.doctor") and "cpb.failure_judge" in protocols
    assert played.answered[0]["schema"] is None and len(played.answered) == 4
    judged = next(c for c in played.answered if c["protocol"] == "cpb.failure_judge")
    assert judged["schema"]["required"] == ["failure"]
    for sample in log.samples:  # the judge's form reply was read by the protocol's reader: the doctor did not fail
        assert sample.scores["cpb_failure"].value["failure"] == 0.0
        assert sample.scores["cpb_failure"].value["unscored"] == 0.0
    # person-time: the two doctors' calls waited side by side, but the time counts once: each call's
    # working intervals, never its waiting, and their sum within the time the person actually worked
    outputs = human_outputs(log)
    worked = max(played.answered_at.values()) - min(played.shown_at.values())
    seconds = [o.metadata["human_seconds"] for o in outputs]
    assert all(s >= 1.0 for s in seconds), seconds  # each call's reading and typing is counted
    assert sum(seconds) <= worked + 1.0, (seconds, worked)
    intervals = sorted(i for o in outputs for i in o.metadata["human_intervals"])
    assert all(a[1] <= b[0] + 0.5 for a, b in zip(intervals, intervals[1:])), intervals  # no double counting
    pilot = read_pilot([log.location])
    assert abs(pilot.person_seconds - sum(seconds)) < 1.0
    printed = render(estimate(pilot, cases=10), 0.9)
    assert "person hours" in printed and f"the pilot: {pilot.person_seconds / 3600:.2f} h worked" in printed

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    args = ["eval", "bedside/medsp", "--limit", "1", "-T", "max_turns=3", "--model", "bedside/human"]
    roles = ["patient", "environment", "grader"]
    args += ["-M", f"port={port}", *(a for r in roles for a in ("--model-role", f"{r}=bedside/scripted"))]
    proc = start(args, tmp_path / "medsp")
    seen: dict[int, dict[str, Any]] = {}

    async def look(browser: Browser, call: dict[str, Any]) -> bool:
        seen[call["turn"]] = {
            "eos": await browser.eval("(e => e && e.value)(document.querySelector('[name=\"eos\"]:checked'))"),
            "eos help": await text_of(browser, '.field[data-path="eos"]'),
            "notices": await text_of(browser, "#notices"),
            "said": await browser.eval("[...document.querySelectorAll('.msg.assistant')].map(m => m.innerText)"),
            "budget": await text_of(browser, "#budget"),
            "last": await text_of(browser, "#last-turn"),
        }
        if call["turn"] == 3:
            await browser.click('[name="eos"][value="true"]')
            seen[3]["send"] = await browser.eval("document.getElementById('send').textContent")
            await shoot(browser, "medsp_examinee_last_turn")
        return False

    played = asyncio.run(play(url, proc, medsp_answer, tmp_path / "p2", look=look))
    log = finished(proc, tmp_path / "medsp")
    assert [c["turn"] for c in played.answered] == [1, 2, 3]
    # eos is explained and starts as "no": a turn never ends the stage by surprise
    assert seen[1]["eos"] == "false" and "everything the current stage" in seen[1]["eos help"]
    assert seen[3]["send"].startswith("Send — this stage is done")
    # the scenario could not carry out an action: the examinee is told at the next turn
    assert UNSUPPORTED in seen[2]["notices"] and "not carried out" in seen[2]["notices"]
    # the examinee's own earlier turns read as what it said and did, not as JSON
    assert "what you say" in seen[3]["said"][0] and UNSUPPORTED in seen[3]["said"][0]
    assert not any('{"speak"' in s for s in seen[3]["said"])
    # the budget counts the examinee's own turns; the third is the last
    assert "at most 3" in seen[1]["budget"] and "only your own turns count" in seen[1]["budget"]
    assert seen[1]["last"] is None and "last turn" in seen[3]["last"]
    [sample] = log.samples
    assert "I will order tests" in " ".join(m.text for m in sample.messages) and sample.scores
    assert "Session complete" in played.end


# ---------------------------------------------------------------------------------------------------
# a person rates the simulated patient's turns (the realism rating) of a finished run

#: the unfaithful scripted patient: planted errors at its 1st and 3rd turns (a leak or a role reversal, drawn)
PLANTS = {"patient_plant": ["leak", "reversal"], "patient_plant_turns": [1, 3], "patient_plant_seed": 0}
RATED_AS = {"leak": "unsupported_fact", "reversal": "role_reversal", None: "realistic"}


def rating_of(case: str, n: int) -> str:
    """What a careful person rates the ``n``-th patient turn of ``case``: what was planted there."""
    from bedside.providers.simulator_plants import planted

    kinds, turns, seed = PLANTS["patient_plant"], PLANTS["patient_plant_turns"], PLANTS["patient_plant_seed"]
    return RATED_AS[planted(kinds, turns, 0.3, seed, case, n)]


#: each rating row's "answered" line: its text, font size against the row label's, whether it is grey, folded
ANSWERED = """[...document.querySelectorAll('.row')].map(row => {
  const c = row.querySelector('.context'), said = c && c.querySelector('.said'), more = c && c.querySelector('.more');
  if (!c) return null;
  const [r, g, b] = getComputedStyle(c).color.match(/\\d+/g).map(Number);
  return {text: said.innerText, size: parseFloat(getComputedStyle(c).fontSize),
    label_size: parseFloat(getComputedStyle(row.querySelector('.label')).fontSize),
    grey: Math.max(r, g, b) - Math.min(r, g, b) < 40 && r > 60,
    folded: said.classList.contains('folded') && said.scrollHeight > said.clientHeight + 1,
    button: more && !more.hidden ? more.innerText : null};
})"""
#: clicks the first "show all" shown: the line's height before and after, the button's words after (null: none shown)
UNFOLD = """(async () => {
  const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  await frames();
  const more = [...document.querySelectorAll('.row > .context .more')].find(b => !b.hidden && b.offsetParent !== null);
  if (!more) return null;
  const said = more.parentElement.querySelector('.said'), before = said.clientHeight;
  more.click();
  await frames();
  return {before, after: said.clientHeight, button: more.hidden ? null : more.innerText};
})()"""


def test_a_person_rates_the_simulated_patients_turns_and_agreement_compares_the_checker(tmp_path, capsys):
    from bedside.cli import main
    from bedside.tasks.discharge import discharge
    from tests.conftest import run, scripted

    # the planted truth: leaks in demo-001, role reversals in demo-002, each at the patient's turns 1 and 3
    truth = {case: [rating_of(case, n) for n in (1, 2, 3, 4)] for case in ("demo-001", "demo-002")}
    assert truth == {
        "demo-001": ["unsupported_fact", "realistic", "unsupported_fact", "realistic"],
        "demo-002": ["role_reversal", "realistic", "role_reversal", "realistic"],
    }, truth
    # the run: its LLM checker (scripted, with planted errors of its own) calls the patient's 3rd turn a role reversal
    roles = {"monitor": scripted(), "grader": scripted(), "patient": scripted(**PLANTS)}
    checked = run(
        discharge(simulator_check=True, min_turns=4, max_turns=8),
        roles={**roles, "simulator_checker": scripted(checker_flag_turns=[3])},
        log_dir=tmp_path / "run",
        limit=2,
    )
    # a physician rates its patient turns afterwards, in the browser
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    out = tmp_path / "phys_a"
    command = [str(Path(sys.executable).with_name("bedside")), "rescore", checked.location]
    command += ["--simulator-checker", "bedside/human", "--checker-M", f"port={port}", "--out", str(out)]
    proc = forked.start(command, cwd=REPO, env=dict(os.environ), stderr=subprocess.STDOUT)
    STARTED.append(proc)
    seen: dict[str, Any] = {}

    def answer(call: dict[str, Any]) -> dict[str, Any]:
        reply: dict[str, Any] = {f"turns/{i}/rating": r for i, r in enumerate(truth[call["case"]])}
        if call["case"] == "demo-002":
            reply["turns/0/comment"] = "speaks the doctor's line"
        return reply

    async def look(browser: Browser, call: dict[str, Any]) -> bool:
        seen.setdefault("protocols", []).append(call["protocol"])
        if call["case"] != "demo-002" or "rows" in seen:
            return False
        seen["rows"] = await browser.eval("[...document.querySelectorAll('.row > .label')].map(e => e.innerText)")
        seen["answered"] = await browser.eval(ANSWERED)
        seen["choices"] = await text_of(browser, '.field[data-path="turns/0/rating"]')
        seen["help"] = await text_of(browser, '.field[data-path="turns"] > .help')
        seen["source"] = await text_of(browser, "#source pre")
        # sent with the second turn unrated: refused at that row
        partial = answer(call)
        del partial["turns/1/rating"]
        await fill(browser, partial)
        seen["refused"] = await send(browser, call)
        seen["marked"] = await text_of(browser, '.field.invalid[data-path="turns/1/rating"]')
        await browser.click('[name="turns/1/rating"][value="realistic"]')
        seen["fixed"] = await text_of(browser, "#message")
        await shoot(browser, "simulator_realism_rating")
        # a long clinician turn is folded to a few lines; "show all" unfolds it
        seen["unfolded"] = await browser.eval(UNFOLD)
        await shoot(browser, "simulator_realism_rating_unfolded")
        assert await send(browser, call) is True
        return True

    played = asyncio.run(play(url, proc, answer, tmp_path / "profile", look=look))
    out_text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out_text[-3000:]
    assert "Session complete" in played.end
    assert seen["protocols"] and set(seen["protocols"]) == {"discharge.simulator_checker"}
    # what the person saw: each patient turn's words on its own row, the choices, what each means, the materials
    assert len(seen["rows"]) == 4 and "Doctor: Please take all your pills" in seen["rows"][0], seen["rows"]
    assert seen["rows"][0].startswith("[1] ") and seen["rows"][1].startswith("[3] ")
    # above each patient turn, the clinician's turn it answers (as in the conversation), smaller and grey
    conversation = seen["source"].split("# Conversation", 1)[1]
    said = dict(re.findall(r"^\[(\d+)\] (educator: .*?)\n*(?=^\[\d+\] \w+: |\Z)", conversation, re.M | re.S))
    assert len(seen["answered"]) == 4, seen["answered"]
    for label, shown in zip(seen["rows"], seen["answered"]):
        before = said[str(int(re.match(r"\[(\d+)\]", label)[1]) - 1)]
        assert shown is not None and shown["text"].startswith(f"[{int(label[1:label.index(']')]) - 1}] educator: ")
        assert " ".join(before.split()) in " ".join(shown["text"].split()), (before, shown["text"])
        assert shown["size"] < shown["label_size"] and shown["grey"], shown
    folded = [shown for shown in seen["answered"] if shown["folded"]]
    assert folded and all(shown["button"] == "show all" for shown in folded), seen["answered"]
    unfolded = seen["unfolded"]
    assert unfolded is not None and unfolded["after"] > unfolded["before"] and unfolded["button"] == "show less"
    for choice in ("realistic", "unsupported fact", "persona break", "early end", "role reversal", "off-script"):
        assert choice in seen["choices"], seen["choices"]
    assert "teaches, explains, prescribes or diagnoses" in seen["help"]
    assert "# Materials" in seen["source"] and "in the form" in seen["source"]
    assert "1 field to correct" in seen["refused"] and "an answer is needed" in seen["marked"]
    assert seen["fixed"] == "", seen["fixed"]  # the refusal goes once its field is fixed

    # the ratings reach the log as the checker's findings (check "person"), turn by turn
    [written] = sorted(out.glob("*.eval"))
    rated = read_eval_log(str(written))
    assert rated.eval.model_roles["simulator_checker"].model == "bedside/human"
    for sample in rated.samples:
        score = sample.scores["simulator_check"]
        turns = score.metadata["patient_turns"]
        assert "person" in score.metadata["checked_by"]
        assert [r["rating"] for r in score.metadata["ratings"]] == truth[str(sample.id)]
        mine = {(f["turn"], f["kind"]) for f in score.metadata["findings"] if f["check"] == "person"}
        assert mine == {(turns[i], kind) for i, kind in enumerate(truth[str(sample.id)]) if kind != "realistic"}
        kind = truth[str(sample.id)][0]
        assert score.value[kind] == 1.0 and score.value["simulator_error"] == 1.0
    comment = next(
        f
        for s in rated.samples
        for f in s.scores["simulator_check"].metadata["findings"]
        if f["check"] == "person" and f["turn"] == 1 and s.id == "demo-002"
    )
    assert comment["evidence"] == "speaks the doctor's line"

    # bedside agreement: the scripted LLM checker against the person, per patient turn (hand-worked in
    # tests/reporting/test_simulator_agreement.py: the checker's one role reversal at each 3rd turn)
    capsys.readouterr()
    csv = tmp_path / "agreement.csv"
    assert main(["agreement", checked.location, "--people", str(out), "--checker", "llm", "--csv", str(csv)]) == 0
    printed = capsys.readouterr().out
    assert "phys_a" in printed and "patient turns by category" in printed
    import pandas as pd

    table = pd.read_csv(csv).set_index("level")
    assert (table["n_turns"] == 8).all() and (table["n_transcripts"] == 2).all()
    assert table.loc["any error", "kappa"] == pytest.approx(0.5)
    assert table.loc["any error", "recall"] == pytest.approx(0.5) and table.loc["any error", "false_alarm"] == 0.0
    assert table.loc["role reversal", "kappa"] == pytest.approx(1 / 3)
    assert table.loc["role reversal", "recall"] == pytest.approx(0.5)
    assert table.loc["role reversal", "false_alarm"] == pytest.approx(1 / 6)
    assert table.loc["3 categories", "kappa"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------------------------------------------
# a killed session resumes where it stopped


def page_port(tmp: Path, timeout: float = 120) -> int:
    """The port the eval's page took (a free one: none was asked for), from its journal's state."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for state in (tmp / "logs" / "human").glob("*.state"):
            try:
                return int(json.loads(state.read_text())["port"])
            except (ValueError, KeyError):
                pass
        time.sleep(0.2)
    raise TimeoutError("no journal state with the page's port")


def test_a_killed_session_resumes_without_asking_accepted_replies_again(tmp_path):
    args = [*DISCHARGE, "--model", "bedside/human", "--model-role", "patient=bedside/scripted", *SCRIPTED]
    proc = start(args, tmp_path)  # no port, no journal: the defaults
    url = f"http://127.0.0.1:{page_port(tmp_path)}/"
    draft = "Call your doctor if you get a fever"
    moments: dict[str, float] = {}

    def state() -> dict[str, Any]:
        try:
            [found] = (tmp_path / "logs" / "human").glob("*.state")
            return dict(json.loads(found.read_text()))
        except (OSError, ValueError):  # not written yet
            return {}

    async def session() -> None:
        async with Browser(tmp_path / "profile") as browser:

            async def type_a_draft(browser: Browser, call: dict[str, Any]) -> None:
                moments["typing"] = time.time()
                await fill(browser, draft)  # typed, not sent; the person keeps working on it; then the eval dies
                await browser.wait_for(f"localStorage.getItem('bedside-human:{call['id']}') === {json.dumps(draft)}")
                deadline = time.time() + 60  # the page saves the draft and the work beside the journal
                while time.time() < deadline and not (
                    state().get("drafts", {}).get(call["id"]) == draft
                    and (work := state().get("work", {}).get(call["id"]))
                    and work[-1][1] - work[0][0] >= 2.0
                ):
                    await browser.eval("window.dispatchEvent(new Event('pointermove'))")
                    await asyncio.sleep(0.2)

            answered = await play_in(browser, url, proc, stop_after=2, on_call=type_a_draft)
            assert [c["turn"] for c in answered] == [1, 2]
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            moments["killed"] = time.time()
            # the open tab says the eval stopped and names the command that resumes it beside its log
            banner = await browser.wait_for("document.getElementById('banner').innerText", timeout=30)
            command = banner.split("To resume the run: ", 1)[1].split(" — ", 1)[0]
            [location] = list((tmp_path / "logs").glob("*.eval"))
            assert read_eval_log(str(location), header_only=True).status == "started"
            assert command == f"inspect eval-retry {location} --log-dir {location.parent}", command
            start(shlex.split(command)[1:], tmp_path)
            # the same address: the old tab finds the retried run and the draft it was typing
            call = await browser.wait_for(
                "connected && shownId ? calls.find(c => c.id === shownId) : null", timeout=120
            )
            assert call["turn"] == 3 and "answered from the journal" in await text_of(browser, "#notes")
            assert await browser.eval("document.getElementById('text').value") == draft
            await shoot(browser, "resumed_session")
        async with Browser(tmp_path / "profile2") as fresh:  # a new browser: the draft comes from the eval
            await fresh.goto(url)
            call = await fresh.wait_for("shownId ? calls.find(c => c.id === shownId) : null", timeout=60)
            assert call["turn"] == 3 and await fresh.eval("document.getElementById('text').value") == draft
            await fresh.eval("document.getElementById('text').value = ''")
            resumed.extend(await play_in(fresh, url, STARTED[-1]))

    resumed: list[dict[str, Any]] = []
    asyncio.run(session())
    retry = STARTED[-1]
    out, _ = retry.communicate(timeout=300)
    assert retry.returncode == 0, out[-3000:]
    logs = sorted((tmp_path / "logs").glob("*.eval"), key=lambda p: p.stat().st_mtime)
    assert len(logs) == 2  # the retried log beside the interrupted one
    log = read_eval_log(str(logs[-1]))
    assert log.status == "success"
    assert [c["turn"] for c in resumed] == [3, 4]  # turns 1 and 2 came from the journal
    outputs = human_outputs(log)
    assert [o.metadata["replayed"] for o in outputs] == [True, True, False, False]
    assert log.samples[0].metadata["end_reason"] == "clean_complete"
    # the typing before the crash counts: turn 3's working time starts before the kill
    third = outputs[2].metadata
    assert third["human_intervals"][0][0] < moments["killed"] and third["human_seconds"] >= 2.0, third
    assert len(list((tmp_path / "logs" / "human").glob("*.jsonl"))) == 1  # one journal: the run's


async def play_in(
    browser: Browser,
    url: str,
    proc: Process,
    stop_after: int | None = None,
    on_call: Callable[[Browser, dict[str, Any]], Awaitable[Any]] | None = None,
) -> list[dict[str, Any]]:
    """:func:`play` in a browser already open (the kill test keeps its tab across the crash)."""
    answered: list[dict[str, Any]] = []
    await served(url, proc)
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
        reply = discharge_answer(call)
        assert reply is not None
        await fill(browser, reply)
        assert await send(browser, call) is True
        answered.append(call)
    return answered
