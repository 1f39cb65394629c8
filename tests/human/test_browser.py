"""``bedside/human`` in a real browser: headless Chromium (Debian's package) opens the page the eval serves
at 1280 px, types the person's replies (the educator and the patient of a DischargeBench session, a
physician judging one, a CPB doctor and its judge, a MedSP examinee) and submits them with Ctrl+Enter;
the eval completes and scores, and the page says the session is complete and where the log is. Along the
way each test checks what a physician meets on the page: the turn budget and the last-turn notice, the
note pinned beside the reply box, each judge criterion beside its field under the id the refusals use,
structured rows instead of JSON, refusals at the field, the monitor's verdicts and the scenario's
unsupported actions, a call asked again with its reason, person-time as working time; and, per clinician role
(educator, examinee, doctor), what one case asked of the person (:func:`time_per_case`). A session killed
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
from collections import Counter
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
        forked.stop(STARTED.pop())


def start(args: list[str], tmp: Path, cwd: Path = REPO, log_dir_variable: bool = True) -> Process:
    """The eval (``--log-dir`` ``tmp/logs`` unless given), run in ``cwd``; ``log_dir_variable``: with
    ``INSPECT_LOG_DIR`` pointing there too (else without the variable at all)."""
    command = [INSPECT, *args, "--display", "plain"]
    if "--log-dir" not in args:
        command += ["--log-dir", str(tmp / "logs")]
    env = {k: v for k, v in os.environ.items() if k != "INSPECT_LOG_DIR"}
    if log_dir_variable:
        env["INSPECT_LOG_DIR"] = str(tmp / "logs")
    # the eval runs as its own process (a fork of the warm server: tests/forked.py), in its own session
    proc = forked.start(command, cwd=cwd, env=env, stderr=subprocess.STDOUT)
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


async def reply_on_page(
    browser: Browser, call: dict[str, Any], reply: str | dict[str, Any] | None, dwell: float
) -> None:
    """Types ``reply`` to ``call`` on the page after ``dwell`` seconds of reading, and sends it: the page must take it."""
    assert reply is not None, f"no answer scripted for {call['protocol']} turn {call['turn']}"
    if dwell:
        await asyncio.sleep(dwell)
    await fill(browser, reply)
    note = await send(browser, call)
    assert note is True, f"the page refused the reply: {note}"


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
            if call is None:  # a case has ended: the person starts the next one
                await browser.eval("(b => b && b.click())(document.getElementById('next-case'))")
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
            await reply_on_page(browser, call, answer(call), dwell)
            played.answered.append(call)
            played.answered_at[call["id"]] = time.time()
        if proc.poll() is None:
            await browser.screenshot(Path(os.environ.get("BEDSIDE_SCREENS", "/tmp")) / "stuck.png")
        assert proc.poll() is not None, (
            "the eval did not finish: " + str(await browser.eval("document.body.innerText"))[:3000]
        )
        played.end = await browser.wait_for("(e => e && e.innerText)(document.getElementById('complete'))", 15)
    return played


def finished(proc: Process, tmp: Path) -> Any:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    [location] = sorted((tmp / "logs").glob("*.eval"), key=lambda p: p.stat().st_mtime)[-1:]
    log = read_eval_log(str(location))
    assert log.status == "success", out[-3000:]
    return log


def words(text: str) -> int:
    return len(text.split())


def typed(reply: Any) -> int:
    """The words a person typed for ``reply``: its text, or its form's text fields (a choice is a click)."""
    if isinstance(reply, str):
        return words(reply)
    if isinstance(reply, list):
        return sum(typed(v) for v in reply)
    if isinstance(reply, dict):
        return sum(typed(v) for v in reply.values())
    return 0


