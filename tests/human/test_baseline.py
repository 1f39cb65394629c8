"""A run with a person as the educator is a normal log: in `bedside report`'s Table 1 and a sweep's
leaderboard it is the row labelled ``human``, with its own n and interval, and paired differences against
each model on the shared cases. Each run keeps its own journal: a new run is asked afresh, and replies of
another run are reused only when asked (``-M replay=across_runs``), and then announced. The person is
played here by a thread posting to the page's API (the browser tests drive the page itself)."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from inspect_ai import eval

from bedside.discharge.annotate import from_logs
from bedside.discharge.report import table1
from bedside.reporting.load import HUMAN_LABEL, load, scores_frame
from bedside.reporting.sweep import case_values, leaderboard
from tests import forked
from tests.conftest import REPO
from tests.human.test_browser import INSPECT, discharge_answer, free_port, judge_answer

pytestmark = pytest.mark.eval

ROLES = {r: "bedside/scripted" for r in ("patient", "monitor", "grader")}


def nest(values: dict[str, object]) -> dict[str, object]:
    """A form's field values by path (``answers/0/answer``) as the JSON reply they make."""
    root: dict[str, object] = {}
    for path, value in values.items():
        keys: list[str | int] = [int(k) if k.isdigit() else k for k in path.split("/")]
        node: object = root
        for key, following in zip(keys, keys[1:]):
            fresh: object = [] if isinstance(following, int) else {}
            if isinstance(node, list):
                while len(node) <= int(key):
                    node.append(fresh)
                node = node[int(key)]
            else:
                node = node.setdefault(key, fresh)  # type: ignore[union-attr]
        if isinstance(node, list):
            node.append(value)
        else:
            node[keys[-1]] = value  # type: ignore[index]
    return root


def reply_to(call: dict) -> str:
    """The person's reply: an educator's or a patient's, else a physician judging."""
    reply = discharge_answer(call)
    if reply is None:
        answer = judge_answer(call)
        reply = answer if isinstance(answer, str) else nest(answer)
    return reply if isinstance(reply, str) else json.dumps(reply)


