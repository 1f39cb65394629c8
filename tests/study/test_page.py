"""bedside's rating page (``bedside study serve``): each rater's own link (a secret token; any other address refused),
only their packet's tasks and nothing that names a condition (the key is moved out of the study folder while the
page serves), answers refused field by field as the page names them, each task sent appended to the rater's
journal, a later sending of a task replacing the earlier one when read; then two raters at once in headless
Chromium, the server killed (kill -9) mid-study and served again: the same links, progress and answers, a draft
kept, nothing lost or counted twice, and ``bedside study report`` over the journals.

Screenshots go to ``BEDSIDE_SCREENS`` (when set): a task at 1280 px, a refusal, a task after the resume."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bedside.study.journal import Journal, journal_path
from bedside.study.page import RatingDesk
from bedside.study.ratings import Study, read_ratings, read_study
from tests import forked
from tests.conftest import bedside_command
from tests.human.cdp import CHROMIUM, Browser
from tests.reporting.synth import write
from tests.study.logs import CASES, ITEMS_PER_TRANSCRIPT, MODELS, run

BEDSIDE = str(Path(sys.executable).with_name("bedside"))
SCREENS = Path(os.environ["BEDSIDE_SCREENS"]) if os.environ.get("BEDSIDE_SCREENS") else None
#: what would tell a rater the condition of a transcript
TELLS = ("gpt", "claude", "openai", "anthropic", "human", "bedside/", *CASES)
PER_TASK = 2 * ITEMS_PER_TRANSCRIPT + 1  # both transcripts' items and guesses, the preference


def build(tmp: Path, cases: list[str]) -> Path:
    paths = [write(run(model, cases), tmp / f"{name}.eval") for name, model in MODELS.items()]
    study = tmp / "study"
    done = bedside_command(
        "study", "build", *paths, "--raters", "ann,bob", "--k", "2", "--seed", "5", "--out", str(study)
    )
    assert done.returncode == 0, done.stdout
    return study


def request(url: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, {"Content-Type": "application/json"})) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def complete(task: dict[str, Any], value: str = "4") -> dict[str, Any]:
    """Every answer of a packet's task: the case's items (``value`` on a 1-5 scale, else the first choice), guesses
    and the preference."""
    side = {i["id"]: value if len(i["choices"]) == 5 else i["choices"][0] for i in task["items"]}
    return {"left": {**side, "guess": "model"}, "right": {**side, "guess": "physician"}, "preference": "left"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, RatingDesk]]:
    """A built study served in this process, its key moved out of the folder (the page must not need it)."""
    study = build(tmp_path, CASES[:3])
    shutil.move(study / "key", tmp_path / "key-aside")
    desk = RatingDesk(study, 0)
    threading.Thread(target=desk.server.serve_forever, daemon=True).start()
    yield study, desk
    desk.server.shutdown()
    desk.server.server_close()


def test_a_link_serves_one_raters_tasks_blinded_and_refuses_what_is_off_scale(served, tmp_path: Path) -> None:
    study, desk = served
    links = {r: desk.link(r) for r in ("ann", "bob")}
    tokens = json.loads((study / "page" / "links.json").read_text())["tokens"]
    assert len(set(tokens.values())) == 2 and all(len(t) >= 20 for t in tokens.values())
    assert (study / "page" / "links.json").stat().st_mode & 0o077 == 0  # the organiser's only
    # any other address is refused, saying so; a token cut short too
    for wrong in (f"http://127.0.0.1:{desk.port}/", f"http://127.0.0.1:{desk.port}/nope/", links["ann"][:-4] + "/"):
        status, text = request(wrong)
        assert status == 403 and "This is not a rater's link" in text, wrong
        assert request(wrong + "api/state")[0] == 403
    status, text = request(links["ann"] + "api/state")
    assert status == 200
    assert request(links["ann"].rstrip("/")) == request(links["ann"])  # the link without its slash: the page
    state = json.loads(text)
    design = json.loads((study / "study.json").read_text())
    assert [t["task"] for t in state["tasks"]] == [t["code"] for t in design["tasks"] if t["rater"] == "ann"]
    assert not [t for t in TELLS if t in text.lower()]
    assert (state["done"], state["total"]) == (0, 3)
    first = state["tasks"][0]

    answers = complete(first)
    answers["left"]["naturalness"] = "7"
    del answers["right"]["clarity"]
    answers["right"]["Q99"] = "yes"
    del answers["preference"]
    status, text = request(links["ann"] + "api/rate", {"task": first["task"], "answers": answers})
    refused = json.loads(text)
    assert status == 400 and refused["errors"] == {
        "left/naturalness": "Left conversation, naturalness: '7' is not on its scale (1 / 2 / 3 / 4 / 5)",
        "right/clarity": "Right conversation, clarity: no answer",
        "right/Q99": "Right conversation, Q99: no such question in this task",
        "preference": "preference: no answer",
    }
    assert refused["message"].startswith("Not sent: 4 answer(s) to give or correct, marked in red: ")
    assert not journal_path(study, "ann").exists()
    # another rater's task through this link: refused
    bobs = next(t for t in design["tasks"] if t["rater"] == "bob")["code"]
    assert request(links["ann"] + "api/rate", {"task": bobs, "answers": complete(first)})[0] == 404

    # sent, then sent again changed: two lines, the later one counts
    assert request(links["ann"] + "api/rate", {"task": first["task"], "answers": complete(first, "4")})[0] == 200
    status, text = request(links["ann"] + "api/rate", {"task": first["task"], "answers": complete(first, "2")})
    assert status == 200 and json.loads(text)["done"] == 1
    assert len(journal_path(study, "ann").read_text().splitlines()) == 2
    state = json.loads(request(links["ann"] + "api/state")[1])
    assert state["done"] == 1 and state["sent"][first["task"]]["answers"] == complete(first, "2")
    # a line cut short by a crash (never acknowledged) is skipped, and the next line is whole
    with journal_path(study, "ann").open("a") as f:
        f.write('{"rater": "ann", "task": "S00')
    second = state["tasks"][1]
    assert request(links["ann"] + "api/rate", {"task": second["task"], "answers": complete(second)})[0] == 200
    journal = Journal(journal_path(study, "ann"))
    assert sorted(journal.tasks) == sorted([first["task"], second["task"]])
    assert journal.lines == {first["task"]: 2, second["task"]: 4}  # the line cut short is line 3
    # a journal appended to numbers its lines as one reading the file does
    journal.append("ann", second["task"], journal.tasks[second["task"]]["ratings"])
    assert journal.lines == Journal(journal_path(study, "ann")).lines == {first["task"]: 2, second["task"]: 5}

    shutil.move(tmp_path / "key-aside", study / "key")
    ratings = read_ratings(Study.load(study))
    assert len(ratings) == 2 * PER_TASK
    assert len(read_study(study)[1]) == 2 * PER_TASK  # bedside report --study: the empty templates and the journals
    mine = ratings[(ratings["task"] == first["task"]) & (ratings["item"] == "naturalness")]
    assert list(mine["value"]) == ["2", "2"]
    # a rating in a CSV and in a journal is given twice: refused, naming both
    path = tmp_path / "also.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["rater", "task", "transcript", "item", "value"])
        writer.writerow(["ann", first["task"], first["left"]["transcript"], "naturalness", "3"])
    done = bedside_command("study", "report", str(study), str(path))
    assert done.returncode == 2 and "rating given twice (also " in done.stdout
    assert (
        "journal.jsonl: line 2: rating given twice (also " in done.stdout and len(done.stdout.strip().splitlines()) == 1
    )


# ---------------------------------------------------------------------------------------------------
# two raters at once in headless Chromium; the server killed and served again

STARTED: list[forked.Forked | Any] = []


@pytest.fixture
def stop_servers() -> Iterator[None]:
    yield
    while STARTED:
        forked.stop(STARTED.pop())


def serve(study: Path) -> tuple[Any, dict[str, str]]:
    """``bedside study serve STUDY`` as a process of its own, and the links it prints."""
    proc = forked.start([BEDSIDE, "study", "serve", str(study)], stderr=subprocess.STDOUT)
    STARTED.append(proc)
    printed, deadline = "", time.time() + 60
    while time.time() < deadline and "serve again" not in printed:
        assert proc.poll() is None, printed + proc.stdout.read()
        printed += proc.stdout.read()
        time.sleep(0.1)
    return proc, dict(re.findall(r"^  (\w+): (http://127\.0\.0\.1:\d+/\S+/)  \(", printed, re.M))


FILL = """((skip, overrides) => {  // every answer of the task shown, as a rater clicks them
  for (const group of document.querySelectorAll('.choices')) {
    const inputs = [...group.querySelectorAll('input')], name = inputs[0].name;
    if (skip.includes(name)) continue;
    const pick = overrides[name] ?? inputs[{5: 3, 2: 0, 3: 0, 7: 2}[inputs.length]].value;
    group.querySelector(`input[value="${pick}"]`).click();
  }
})"""


#: whether the conversations are on screen, left of the questions
BESIDE = """(() => {
  const reading = document.querySelector('.reading').getBoundingClientRect();
  const questions = document.querySelector('table.questions').getBoundingClientRect();
  return reading.right <= questions.left && reading.top >= 0 && reading.top < innerHeight && reading.bottom > 0;
})()"""


async def fill(page: Browser, skip: tuple[str, ...] = (), **overrides: str) -> None:
    await page.eval(f"{FILL}({json.dumps(list(skip))}, {json.dumps(overrides)})")


async def send(page: Browser, done: int) -> None:
    await page.click("#send")
    await page.wait_for(f"study.done === {done} && document.getElementById('message').className === 'ok'")


async def shot(page: Browser, name: str, full: bool = True) -> None:
    """The whole page from its top (``full``), or what the rater sees now; and what a wide screen (1920 px) shows,
    the conversations beside the questions."""
    if SCREENS is not None:
        if full:
            await page.eval("window.scrollTo(0, 0)")
        await page.screenshot(SCREENS / f"study-{name}-1280.png", full=full)
        await page.viewport(1920, 1080)
        await page.screenshot(SCREENS / f"study-{name}-1920.png")
        await page.viewport(*page.size)


@pytest.mark.eval
@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent: apt-get install -y chromium")
def test_two_raters_at_once_through_a_killed_server(tmp_path: Path, stop_servers: None) -> None:
    study = build(tmp_path, CASES[:3])
    shutil.move(study / "key", tmp_path / "key-aside")
    proc, links = serve(study)
    assert sorted(links) == ["ann", "bob"]
    opened: dict[str, float] = {}
    seen: dict[str, Any] = {}

    async def session() -> None:
        nonlocal proc
        async with Browser(tmp_path / "ann") as ann, Browser(tmp_path / "bob") as bob:
            await asyncio.gather(ann.goto(links["ann"]), bob.goto(links["bob"]))
            for name, page in (("ann", ann), ("bob", bob)):
                await page.wait_for("study !== null && document.getElementById('send') !== null")
                opened[name] = time.time()
                shown = (await page.eval("document.body.innerText")).lower()
                assert "task 1 of 3" in shown and "0 of 3 tasks sent" in shown
                assert not [t for t in TELLS if t in shown], name
                assert await page.eval("document.querySelectorAll('#tasks button').length") == 3
            seen["ann first"] = await ann.eval("current")
            await shot(ann, "task")
            # on a laptop's screen (1280 px) the conversations stay in view beside the questions, to the last one
            await ann.eval("document.querySelector('.preference').scrollIntoView()")
            assert await ann.eval(BESIDE), "the conversations left the screen while the rater answered"
            # ann leaves an answer out: refused, the field named as the page shows it and marked
            await fill(ann, skip=("right/clarity",))
            await ann.click("#send")
            message = await ann.wait_for(
                "document.getElementById('message').className === 'error' && document.getElementById('message').innerText"
            )
            assert "Right conversation, clarity" in message
            assert await ann.eval(
                "document.querySelector('[data-field=\"right/clarity\"]').classList.contains('invalid')"
            )
            await shot(ann, "refused", full=False)
            await asyncio.sleep(3)  # working on it: the page reports work every 2 s
            await fill(ann)
            # both raters send at once
            await fill(bob)
            await asyncio.gather(send(ann, 1), send(bob, 1))
            await fill(ann)
            await send(ann, 2)
            # bob answers part of his second task, then the server dies
            await fill(bob, skip=("preference",), **{"left/naturalness": "1"})
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            await bob.click("#send")
            away = await bob.wait_for(
                "document.getElementById('message').className === 'error' && document.getElementById('message').innerText"
            )
            assert away.startswith("Not sent: the study's server is not answering")

            proc, again = serve(study)
            assert again == links  # the same links
            # the open pages find it again; a new tab of the same link shows what was sent
            await bob.wait_for("connected", timeout=30)
            await ann.goto(links["ann"])
            await ann.wait_for("study !== null && document.getElementById('send') !== null")
            assert "2 of 3 tasks sent" in await ann.eval("document.body.innerText")
            assert await ann.eval("document.querySelectorAll('#tasks button.sent').length") == 2
            # ann goes back to her first task: her answers are there; she changes one and sends it again
            await ann.click(f'#tasks button[data-task="{seen["ann first"]}"]')
            assert await ann.eval("document.querySelector('input[name=\"left/naturalness\"]:checked').value") == "4"
            await fill(ann, **{"left/naturalness": "2"})
            assert "changed" in await ann.eval("document.getElementById('task-state').innerText")
            await send(ann, 2)
            await fill(ann)
            await send(ann, 3)
            assert "All 3 tasks sent" in await ann.eval("document.body.innerText")
            # bob's unsent answers are still on his page: he completes and sends them, then his last task
            assert await bob.eval("document.querySelector('input[name=\"left/naturalness\"]:checked').value") == "1"
            await fill(bob, **{"left/naturalness": "1"})
            await send(bob, 2)
            await fill(bob)
            await send(bob, 3)
            await shot(bob, "finished")

    asyncio.run(session())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    lines = {r: journal_path(study, r).read_text().splitlines() for r in ("ann", "bob")}
    assert (len(lines["ann"]), len(lines["bob"])) == (4, 3)  # ann sent her first task twice
    shutil.move(tmp_path / "key-aside", study / "key")
    ratings = read_ratings(Study.load(study))
    assert len(ratings) == 6 * PER_TASK  # every task once: nothing lost, nothing counted twice
    assert not ratings.duplicated(["rater", "task", "transcript", "item"]).any()
    naturalness = ratings[(ratings["item"] == "naturalness") & (ratings["transcript"] != "")]
    changed = naturalness[naturalness["task"] == seen["ann first"]]
    assert sorted(changed["value"]) == ["2", "4"]  # left changed to 2; right as first sent
    assert (naturalness["value"] == "1").sum() == 1  # bob's answer typed before the kill
    # the working time on each task went with it; ann's first: most of the 3 s she worked on it
    journal = Journal(journal_path(study, "ann"))
    seconds = {task: line["seconds"] for task, line in journal.tasks.items()}
    assert seconds[seen["ann first"]] >= 1.0 and all(s <= time.time() - opened["ann"] for s in seconds.values())

    done = bedside_command("study", "report", str(study), "--csv", str(tmp_path / "out.csv"))
    assert done.returncode == 0, done.stdout
    assert f"2 raters, 3 cases, {6 * PER_TASK} ratings" in done.stdout and "Bradley-Terry" in done.stdout
    assert "Working time on the rating page" in done.stdout