def time_per_case(log: Any, calls: list[dict[str, Any]], answer: Answer, name: str) -> list[dict[str, Any]]:
    """What the person playing the clinician (the model under test) did per case, as the page and the log recorded
    it: replies (forms among them), the words the page showed that they had not seen at the call before (in all, and
    at the first call: the instructions and the case), the words they typed, and their person-time (the union of the calls'
    working intervals). ``bedside report`` shows the same person-time per case (person_time_by_case.csv).
    Written to BEDSIDE_SCREENS/time_per_case_<name>.json when set (docs/clinician-study.md's figures)."""
    from bedside import benchmarks
    from bedside.person_time import person_seconds
    from bedside.reporting import usage
    from bedside.reporting.load import load

    role = benchmarks.of_task(log.eval.task).subject_role
    rows = []
    for sample in log.samples:
        mine = [c for c in calls if c["case"] == str(sample.id) and c["role"] == role]
        outputs = [
            e.output
            for e in sample.events
            if e.event == "model" and e.role is None and e.output and e.output.model == "bedside/human"
        ]
        read, seen = [], Counter[tuple[str, str]]()
        for call in mine:
            shown = Counter((m["role"], m["text"]) for m in call["messages"])
            read.append(sum(words(text) * n for (_, text), n in (shown - seen).items()))
            seen = shown
        rows.append(
            {
                "role": role,
                "case": str(sample.id),
                "replies": len(outputs),
                "forms": sum(c["schema"] is not None for c in mine),
                "words_read": sum(read),
                "words_read_at_first_call": read[0] if read else 0,
                "words_typed": sum(typed(answer(c)) for c in mine),
                "person_seconds": round(person_seconds(o.metadata for o in outputs), 2),
            }
        )
    assert all(r["replies"] == len([c for c in calls if c["case"] == r["case"] and c["role"] == role]) for r in rows)
    _, report = usage.person_time(usage.usage_by_case(load([log.location]), usage.load_prices()))
    shown = report[report["role"] == role].set_index("id")
    assert {r["case"]: r["person_seconds"] for r in rows} == pytest.approx(shown["person_seconds"].to_dict(), abs=0.01)
    assert {r["case"]: r["replies"] for r in rows} == shown["replies"].to_dict()
    if SCREENS is not None:
        (SCREENS / f"time_per_case_{name}.json").write_text(json.dumps(rows, indent=1))
    return rows


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
    lines = [json.loads(line) for line in (tmp_path / "replies.jsonl").read_text().splitlines()]
    assert sum(line.get("kind") != "case" for line in lines) == len(outputs)  # and the case's end:
    assert [line["ending"] for line in lines if line.get("kind") == "case"] == [
        "the conversation came to its end (clean_complete, 8 turns)"
    ]
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


#: where a form opened: the scroll of its column and whether its first field is in view
OPENED = """(() => { const w = document.getElementById('work');
  const f = w.querySelector('form .field, form .criterion, form textarea');
  const r = f ? f.getBoundingClientRect() : null;
  return {scroll: w.scrollTop, window: window.scrollY, first_in_view: !!r && r.top >= 0 && r.top < innerHeight}; })()"""


def judged_by_a_person(
    tmp_path: Path, port: int, look: Look, answer: Answer = judge_answer, **options: Any
) -> tuple[Played, Any]:
    """A scripted DischargeBench session judged by a person on the page at ``port`` (``options``:
    bedside/human's)."""
    url = f"http://127.0.0.1:{port}/"
    roles = ["--model-role", "patient=bedside/scripted", "--model-role", "monitor=bedside/scripted"]
    grader = human(port=port, journal=str(tmp_path / "replies.jsonl"), **options)
    proc = start([*JUDGED, *roles, "--model-role", f"grader={grader}"], tmp_path)
    played = asyncio.run(play(url, proc, answer, tmp_path / "profile", look=look))
    return played, finished(proc, tmp_path)


async def refused_without(browser: Browser, call: dict[str, Any], field: str) -> str:
    """The page's refusal of the judgement sent with ``field`` unanswered."""
    answers = judge_answer(call)
    del answers[field]
    await fill(browser, answers)
    return str(await send(browser, call))