class Person(threading.Thread):
    """Answers every call the page lists, through its API, until stopped; counts its replies."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.stop, self.replies = url, threading.Event(), 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                pending = json.load(urllib.request.urlopen(self.url + "api/pending", timeout=2))["pending"]
            except (OSError, http.client.HTTPException, ValueError):  # no page yet, or its process stopped mid-answer
                time.sleep(0.3)
                continue
            for call in pending:
                body = json.dumps({"id": call["id"], "text": reply_to(call)}).encode()
                request = urllib.request.Request(self.url + "api/reply", body, {"Content-Type": "application/json"})
                try:
                    urllib.request.urlopen(request)
                except (OSError, http.client.HTTPException):  # the page's process stopped (a run killed mid-reply)
                    break
                self.replies += 1
            time.sleep(0.2)


def human_run(port: int, limit: int, log_dir: str, **options: str) -> tuple[object, int]:
    """A run with the person as the educator: (its log, how many replies the person typed)."""
    person = Person(f"http://127.0.0.1:{port}/")
    person.start()
    try:
        [log] = eval(
            "bedside/discharge",
            model="bedside/human",
            model_args={"port": port, **options},
            model_roles=ROLES,
            limit=limit,
            task_args={"min_turns": 4},
            log_dir=log_dir,
            display="none",
        )
    finally:
        person.stop.set()
    return log, person.replies


def replayed(log) -> list[bool]:
    return [
        e.output.metadata["replayed"]
        for s in log.samples
        for e in s.events
        if e.event == "model" and e.output is not None and e.output.model == "bedside/human"
    ]


def test_the_human_run_is_a_report_row_with_paired_differences_and_its_own_journal(tmp_path, monkeypatch):
    from bedside.providers import human

    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    port = free_port()
    first, typed = human_run(port, 3, str(tmp_path / "human"))
    # the run's own journal, named by its task_id, in its log folder (not the variable's)
    [journal] = (tmp_path / "human" / "human").glob("*.jsonl")
    assert not (tmp_path / "logs").exists()
    assert journal.name == f"discharge-{first.eval.task_id}.jsonl" and typed == sum(1 for _ in replayed(first))
    [scripted] = eval(
        "bedside/discharge",
        model="bedside/scripted",
        model_roles=ROLES,
        limit=2,
        task_args={"min_turns": 4},
        log_dir=str(tmp_path / "scripted"),
        display="none",
    )
    assert first.status == scripted.status == "success"
    loaded = load([first.location, scripted.location])
    # bedside report's Table 1: the human row with its own n and interval, inside the score's scale
    long, _ = table1(scores_frame(loaded))
    mine = long[long["model"] == HUMAN_LABEL].set_index("key")
    assert (mine["n"] == 3).all()
    assert 0 <= mine.loc["tcs", "ci_lower"] <= mine.loc["tcs", "mean"] <= mine.loc["tcs", "ci_upper"] <= 1
    assert 1 <= mine.loc["clarity", "ci_lower"] <= mine.loc["clarity", "ci_upper"] <= 5
    # the sweep's leaderboard: the human row and the paired difference on the shared cases
    ranking, pairs = leaderboard(case_values(loaded))
    rows = ranking[ranking["key"] == "tcs"]
    assert set(rows["model"]) == {HUMAN_LABEL, "bedside/scripted"}
    row = rows[rows["model"] == HUMAN_LABEL].iloc[0]
    assert row["n"] == 3 and row["ci_lower"] <= row["mean"] <= row["ci_upper"]
    pair = pairs[pairs["key"] == "tcs"].iloc[0]
    assert {pair["model_a"], pair["model_b"]} == {HUMAN_LABEL, "bedside/scripted"}
    assert pair["n_pairs"] == 2  # only the cases both have

    # a physician re-judges the scripted run in the browser: a run of its own, its journal beside the new
    # log, and their ratings export for Table 5
    judged = rescore_by_person(port, scripted.location, tmp_path / "phys_a")
    assert judged.eval.model_roles["grader"].model == "bedside/human"
    assert all(s.scores["topic_checklist"].metadata["answers"]["Q1"] for s in judged.samples)  # the physician's "yes"
    assert (tmp_path / "phys_a" / "human" / f"judged-{Path(judged.location).stem}.jsonl").exists()
    rows = from_logs([("phys_a", str(tmp_path / "phys_a"))])
    assert set(rows["annotator"]) == {"phys_a"} and {"Q6.2", "naturalness"} <= set(rows["item"])

    # a new run on the same case, even on the first run's journal, is asked afresh
    second, typed = human_run(port, 1, str(tmp_path / "second"), journal=str(journal))
    assert typed > 0 and not any(replayed(second))
    # asked to reuse the journal's replies of other runs: answered from it, and announced
    third, typed = human_run(port, 1, str(tmp_path / "third"), journal=str(journal), replay="across_runs")
    assert typed == 0 and all(replayed(third)) and replayed(third)
    assert human._desk is not None and any("(another run" in note for note in human._desk.session.replays)


def rescore_by_person(port: int, log: str, out: Path):
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import get_model

    from bedside.reporting.rescore import rescore

    person = Person(f"http://127.0.0.1:{port}/")
    person.start()
    try:
        [written] = rescore([log], get_model("bedside/human", port=port), out)
    finally:
        person.stop.set()
    return read_eval_log(str(written))


def test_an_option_of_the_person_given_to_the_model_under_test_is_one_line(tmp_path):
    done = forked.run(
        [INSPECT, "eval", "bedside/discharge", "--model", "bedside/scripted", "-M", "journal=x.jsonl", "--limit", "1"]
        + ["--log-dir", str(tmp_path), "--display", "plain"],
        cwd=REPO,
    )
    said = (done.stdout + done.stderr).strip()
    assert done.returncode != 0 and "Traceback" not in said, said[-2000:]
    assert "bedside/scripted takes no option 'journal'" in said
    assert "{model: bedside/human, model_args: {journal:" in said.replace("\n", " ")
