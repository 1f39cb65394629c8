"""A clinician study through a REAL Label Studio (``label-studio`` 1.23.2 in its own venv, ``make
.venv/.installed-labelstudio``), started by the test on 127.0.0.1 with SQLite: the study exported by ``bedside
study label-studio export``, one project per rater made with its labelling config through the REST API (so Label
Studio itself validates the config), the tasks imported, a simulated rater's annotations posted, the project
exported as JSON and read back by ``bedside study label-studio import``: every rating comes back as posted, the
tasks carry nothing that names a condition, and ``bedside study report`` reads the ratings. Authentication as
``label-studio-sdk`` 2.1.2 does it (legacy tokens are off by default): a user, a personal access token (a JWT
refresh token made in a logged-in session), exchanged for an access token.

Skipped with the reason when that venv is absent (``make test``); required by ``make test-label-studio``
(``BEDSIDE_REQUIRE_LABEL_STUDIO=1``)."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import bedside_command
from tests.reporting.synth import write
from tests.study.test_build import MODELS, run

pytestmark = pytest.mark.eval

REPO = Path(__file__).resolve().parents[2]
LABEL_STUDIO = REPO / ".venv" / "labelstudio" / "bin" / "label-studio"
EMAIL, PASSWORD = "rater@example.org", "study-password-1"
#: no call home: no version check on PyPI, no analytics, no error reports to Sentry
OFFLINE = {
    "LATEST_VERSION_CHECK": "false",
    "COLLECT_ANALYTICS": "false",
    "SENTRY_DSN": "",
    "FRONTEND_SENTRY_DSN": "",
    "SENTRY_RATE": "0",
}
#: the first start creates its SQLite database (migrations): about a minute on an idle 2-core machine
START_TIMEOUT = 900


def require() -> None:
    if LABEL_STUDIO.exists():
        return
    reason = f"Label Studio is not installed ({LABEL_STUDIO} missing): make .venv/.installed-labelstudio"
    if os.environ.get("BEDSIDE_REQUIRE_LABEL_STUDIO") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


class Server:
    """A Label Studio server of this test, and a client of its REST API."""

    def __init__(self, folder: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (folder / "server.log").open("w")
        started = time.monotonic()
        self.process = subprocess.Popen(
            [
                str(LABEL_STUDIO),
                "start",
                "--no-browser",
                "--port",
                str(self.port),
                "--internal-host",
                "127.0.0.1",
                "--host",
                self.url,
                "--data-dir",
                str(folder / "data"),
                "--username",
                EMAIL,
                "--password",
                PASSWORD,
            ],
            cwd=folder,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **OFFLINE, "LABEL_STUDIO_BASE_DATA_DIR": str(folder / "data")},
        )
        while not self.healthy():
            assert self.process.poll() is None, (folder / "server.log").read_text()[-3000:]
            assert time.monotonic() - started < START_TIMEOUT, "Label Studio did not start"
            time.sleep(1)
        self.start_seconds = time.monotonic() - started
        self.access = self.access_token(self.personal_access_token())

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=5) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def personal_access_token(self) -> str:
        """Log in (Django's session, its CSRF token) and create the user's personal access token."""
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = opener.open(f"{self.url}/user/login/").read().decode()
        form = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert form, "no CSRF token on Label Studio's login page"
        body = f"csrfmiddlewaretoken={form[1]}&email={EMAIL}&password={PASSWORD}".encode()
        opener.open(
            urllib.request.Request(f"{self.url}/user/login/", body, headers={"Referer": f"{self.url}/user/login/"})
        )
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        request = urllib.request.Request(
            f"{self.url}/api/token/",
            b"{}",
            method="POST",
            headers={"X-CSRFToken": csrf, "Referer": f"{self.url}/", "Content-Type": "application/json"},
        )
        return str(json.loads(opener.open(request).read())["token"])

    def access_token(self, personal: str) -> str:
        request = urllib.request.Request(
            f"{self.url}/api/token/refresh/",
            json.dumps({"refresh": personal}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request) as reply:
            return str(json.loads(reply.read())["access"])

    def api(self, method: str, path: str, data: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}",
            None if data is None else json.dumps(data).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self.access}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                return json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{method} {path}: {error.code} {error.read()[:2000]!r}") from error

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require()
    started = Server(tmp_path_factory.mktemp("label-studio"))
    print(f"Label Studio 1.23.2 first start: {started.start_seconds:.0f} s")
    try:
        yield started
    finally:
        started.stop()


def answer(data: dict[str, Any], name: str, choices: list[str], n: int) -> dict[str, Any]:
    """One control's answer, as Label Studio's interface posts it."""
    to = "left" if name.startswith("left") or name == "preference" else "right"
    return {"from_name": name, "to_name": to, "type": "choices", "value": {"choices": [choices[n % len(choices)]]}}


def test_a_study_round_trips_through_label_studio(server: Server, tmp_path: Path) -> None:
    paths = [write(run(model), tmp_path / f"{name}.eval") for name, model in MODELS.items()]
    study, exported = tmp_path / "study", tmp_path / "ls"
    done = bedside_command("study", "build", *paths, "--raters", "ann,bob", "--k", "2", "--out", str(study))
    assert done.returncode == 0, done.stdout
    done = bedside_command("study", "label-studio", "export", str(study), "--out", str(exported))
    assert done.returncode == 0, done.stdout
    config = (exported / "label_config.xml").read_text()
    design = json.loads((study / "study.json").read_text())
    items = {i["id"]: i for i in design["cases"][design["tasks"][0]["case"]]}
    expected, exports = set(), []
    for rater in ("ann", "bob"):
        text = (exported / f"{rater}.tasks.json").read_text()
        assert not [t for t in ("gpt", "claude", "openai", "anthropic", "human", "case-") if t in text.lower()]
        project = server.api("POST", "/api/projects/", {"title": f"study {rater}", "label_config": config})
        server.api("POST", f"/api/projects/{project['id']}/import", json.loads(text))
        tasks = server.api("GET", f"/api/tasks/?project={project['id']}&page_size=1000")["tasks"]
        assert len(tasks) == sum(t["rater"] == rater for t in design["tasks"])
        for n, task in enumerate(tasks):
            data, result = task["data"], []
            for side in ("left", "right"):
                for slot, item in enumerate(data["item_ids"]):
                    result.append(answer(data, f"{side}__{slot}", items[item]["choices"], n + slot))
                    expected.add(
                        (rater, data["task"], data[f"{side}_transcript"], item, result[-1]["value"]["choices"][0])
                    )
                result.append(answer(data, f"{side}__guess", ["model", "physician"], n))
                expected.add(
                    (rater, data["task"], data[f"{side}_transcript"], "guess", result[-1]["value"]["choices"][0])
                )
            result.append(answer(data, "preference", ["left, slightly", "right", "no preference"], n))
            expected.add((rater, data["task"], "", "preference", result[-1]["value"]["choices"][0]))
            server.api("POST", f"/api/tasks/{task['id']}/annotations/", {"result": result})
        path = tmp_path / f"export-{rater}.json"
        path.write_text(json.dumps(server.api("GET", f"/api/projects/{project['id']}/export?exportType=JSON")))
        exports.append(str(path))

    ratings = tmp_path / "ratings.csv"
    done = bedside_command("study", "label-studio", "import", str(study), *exports, "--out", str(ratings))
    assert done.returncode == 0, done.stdout
    back = {tuple(row.values()) for row in csv.DictReader(ratings.open())}
    assert back == expected
    done = bedside_command("study", "report", str(study), str(ratings))
    assert done.returncode == 0 and "2 raters, 6 cases" in done.stdout, done.stdout

    tampered = json.loads(Path(exports[0]).read_text())
    tampered[0]["annotations"][0]["result"][0]["from_name"] = "left__99"
    Path(exports[0]).write_text(json.dumps(tampered))
    done = bedside_command("study", "label-studio", "import", str(study), exports[0], "--out", str(tmp_path / "x.csv"))
    assert done.returncode == 2 and len(done.stdout.strip().splitlines()) == 1
    assert f"{exports[0]}: task 1 (" in done.stdout and "control 'left__99': field 'from_name'" in done.stdout
    assert not (tmp_path / "x.csv").exists()


def test_a_rater_sees_the_task_in_label_studios_own_page(server: Server, tmp_path: Path) -> None:
    """The labelling interface as Label Studio renders it in headless Chromium: the rater logs in, opens a task
    of their project, and reads both transcripts, the items' questions and their buttons (a screenshot is kept
    beside the test's files, to look at)."""
    import asyncio

    from tests.human.cdp import CHROMIUM, Browser

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} missing (make /usr/bin/chromium)")
    paths = [write(run(model), tmp_path / f"{name}.eval") for name, model in MODELS.items()]
    study, exported = tmp_path / "study", tmp_path / "ls"
    assert (
        bedside_command("study", "build", *paths, "--raters", "ann,bob", "--k", "2", "--out", str(study)).returncode
        == 0
    )
    assert bedside_command("study", "label-studio", "export", str(study), "--out", str(exported)).returncode == 0
    config = (exported / "label_config.xml").read_text()
    project = server.api("POST", "/api/projects/", {"title": "study ann (page)", "label_config": config})
    server.api("POST", f"/api/projects/{project['id']}/import", json.loads((exported / "ann.tasks.json").read_text()))
    task = server.api("GET", f"/api/tasks/?project={project['id']}&page_size=1")["tasks"][0]

    async def look() -> str:
        async with Browser(tmp_path / "chromium", width=1400, height=1000) as page:
            await page.goto(f"{server.url}/user/login/")
            await page.eval(
                f"document.querySelector('input[name=email]').value = {json.dumps(EMAIL)};"
                f"document.querySelector('input[name=password]').value = {json.dumps(PASSWORD)};"
                "document.querySelector('form').submit()"
            )
            await page.wait_for("!location.pathname.startsWith('/user/login')", timeout=120)
            await page.goto(f"{server.url}/projects/{project['id']}/data?task={task['id']}")
            # the labelling interface (not the task table beside it, which lists the data): its headers
            shown = json.dumps(f"Left: {task['data']['left_transcript']}")
            await page.wait_for(f"document.body.innerText.includes({shown})", timeout=180)
            await page.wait_for("document.body.innerText.includes('Which conversation would you rather')", timeout=60)
            await asyncio.sleep(2)  # its layout settles
            await page.screenshot(tmp_path / "label-studio-task.png")
            return str(await page.eval("document.body.innerText"))

    text = asyncio.run(look())
    data = task["data"]
    for shown in (
        f"Left: {data['left_transcript']}",
        f"Right: {data['right_transcript']}",
        "Discharge note",
        data["left__q0"],
        "Who do you think the clinician",
        "Which conversation would you rather",
        "left, strongly",
        "cannot tell",
    ):
        assert shown in text, shown
    assert not [t for t in ("gpt", "claude", "openai", "anthropic") if t in text.lower()]