def test_a_physician_rates_what_the_study_measures_in_three_forms(tmp_path):
    seen: dict[str, Any] = {"protocols": []}

    async def look(browser: Browser, call: dict[str, Any]) -> bool:
        protocol = call["protocol"]
        seen["protocols"].append(protocol)
        seen.setdefault("opened", []).append(await browser.eval(OPENED))
        seen.setdefault("tabs", []).append(await browser.eval(TABS))
        seen.setdefault("pages", []).append(await browser.eval("document.body.innerText"))
        if protocol == "discharge.judge_checklist":
            seen["Q6.2 card"] = await text_of(browser, '.criterion[data-path="Q6.2"]')
            await shoot(browser, "judge_checklist")
            # sent with Q6.2 unanswered: refused at the field, under the id the physician reads beside it
            seen["refused"] = await refused_without(browser, call, "Q6.2/answer")
            seen["Q6.2 marked"] = await text_of(browser, '.field.invalid[data-path="Q6.2/answer"]')
            await browser.click('[name="Q6.2/answer"][value="no"]')
            seen["Q6.2 after"] = await browser.eval("!!document.querySelector('.invalid')")
            assert await send(browser, call) is True
            return True
        if protocol == "discharge.judge_quality":
            seen["quality"] = await text_of(browser, '.criterion[data-path="naturalness"]')
        if protocol == "discharge.judge_comprehension":
            seen["grade source"] = await text_of(browser, "#source pre")
            seen["grade q6"] = await text_of(browser, '.criterion[data-path="q6"]')
            await shoot(browser, "judge_comprehension")
            seen["grade refused"] = await refused_without(browser, call, "q6/label")
            await browser.click('[name="q6/label"][value="correct"]')
            assert await send(browser, call) is True
            return True
        return False

    played, log = judged_by_a_person(tmp_path, free_port(), look)
    # the items of the paper's Table 5, three forms: the four axes, the checklist, the six comprehension grades
    assert sorted(seen["protocols"]) == [
        "discharge.judge_checklist",
        "discharge.judge_comprehension",
        "discharge.judge_quality",
    ], seen["protocols"]
    # each form opens at its top, its tab label whole
    assert all(o["scroll"] == 0 and o["window"] == 0 and o["first_in_view"] for o in seen["opened"]), seen["opened"]
    assert all(tab["whole"] for tabs in seen["tabs"] for tab in tabs), seen["tabs"]
    # each checklist question's criterion beside its yes/no; a refusal names the field as the page shows it
    assert seen["Q6.2 card"].startswith("Q6.2") and "follow-up appointments are" in seen["Q6.2 card"]
    assert "to correct (marked in red): Q6.2" in seen["refused"] and "Q6.2/answer" not in seen["refused"]
    assert "an answer is needed" in seen["Q6.2 marked"] and seen["Q6.2 after"] is False
    # the rating scale beside each axis: its criterion and the anchor of each score
    assert "Whether the conversation flows naturally" in seen["quality"] and "1 — Highly unnatural" in seen["quality"]
    # the comprehension grades against the note itself (no reference extracted first), q6 named as shown
    assert "Discharge note:" in seen["grade source"] and "Chief Complaint:" in seen["grade source"]
    assert "Reference: the discharge note" in seen["grade q6"] and "Patient's answer" in seen["grade q6"]
    assert "to correct (marked in red): q6" in seen["grade refused"] and "q6/label" not in seen["grade refused"]
    assert not any("They said" in page for page in seen["pages"])
    assert "Session complete" in played.end

    [sample] = log.samples
    assert sample.scores["topic_checklist"].metadata["answers"]["Q1"] is True  # the physician's "yes"
    assert sample.scores["conversation_quality"].value["naturalness"] == 4.0
    comprehension = sample.scores["comprehension"]
    assert comprehension.metadata["references_extracted"] is False and comprehension.value["comprehension"] == 1.0
    # factual consistency needs the judge's extractions, not asked of a person: unscored, saying why
    factual = sample.scores["factual_consistency"]
    assert factual.value["rouge_l"] != factual.value["rouge_l"] and "not asked" in factual.explanation
    assert factual.value["unscored"] == 0.0


def test_a_physician_asked_for_the_judges_steps_answers_all_eleven_forms(tmp_path):
    port = free_port()
    seen: dict[str, Any] = {"protocols": []}

    async def look(browser: Browser, call: dict[str, Any]) -> bool:
        protocol = call["protocol"]
        seen["protocols"].append(protocol)
        seen.setdefault("tabs", []).append(await browser.eval(TABS))
        seen.setdefault("opened", []).append(await browser.eval(OPENED))
        if protocol == "discharge.judge_reference" and "question" not in seen:
            seen["question"] = await browser.wait_for(
                "(e => e && e.innerText)(document.getElementById('question'))", 20
            )
            # the six are asked at once: their tabs once all six are there
            await browser.wait_for("document.querySelectorAll('#tabs button').length === 6", 60)
            seen["reference tabs"] = await browser.eval(TABS)
            await shoot(browser, "judge_reference")
        if protocol == "discharge.judge_factual" and "factual" not in seen:
            seen["factual"] = await text_of(browser, '.field[data-path="answers"]')
            seen["factual json"] = await browser.eval("document.body.innerText.includes('(JSON)')")
            seen["factual refused"] = await refused_without(browser, call, "answers/5/answer")
            five = {"answers": [{"question": f"q{i}", "answer": "x"} for i in range(1, 6)]}
            seen["five"] = post(f"http://127.0.0.1:{port}/", "api/reply", {"id": call["id"], "text": json.dumps(five)})
        return False

    def extracted(call: dict[str, Any]) -> str | dict[str, Any]:  # each reference found in the note
        return "Take the medicines as listed." if call["schema"] is None else judge_answer(call)

    played, log = judged_by_a_person(tmp_path, port, look, extracted, steps=True)
    counts = {p: seen["protocols"].count(p) for p in set(seen["protocols"])}
    assert counts == {
        "discharge.judge_quality": 1,
        "discharge.judge_checklist": 1,
        "discharge.judge_reference": 6,
        "discharge.judge_comprehension": 1,
        "discharge.judge_factual": 2,
    }, counts
    # the six reference extractions wait side by side, told apart, each asking its question beside the reply box
    assert any(len(tabs) >= 2 for tabs in seen["tabs"]) and all(
        len({t["text"] for t in tabs}) == len(tabs) for tabs in seen["tabs"]
    )
    assert all(tab["whole"] for tabs in seen["tabs"] for tab in tabs), seen["tabs"]
    assert seen["question"].startswith("This call asks: Question:"), seen["question"]
    assert len(seen["reference tabs"]) == 6 and all(" · Question: " in t["text"] for t in seen["reference tabs"])
    assert all(o["scroll"] == 0 and o["first_in_view"] for o in seen["opened"]), seen["opened"]
    # the six factual answers as rows under their questions, no JSON to write; a missing one named as shown
    assert all(f"q{i}." in seen["factual"] for i in range(1, 7)) and not seen["factual json"]
    assert "to correct (marked in red): q6" in seen["factual refused"] and "answers/5" not in seen["factual refused"]
    assert seen["five"][0] == 400 and "6 answers expected" in seen["five"][1]["errors"]["answers"]
    assert "Session complete" in played.end
    [sample] = log.samples
    assert sample.scores["comprehension"].metadata["references_extracted"] is True
    assert (
        sample.scores["factual_consistency"].value["rouge_l"] == sample.scores["factual_consistency"].value["rouge_l"]
    )


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
    # the doctor's part per case (the judge's calls are the grader's): one reply, what it read and typed
    doctor = time_per_case(log, played.answered, cpb_answer, "cpb_doctor")
    assert len(doctor) == 2 and all(r["replies"] == 1 and r["forms"] == 0 for r in doctor), doctor
    assert all(r["words_typed"] == typed(cpb_answer(played.answered[0])) and r["words_read"] > 0 for r in doctor)
    assert all(1.0 <= r["person_seconds"] <= worked + 1.0 for r in doctor), (doctor, worked)
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
    # the examinee's case: three forms, what the page showed and what was typed, the working time
    [examinee] = time_per_case(log, played.answered, medsp_answer, "medsp_examinee")
    assert examinee["replies"] == examinee["forms"] == 3 and examinee["words_read"] > 0, examinee
    assert examinee["words_typed"] == sum(typed(medsp_answer(c)) for c in played.answered)
    elapsed = max(played.answered_at.values()) - min(played.shown_at.values())
    assert 0 < examinee["person_seconds"] <= elapsed + 1.0, (examinee, elapsed)


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
        assert shown is not None and shown["text"].startswith(f"[{int(label[1 : label.index(']')]) - 1}] educator: ")
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
    assert seen["refused"].endswith("(marked in red): turn 3"), seen["refused"]  # the row as the page numbers it
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
# several cases: one at a time, each to its end

#: the tabs' words, and whether each shows its whole label (nothing cut)
TABS = """[...document.querySelectorAll('#tabs button')].map(b => ({text: b.innerText,
  whole: !b.innerText.includes('…') && b.scrollWidth <= b.clientWidth + 1 && b.scrollHeight <= b.clientHeight + 1}))"""


@dataclass
class Cases:
    """What the page showed over a run of several cases played one at a time."""

    answered: list[dict[str, Any]] = field(default_factory=list)
    #: the page's tabs each time a call was answered
    tabs: list[list[dict[str, Any]]] = field(default_factory=list)
    #: the end of each case as the page showed it: {key, text}
    ends: list[dict[str, Any]] = field(default_factory=list)
    #: the page's own counts (replies sent, working seconds) when it stopped
    counts: dict[str, Any] = field(default_factory=dict)
    #: the complete page, once the eval has exited
    end: str = ""
    #: seconds from each case's first call shown to its end shown (the page's clock: time.time())
    case_seconds: dict[str, float] = field(default_factory=dict)


async def play_cases(
    browser: Browser,
    url: str,
    proc: Process,
    played: Cases,
    until: Callable[[Cases, dict[str, Any]], bool] | None = None,
    dwell: float = 0.0,
    goto: bool = True,
) -> dict[str, Any] | None:
    """Plays the page as a person would, one case at a time: answers each turn shown, and at the end of a
    case reads it and starts the next case by its button. Stops when the eval exits, or before answering the
    call for which ``until`` says so (returned)."""
    await served(url, proc)
    if goto:
        await browser.goto(url)
    await browser.wait_for("typeof shownId !== 'undefined'")
    started: dict[str, float] = {}
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        end = await browser.eval(
            "(e => e && {key: e.dataset.key, text: e.innerText})(document.getElementById('case-end'))"
        )
        if end is not None:
            if end["key"] not in [e["key"] for e in played.ends]:
                played.ends.append(end)
                played.case_seconds[end["key"]] = time.time() - started.get(end["key"], time.time())
                await shoot(browser, f"case_end_{len(played.ends)}")
            if await browser.eval("!!document.getElementById('next-case')"):
                await browser.click("#next-case")
            await asyncio.sleep(0.05)
            continue
        call = await shown_call(browser)
        if call is None:
            await asyncio.sleep(0.05)
            continue
        started.setdefault(call["key"], time.time())
        if until is not None and until(played, call):
            return call
        played.tabs.append(await browser.eval(TABS))
        await reply_on_page(browser, call, discharge_answer(call), dwell)
        played.answered.append(call)
    played.end = await browser.wait_for("(e => e && e.innerText)(document.getElementById('complete'))", 15)
    played.counts = await browser.eval("({answered, workSeconds})")
    return None


def runs_of(cases: list[str]) -> list[str]:
    """The cases in the order they were played, each run of the same case once (A A B B -> A B)."""
    return [case for i, case in enumerate(cases) if i == 0 or cases[i - 1] != case]


def test_two_cases_are_played_one_at_a_time_each_to_its_end(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    args = [*DISCHARGE[:-2], "--limit", "2", "--model", "bedside/human", "-M", f"port={port}"]
    proc = start([*args, "--model-role", "patient=bedside/scripted", *SCRIPTED], tmp_path)
    played = Cases()

    async def session() -> None:
        async with Browser(tmp_path / "profile") as browser:
            await play_cases(browser, url, proc, played, dwell=0.3)

    began = time.time()
    asyncio.run(session())
    session_seconds = time.time() - began
    log = finished(proc, tmp_path)
    cases = [c["case"] for c in played.answered]
    # one case from its first turn to its last, then the other: never interleaved
    assert len(runs_of(cases)) == 2 and set(cases) == {"demo-001", "demo-002"}, cases
    first, second = runs_of(cases)
    # the other case's turn waits in a tab of its own, shown but closed, and the tabs keep their order
    waiting = [tabs for tabs in played.tabs if len(tabs) == 2]
    assert waiting, played.tabs
    assert all(f"case {first}" in tabs[0]["text"] and f"case {second}" in tabs[1]["text"] for tabs in waiting)
    assert all("opens when you finish this case" in tabs[1]["text"] for tabs in waiting)
    assert all(tab["whole"] for tabs in played.tabs for tab in tabs), played.tabs
    # each case's end, with its reason, then what comes next: the other case, then nothing more
    assert len(played.ends) >= 1, played.ends
    one = played.ends[0]["text"]
    assert f"Case {first} has ended" in one and "It ended because the conversation came to its end" in one, one
    assert f"Next: case {second}" in one and f"Start case {second}" in one, one
    if len(played.ends) == 2:  # the last case's end shows while it is scored (a fast run may end first)
        assert "All done" in played.ends[1]["text"], played.ends[1]
    # the end of the run: the page's counts are the log's
    outputs = human_outputs(log)
    assert "Session complete" in played.end and f"You sent {len(outputs)} replies" in played.end, played.end
    for case in (first, second):
        assert f"case {case}: complete — the conversation came to its end" in played.end, played.end
    from bedside.person_time import person_seconds

    assert played.counts["answered"] == len(outputs)
    assert played.counts["workSeconds"] == pytest.approx(person_seconds(o.metadata for o in outputs), abs=0.15)
    # the time the scripted person spent per case and role (the page's working time, recorded in the log)
    spent = {
        str(sample.id): person_seconds(
            e.output.metadata
            for e in sample.events
            if e.event == "model" and e.output and e.output.model == "bedside/human"
        )
        for sample in log.samples
    }
    assert all(seconds > 0 for seconds in spent.values()), spent
    # per case: the educator's replies (free text, no form), what the page showed them and what they typed
    educator = time_per_case(log, played.answered, discharge_answer, "discharge_educator")
    assert {r["case"]: r["person_seconds"] for r in educator} == pytest.approx(spent, abs=0.01)
    for row in educator:
        assert row["replies"] == len(EDUCATOR) and row["forms"] == 0, row
        assert row["words_typed"] == sum(words(t) for t in EDUCATOR) and row["words_read"] > 0, row
    assert sum(r["person_seconds"] for r in educator) <= session_seconds, (educator, session_seconds)


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


def test_a_killed_session_resumes_from_another_folder_and_the_page_counts_the_whole_run(tmp_path):
    """Two cases; the first played to its end, the second killed mid-way (kill -9) and resumed with the
    command the page names, from another folder: the journal is the log folder's, nothing asked twice, and
    the page's counts (replies, working time, finished cases) are the run's, as the log has them."""
    args = [*DISCHARGE[:-2], "--limit", "2", "--model", "bedside/human", "--model-role", "patient=bedside/scripted"]
    proc = start([*args, *SCRIPTED], tmp_path, log_dir_variable=False)  # no port, no journal: the defaults
    url = f"http://127.0.0.1:{page_port(tmp_path)}/"
    draft = "Call your doctor if you get a fever"
    moments: dict[str, float] = {}
    seen: dict[str, Any] = {}
    played = Cases()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def state() -> dict[str, Any]:
        try:
            [found] = (tmp_path / "logs" / "human").glob("*.state")
            return dict(json.loads(found.read_text()))
        except (OSError, ValueError):  # not written yet
            return {}

    def second_case_turn_2(played: Cases, call: dict[str, Any]) -> bool:
        return len(runs_of([c["case"] for c in played.answered])) == 2 and call["turn"] == 2

    async def session() -> None:
        async with Browser(tmp_path / "profile") as browser:
            call = await play_cases(browser, url, proc, played, until=second_case_turn_2, dwell=0.3)
            assert call is not None
            first = played.answered[0]["case"]
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
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            moments["killed"] = time.time()
            # the open tab says the eval stopped and names the command that resumes it beside its log
            banner = await browser.wait_for("document.getElementById('banner').innerText", timeout=30)
            command = banner.split("To resume the run: ", 1)[1].split(" — ", 1)[0]
            [location] = list((tmp_path / "logs").glob("*.eval"))
            assert read_eval_log(str(location), header_only=True).status == "started"
            assert command == f"inspect eval-retry {location} --log-dir {location.parent}", command
            # the person presses send while the eval is away: not sent, the text kept
            await browser.ctrl_enter()
            seen["away"] = await browser.wait_for("document.getElementById('message').innerText")
            # resumed from another folder, without INSPECT_LOG_DIR: the journal is found beside the log
            start(shlex.split(command)[1:], tmp_path, cwd=elsewhere, log_dir_variable=False)
            # the same address: the old tab finds the retried run and the draft it was typing
            call = await browser.wait_for(
                "connected && shownId ? calls.find(c => c.id === shownId) : null", timeout=120
            )
            assert call["turn"] == 2 and "answered from the journal" in await text_of(browser, "#notes")
            assert await browser.eval("document.getElementById('text').value") == draft
            seen["message"] = await text_of(browser, "#message")
            seen["status"] = await text_of(browser, "#status")
            seen["cases"] = await browser.eval("session.cases")
            seen["first"] = first
            await shoot(browser, "resumed_session")
        async with Browser(tmp_path / "profile2") as fresh:  # a new browser: the draft comes from the eval
            await served(url, STARTED[-1])
            await fresh.goto(url)
            call = await fresh.wait_for("shownId ? calls.find(c => c.id === shownId) : null", timeout=60)
            assert call["turn"] == 2 and await fresh.eval("document.getElementById('text').value") == draft
            await fresh.eval("document.getElementById('text').value = ''")
            await play_cases(fresh, url, STARTED[-1], resumed, goto=False)

    resumed = Cases()
    asyncio.run(session())
    retry = STARTED[-1]
    out, _ = retry.communicate(timeout=300)
    assert retry.returncode == 0, out[-3000:]
    logs = sorted((tmp_path / "logs").glob("*.eval"), key=lambda p: p.stat().st_mtime)
    assert len(logs) == 2  # the retried log beside the interrupted one
    log = read_eval_log(str(logs[-1]))
    assert log.status == "success" and len(log.samples) == 2
    # the stale refusal is gone once the eval is back; the counts are the run's, from its journal
    assert seen["away"].startswith("Not sent") and not seen["message"].startswith("Not sent"), seen
    assert "Reconnected" in seen["message"], seen["message"]
    assert "5 replies sent" in seen["status"], seen["status"]  # the first case's 4 and the second's first
    done = {c["case"]: c for c in seen["cases"]}
    assert done[seen["first"]]["state"] == "complete", seen["cases"]  # finished before the crash: from the journal
    assert "the conversation came to its end" in done[seen["first"]]["ending"], seen["cases"]
    # nothing asked twice: the second case's first turn came from the journal
    [second] = [s for s in log.samples if str(s.id) != seen["first"]]
    outputs = [e.output for e in second.events if e.event == "model" and e.output and e.output.model == "bedside/human"]
    assert [o.metadata["replayed"] for o in outputs] == [True, False, False, False]
    assert [c["turn"] for c in resumed.answered] == [2, 3, 4]
    assert second.metadata["end_reason"] == "clean_complete"
    # the typing before the crash counts: turn 2's working time starts before the kill
    typed = outputs[1].metadata
    assert typed["human_intervals"][0][0] < moments["killed"] and typed["human_seconds"] >= 2.0, typed
    # the page's counts at the end are the log's: every reply of the run and its working time
    from bedside.person_time import person_seconds

    every = human_outputs(log)
    assert len(every) == 8 and f"You sent {len(every)} replies" in resumed.end, resumed.end
    assert resumed.counts["answered"] == 8
    assert resumed.counts["workSeconds"] == pytest.approx(person_seconds(o.metadata for o in every), abs=0.15)
    assert f"case {seen['first']}: complete" in resumed.end and f"case {second.id}: complete" in resumed.end
    # one journal, the run's, in the log folder: none in the folders the commands ran in
    assert len(list((tmp_path / "logs" / "human").glob("*.jsonl"))) == 1
    assert not (elsewhere / "logs").exists()
    assert not list((REPO / "logs" / "human").glob(f"*{log.eval.task_id}*"))
