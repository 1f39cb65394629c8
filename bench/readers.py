"""The readers against Inspect's own: sweep-sized DischargeBench logs written without model calls, and the
time and peak memory of ``bedside report``, ``bedside compare`` and the sweep leaderboard beside
``inspect_ai.analysis.samples_df`` over the same logs.

    .venv/bin/python bench/readers.py make --samples 477 --models 10 --out logs/bench/sweep   # 10 logs x 477
    .venv/bin/python bench/readers.py time --distinct 48    # 48 sessions built per log, the other cases copies
    .venv/bin/python bench/readers.py time                       # 480, 2,385 and 4,770 samples
    .venv/bin/python bench/readers.py time --sizes 480 --dir logs/bench/readers-small

``make`` writes ``--models`` logs (one per model under test, ``bench/educator-01``, ...) of ``--samples``
DischargeBench cases each (the same case ids in every log, as a sweep's), each sample a real scripted
sample (one run of ``bedside/scripted`` in every role, made once: ``--template`` or
``logs/bench/readers-template/``) stretched to its own session length and note length:

- session length: the paper's rule (a floor of 10 turns, the 100-turn ceiling; Table 7: up to 30 % of a
  model's sessions end at 15 turns or fewer); drawn per sample: 15 % short (10-15 turns), 5 % at the
  ceiling, the rest uniform over 30-99 (:func:`session_turns`); a turn is one message, as the paper's;
- note length: the paper's 477 notes, 9,234.9 ± 4,380.1 characters (Table 4), drawn from a normal
  clipped to 1,500-30,000 (:func:`note_chars`);
- each turn is the template's turn of the same role and place (openings, the middle cycled, the closing
  last) with a sentence of its own, so that no two turns are the same text; every model call of the
  session is rebuilt around the new history as the solver builds it (the educator's and the patient's
  message lists, the monitor's rendered history, the judges' and comprehension prompts), the note
  replaced wherever the template holds it;
- scores: every key the scorers wrote in the template, drawn per sample (Likert 1-5, rates 0-1, the
  encounter's outcome flags and turns consistent with the session), each model a little better or worse;
  persona and ICD chapter drawn per case (the strata); tokens of every call ~ characters / 4, summed
  per model and role into the sample's and the log's usage, and per role, model and mode into the health
  score's record of the sample's calls (:mod:`bedside.sample_usage`, made from the sample's events as the
  scorer makes it), which ``bedside report`` reads from the summaries.

With ``--distinct N``, each log builds its first N cases so and writes every further case as a copy of one of
them (:func:`copy_of`: its own id, uuid, persona, ICD chapter and drawn scores; the same session, events and record
of calls, whose texts name the case it was built for): about 85 ms of CPU a sample instead of 210, nearly all of
it Inspect's recorder (serializing and compressing the sample). Session lengths are then N draws per log.

The logs are written sample by sample through Inspect's own ``.eval`` recorder (:mod:`bedside.log_writer`: start,
samples, summaries, reductions, header: as a run writes them), with new uuids; the header's results are
recomputed from the samples' scores by Inspect (``recompute_metrics``). Each event is stored as the recorder
stores a run's (Inspect's ``condense_sample``, done on the JSON here: a model call's message texts over 100
characters as attachments; the other events as the template's run stored them). What differs from a real
run: the texts are the scripted model's with a sentence added; tokens are characters / 4; the events'
timestamps, the encounter's closing store events, the comprehension answers and the judges' replies and
explanations are the template's; no sample errs, retries or falls back; one epoch.

``report_tables`` is ``bedside report --no-figures`` (the same tables, the figures not drawn).

``time`` makes the logs of each size (or reads them from ``--dir``) and runs each reader as its own
process, ``--concurrent`` at once (default 1): its wall-clock (Python's start-up and imports included, as a
user runs the command), its CPU seconds and its peak RSS, measured two ways and the larger given: psutil
polling every 50 ms of the RSS summed over the process and its children, and the kernel's ``ru_maxrss`` of
the waited process (``os.wait4``, which gives the CPU seconds too). Each size is a sweep (:data:`SIZES`): 480
= 2 models x 240 cases, 2,385 = 5 x 477 and 954 = 2 x 477 (the first logs of the 4,770 sweep), 4,770 = 10 x
477; 240 = the first log of the 480 sweep. ``compare`` reads the sweep's first two logs (``bedside compare
LOG1 LOG2``), and ``samples_df`` is run on those two logs too (when the sweep has more), for its ratio. The
leaderboard has no command of its own (it is a section of ``bedside report`` when two models share cases):
it is timed as the reading and ranking its section does (``load``, ``sweep.case_values``,
``sweep.leaderboard``: :func:`read_leaderboard`). A reader whose RSS passes ``--rss-limit-gb``, or the free
memory less 2 GB, is stopped and reported so (the machine is shared). Writes ``readers-<time>.json`` and
``RESULTS-readers.md`` in the run's folder and prints the table (``table`` prints it again from the JSON).
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, get_args

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench import common  # noqa: E402

HERE = Path(__file__).resolve().parent
LOGS = HERE.parent / "logs" / "bench"
TEMPLATE_DIR = LOGS / "readers-template"
BIN = Path(sys.executable).parent

#: total samples -> (models, cases per model); a size with as many cases per log as a larger one reads the first
#: logs of the larger one's sweep (2,385: the first 5 models of the 10 x 477 sweep), so each sweep is written once
SIZES = {240: (1, 240), 480: (2, 240), 954: (2, 477), 2385: (5, 477), 4770: (10, 477)}

#: the paper's note length (Table 4: characters, mean and SD over the 477 notes)
NOTE_MEAN, NOTE_SD = 9234.9, 4380.1

EDUCATOR_LINES = (
    "Let me say that once more in plain words, because it matters for the next few weeks at home.",
    "If anything about this is unclear, please stop me and ask; there is no silly question here.",
    "Your nurse will give you a printed copy of this, and your pharmacy can go over the doses again.",
    "Can you tell me in your own words what you will do if this happens at home?",
    "We will come back to your medicines in a moment; first I want to be sure this part is clear.",
)
PATIENT_LINES = (
    "I think I follow, but my wife usually keeps track of these things.",
    "Okay. That makes sense now.",
    "Sorry, can you say that part again, slower?",
    "I was worried about that, honestly.",
    "Right, I'll write that down when I get home.",
)


# ---------------------------------------------------------------------------------------------
# what the paper says a session and a note look like


def session_turns(rng: random.Random) -> int:
    """A session's length in turns (messages): 15 % short (10-15, the paper's short sessions), 5 % at the
    100-turn ceiling, the rest uniform over 30-99."""
    u = rng.random()
    if u < 0.15:
        return rng.randint(10, 15)
    if u < 0.20:
        return 100
    return rng.randint(30, 99)


def note_chars(rng: random.Random) -> int:
    return int(min(30000, max(1500, rng.gauss(NOTE_MEAN, NOTE_SD))))


# ---------------------------------------------------------------------------------------------
# the template: one real scripted sample


def template_log(path: str | None) -> str:
    """A scripted DischargeBench log of one sample (``path``, or made once in ``TEMPLATE_DIR``)."""
    if path:
        return path
    found = sorted(TEMPLATE_DIR.glob("*.eval"))
    if found:
        return str(found[-1])
    from inspect_ai import eval
    from inspect_ai.model import get_model

    from bedside.tasks.discharge import discharge

    print(f"readers: one scripted DischargeBench sample as the template ({TEMPLATE_DIR}) ...", flush=True)
    scripted = get_model("bedside/scripted", memoize=False)
    [log] = eval(
        discharge(),
        model=scripted,
        model_roles={r: scripted for r in ("patient", "monitor", "grader")},
        limit=1,
        log_dir=str(TEMPLATE_DIR),
        display="none",
        log_realtime=False,
    )
    if log.status != "success":
        raise RuntimeError(f"the template run failed: {log.error}")
    return log.location


class Template:
    """The template sample as JSON, split into what comes before the session, each turn's events and
    what comes after (the comprehension questions and the scorers)."""

    def __init__(self, location: str) -> None:
        from inspect_ai.log import read_eval_log

        log = read_eval_log(location, resolve_attachments=True)
        [sample] = log.samples or []
        self.header = log.model_copy(update={"samples": None, "reductions": None})
        self.sample = sample.model_dump(mode="json", exclude_none=True)
        self.sample["attachments"] = {}
        # the events that are no model call as the run stored them (their long texts as attachments)
        [stored] = read_eval_log(location).samples or []
        condensed = stored.model_dump(mode="json", exclude_none=True)
        self.stored_events = {e["uuid"]: e for e in condensed["events"] if e["event"] != "model"}
        refs = set(re.findall(r"attachment://([0-9a-f]+)", json.dumps(list(self.stored_events.values()))))
        self.attachments = {k: v for k, v in condensed["attachments"].items() if k in refs}
        store = self.sample["store"]
        self.turns: list[dict[str, Any]] = store["EncounterStore:history"]
        self.messages = [t["message"] for t in self.turns]
        self.raws = [t.get("raw") or t["message"] for t in self.turns]
        self.note: str = self.sample["metadata"]["case"]["discharge_note"]
        self.case_id = str(sample.id)
        events = self.sample["events"]
        starts = [i for i, e in enumerate(events) if e["event"] == "span_begin" and e.get("type") == "turn"]
        self.before = events[: starts[0]]
        self.blocks: list[list[dict[str, Any]]] = []
        for start in starts:
            end = next(
                i
                for i in range(start, len(events))
                if events[i]["event"] == "span_end" and events[i].get("id") == events[start]["id"]
            )
            self.blocks.append(events[start : end + 1])
        self.after = [e for e in events[end + 1 :] if not (e["event"] == "info" and e.get("source") == "encounter")]
        if len(self.turns) < 6 or len(self.blocks) != len(self.turns):
            raise ValueError(f"{location}: the template needs a session of at least 6 turns, one span each")

    def place(self, k: int, total: int) -> int:
        """The template turn that new turn ``k`` of ``total`` copies: the openings as they are, the last two
        the template's closing, the middle cycled (same role: same parity)."""
        n = len(self.turns)
        if k >= total - 2:
            return n - (total - k)
        if k < n - 2:
            return k
        return 2 + (k - 2) % (n - 4)


# ---------------------------------------------------------------------------------------------
# one new sample


class Session:
    """The new history of one sample, and how the template's texts and message lists become its own."""

    def __init__(self, template: Template, case_id: str, turns: int, note: str, rng: random.Random) -> None:
        self.t = template
        self.total = turns
        self.places = [template.place(k, turns) for k in range(turns)]
        self.messages: list[str] = []
        self.raws: list[str] = []
        for k, j in enumerate(self.places):
            lines = EDUCATOR_LINES if template.turns[j]["role"] == "educator" else PATIENT_LINES
            extra = f" {rng.choice(lines)} ({case_id}, turn {k + 1})"
            message = template.messages[j] + extra
            raw = template.raws[j]
            self.messages.append(message)
            self.raws.append(raw.replace(template.messages[j], message) if raw != template.messages[j] else message)
        self.note = note
        self.case_id = case_id
        self.ids = [uuid.uuid4().hex[:22] for _ in range(turns)]

    # a rendered history inside a text (the monitor's and the judges' prompts)
    def text(self, text: str, shift: int) -> str:
        """``text`` with the template's rendered history (its turns in order, each found after the last)
        replaced by this session's, holding ``found + shift`` turns; and the note replaced."""
        if self.t.note in text:
            text = text.replace(self.t.note, self.note)
        first = text.find(self.t.messages[0])
        if first < 0:
            return text
        spans = [(first, first + len(self.t.messages[0]))]
        for k in range(1, len(self.t.messages)):
            at = text.find(self.t.messages[k], spans[-1][1])
            if at < 0 or at - spans[-1][1] > 200:
                break
            spans.append((at, at + len(self.t.messages[k])))
        if len(spans) < 2:
            return text
        separators = [text[spans[k - 1][1] : spans[k][0]] for k in range(1, len(spans))]
        count = max(1, min(self.total, len(spans) + shift))
        out = [text[: spans[0][0]], self.messages[0]]
        for k in range(1, count):
            same_role = [s for i, s in enumerate(separators, 1) if i % 2 == k % 2] or separators
            out += [re.sub(r"\d+", str(k), same_role[-1]), self.messages[k]]
        out.append(text[spans[-1][1] :])
        return "".join(out)

    # a history as a message list (the educator's and the patient's calls, the sample's messages)
    def message_list(self, messages: list[dict[str, Any]], shift: int) -> list[dict[str, Any]]:
        """``messages`` with the run of history messages (the template's turns in order, as their message or
        their raw reply) replaced by this session's, holding ``found + shift`` turns."""
        texts = [m["content"] if isinstance(m["content"], str) else None for m in messages]
        start = next((i for i, x in enumerate(texts) if x in (self.t.messages[0], self.t.raws[0])), None)
        if start is None:
            return [self._note(m, shift) for m in messages]
        run = 0
        while (
            start + run < len(texts)
            and run < len(self.t.messages)
            and texts[start + run] in (self.t.messages[run], self.t.raws[run])
        ):
            run += 1
        count = max(1, min(self.total, run + shift))
        history = []
        for k in range(count):
            j = min(self.places[k], run - 1)
            if j % 2 != k % 2:
                j = max(0, j - 1)
            like = messages[start + j]
            raw = like["content"] == self.t.raws[j] and self.t.raws[j] != self.t.messages[j]
            history.append({**like, "id": self.ids[k], "content": self.raws[k] if raw else self.messages[k]})
        before = [self._note(m, shift) for m in messages[:start]]
        return before + history + [self._note(m, shift) for m in messages[start + run :]]

    def _note(self, message: dict[str, Any], shift: int) -> dict[str, Any]:
        """A message that is no turn of the history: its note and any rendered history replaced."""
        content = message["content"]
        if isinstance(content, str) and (self.t.note in content or self.t.messages[0] in content):
            return {**message, "content": self.text(content, shift)}
        return message

    def model_event(self, event: dict[str, Any], shift: int, under_test: str, output: str | None) -> dict[str, Any]:
        """A model call of the new session: its input rebuilt, its output (a turn: this session's text), its
        usage ~ characters / 4."""
        event = dict(event)
        event["input"] = self.message_list(event["input"], shift)
        if event.get("role") is None:
            event["model"] = under_test
        out = copy.deepcopy(event["output"])
        if output is not None:
            for choice in out.get("choices", []):
                choice["message"]["content"] = output
            out["completion"] = output
        elif out.get("completion") and self.t.note in out["completion"]:
            out["completion"] = self.text(out["completion"], shift)
        out["model"] = event["model"]
        tokens_in = sum(len(m["content"]) if isinstance(m["content"], str) else 100 for m in event["input"]) // 4
        tokens_out = max(1, len(out.get("completion", "")) // 4)
        out["usage"] = {"input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}
        event["output"] = out
        return event


def condense(event: dict[str, Any], attachments: dict[str, str], template: Template) -> dict[str, Any]:
    """An event as the recorder stores it (Inspect's ``condense_sample``, done here on the JSON: the walk over
    every event takes most of a sample's time): a model call's message texts over 100 characters as
    attachments; any other event as the template's run stored it."""
    event = dict(event)
    original = event.pop("template_uuid", event["uuid"])
    if event["event"] != "model":
        stored = template.stored_events.get(original)
        if stored is None or event["event"] not in ("store", "state", "sample_init"):
            return event
        changes = [{**c, "path": new["path"]} for c, new in zip(stored.get("changes", []), event.get("changes", []))]
        return {
            **stored,
            "uuid": event["uuid"],
            "span_id": event.get("span_id"),
            **({"changes": changes} if changes else {}),
        }
    event["input"] = [{**m, "content": _attach(m["content"], attachments)} for m in event["input"]]
    output = dict(event["output"])
    output["choices"] = [
        {**c, "message": {**c["message"], "content": _attach(c["message"]["content"], attachments)}}
        for c in output.get("choices", [])
    ]
    event["output"] = output
    return event


def _attach(content: Any, attachments: dict[str, str]) -> Any:
    if not isinstance(content, str) or len(content) <= 100:
        return content
    key = hashlib.md5(content.encode()).hexdigest()
    attachments[key] = content
    return f"attachment://{key}"


def _ids(events: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """Events with new uuids, and the spans they open renamed (so that copied turns are spans of their own)."""
    opened = {e["id"]: f"{e['id']}{tag}" for e in events if e["event"] == "span_begin"}
    out = []
    for e in events:
        e = dict(e)
        e["template_uuid"], e["uuid"] = e.get("template_uuid", e["uuid"]), uuid.uuid4().hex[:22]
        if e.get("span_id") in opened:
            e["span_id"] = opened[e["span_id"]]
        if e["event"] in ("span_begin", "span_end") and e.get("id") in opened:
            e["id"] = opened[e["id"]]
        out.append(e)
    return out


def sample_of(
    template: Template, case_id: str, model: str, strength: float, rng: random.Random, traits: dict[str, Any]
) -> dict[str, Any]:
    """One new sample (as Inspect's JSON) of ``model`` on ``case_id``."""
    turns = session_turns(rng)
    note = template.note
    length = note_chars(rng)
    note = (note + "\n") * (length // len(note) + 1)
    note = f"Bench case {case_id}.\n" + note[:length]
    session = Session(template, case_id, turns, note, rng)
    s = {k: v for k, v in template.sample.items() if k != "events"}
    for key in ("store", "metadata", "messages", "output"):
        s[key] = copy.deepcopy(template.sample[key])
    s["id"], s["uuid"] = case_id, uuid.uuid4().hex[:22]

    events = [e if e["event"] != "model" else session.model_event(e, 0, model, None) for e in template.before]
    for k in range(turns):
        j = session.places[k]
        block = []
        for e in template.blocks[j]:
            if e["event"] == "model":
                own = e.get("role") in (None, "patient")
                output = (session.raws[k] if e.get("role") == "patient" else session.messages[k]) if own else None
                e = session.model_event(e, k - j, model, output)
            elif e["event"] == "span_begin":
                e = {**e, "name": e["name"].replace(f"turn {j}:", f"turn {k}:")}
            elif e["event"] == "info" and isinstance(e.get("data"), dict) and "turn" in e["data"]:
                e = {**e, "data": {**e["data"], "turn": k}}
            elif e["event"] == "store":
                e = {
                    **e,
                    "changes": [{**c, "path": re.sub(r"/\d+$", f"/{k}", c.get("path", ""))} for c in e["changes"]],
                }
            block.append(e)
        events += _ids(block, f"-{k}")
    shift = turns - len(template.turns)
    scores = scores_of(s["scores"], turns, strength, rng, store_end_reason(s, turns))
    for e in template.after:
        if e["event"] == "model":
            e = session.model_event(e, shift, model, None)
        elif e["event"] == "score":  # the scorer's own record of its score: the new one
            name = next((n for n, v in template.sample["scores"].items() if v["value"] == e["score"]["value"]), None)
            e = {**e, "score": scores[name]} if name else e
        events.append(e)
    events = (
        _ids(events[: len(template.before)], "")
        + events[len(template.before) : -len(template.after)]
        + _ids(events[-len(template.after) :], "")
    )
    s["attachments"] = dict(template.attachments)
    s["events"] = [condense(e, s["attachments"], template) for e in events]
    s["messages"] = session.message_list(s["messages"], shift)
    if s.get("output", {}).get("choices"):
        s["output"]["model"] = model

    # usage by model and role, from the calls
    usage: dict[str, dict[str, int]] = {}
    roles: dict[str, dict[str, int]] = {}
    for e in events:
        if e["event"] != "model":
            continue
        u = e["output"]["usage"]
        for table, key in ((usage, e["model"]), (roles, e.get("role"))):
            if key is None:
                continue
            row = table.setdefault(key, {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
            for name in row:
                row[name] += u[name]
    s["model_usage"], s["role_usage"] = usage, roles

    # the store: the history, the persona, the outcome
    store = s["store"]
    history = []
    for k, j in enumerate(session.places):
        history.append({**template.turns[j], "index": k, "message": session.messages[k], "raw": session.raws[k]})
    store["EncounterStore:history"] = history
    store["EncounterStore:persona"] = {**store["EncounterStore:persona"], **traits}
    store["EncounterStore:end_reason"] = store_end_reason(s, turns)
    store["EncounterStore:agent_stats"] = {
        role: {**stats, "calls": (turns + (role != "patient")) // 2 if role != "monitor" else turns}
        for role, stats in store["EncounterStore:agent_stats"].items()
    }

    # metadata: the case, its persona and chapter (the strata)
    meta = s["metadata"]
    chapter = traits["icd_chapter"]
    case = {**meta["case"], "case_id": case_id, "discharge_note": note, "icd_chapter": chapter}
    case["icd_version"] = icd_versions()[chapter]
    persona = {k: v for k, v in traits.items() if k != "icd_chapter"}
    meta.update(case=case, persona={**meta["persona"], **persona}, **traits)
    meta["end_reason"] = store["EncounterStore:end_reason"]
    s["input"] = s["input"].replace(template.case_id, case_id) if isinstance(s["input"], str) else s["input"]
    s["scores"] = scores
    return s


def store_end_reason(sample: dict[str, Any], turns: int) -> str:
    """How the session ended: at the ceiling (100 turns) it ran out of turns; else as the template's."""
    return "max_turns" if turns >= 100 else sample["store"]["EncounterStore:end_reason"]


def scores_of(
    scores: dict[str, Any], turns: int, strength: float, rng: random.Random, end_reason: str
) -> dict[str, Any]:
    """Every key of the template's scores, drawn for this sample (``strength``: the model's shift)."""

    def likert() -> float:
        return float(min(5, max(1, round(rng.gauss(3.8 + strength, 0.9)))))

    def rate() -> float:
        return min(1.0, max(0.0, rng.gauss(0.72 + strength / 10, 0.15)))

    short = 1.0 if turns <= 15 else 0.0
    erroneous = 1.0 if end_reason != "clean_complete" else 0.0
    out = {}
    for name, score in scores.items():
        score = dict(score)
        value = dict(score["value"]) if isinstance(score["value"], dict) else score["value"]
        if isinstance(value, dict):
            for key, old in value.items():
                if key == "turns":
                    value[key] = float(turns)
                elif key == "short_session":
                    value[key] = short
                elif key == "erroneous":
                    value[key] = erroneous
                elif key == "clean_complete":
                    value[key] = 1.0 - erroneous
                elif key in ("naturalness", "responsiveness", "clarity", "clinical_relevance"):
                    value[key] = likert()
                elif key == "readability":
                    value[key] = rng.gauss(8.0, 1.5)
                elif key in ("tcs", "comprehension", "rouge_l", "cosine") or re.fullmatch(r"q\d", key):
                    value[key] = rate() if not re.fullmatch(r"q\d", key) else float(rng.random() < 0.75 + strength / 10)
                else:  # counts and flags of what went wrong: mostly 0, as in a clean run
                    value[key] = old
        score["value"] = value
        if name == "encounter_outcome":
            score["answer"] = end_reason
        out[name] = score
    return out


def copy_of(built: Any, case_id: str, strength: float, rng: random.Random, traits: dict[str, Any]) -> Any:
    """Case ``case_id`` as a copy of a sample built already (its session, events and record of calls): its own id,
    uuid, persona and ICD chapter (metadata and store) and scores drawn for it (:func:`scores_of`); its
    transcript's texts still name the case it was built for."""
    from inspect_ai.log import EvalSample

    end_reason = built.store["EncounterStore:end_reason"]
    turns = len(built.store["EncounterStore:history"])
    drawn = scores_of({n: v.model_dump(mode="json") for n, v in built.scores.items()}, turns, strength, rng, end_reason)
    meta = dict(built.metadata)
    chapter = traits["icd_chapter"]
    case = {**meta["case"], "case_id": case_id, "icd_chapter": chapter, "icd_version": icd_versions()[chapter]}
    persona = {k: v for k, v in traits.items() if k != "icd_chapter"}
    meta.update(case=case, persona={**meta["persona"], **persona}, **traits)
    store = {**built.store, "EncounterStore:persona": {**built.store["EncounterStore:persona"], **traits}}
    scores = EvalSample.model_validate({"id": case_id, "epoch": 1, "input": "", "target": "", "scores": drawn}).scores
    text = built.input.replace(str(built.id), case_id) if isinstance(built.input, str) else built.input
    update = {"id": case_id, "uuid": uuid.uuid4().hex[:22], "metadata": meta, "store": store, "scores": scores}
    return built.model_copy(update={**update, "input": text})


# ---------------------------------------------------------------------------------------------
# writing the logs through Inspect's recorder


def make(
    samples: int,
    models: int,
    out: Path,
    template_path: str | None = None,
    seed: int = 0,
    processes: int = 1,
    distinct: int = 0,
) -> list[str]:
    """``models`` logs of ``samples`` cases each in ``out`` (``processes`` logs written at once; ``distinct``:
    sessions built per log, the other cases copies of them, :func:`copy_of`; 0: every case its own); returns
    their paths."""
    location = template_log(template_path)
    out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:22]
    jobs = [(location, samples, m, models, str(out), run_id, seed, distinct) for m in range(models)]
    if processes <= 1 or models == 1:
        return [_one_log(*job) for job in jobs]
    with multiprocessing.get_context("spawn").Pool(min(processes, models)) as pool:
        return pool.starmap(_one_log, jobs)


_templates: dict[str, Template] = {}


def _one_log(
    location: str, samples: int, m: int, models: int, out: str, run_id: str, seed: int, distinct: int = 0
) -> str:
    import anyio

    template = _templates.get(location) or _templates.setdefault(location, Template(location))
    return anyio.run(_write_log, template, samples, m, models, Path(out), run_id, seed, distinct)


@functools.cache
def chapters() -> list[str]:
    """The ICD chapters of the shipped demo cases."""
    return sorted(icd_versions())


@functools.cache
def icd_versions() -> dict[str, int]:
    """Each ICD chapter of the shipped demo cases -> its ICD version (a case's chapter names its version)."""
    rows = [json.loads(line) for line in common.DEMO_DISCHARGE.read_text().splitlines() if line.strip()]
    return {row["icd_chapter"]: row["icd_version"] for row in rows}


def traits_of(case: int, seed: int) -> dict[str, Any]:
    """A case's persona and ICD chapter (the same in every model's log)."""
    from bedside.discharge.records import EducationLevel, HealthLiteracy, Personality, RecallLevel

    rng = random.Random(f"traits-{seed}-{case}")
    return {
        "personality": rng.choice(get_args(Personality)),
        "education_level": rng.choice(get_args(EducationLevel)),
        "health_literacy": rng.choice(get_args(HealthLiteracy)),
        "recall_level": rng.choice(get_args(RecallLevel)),
        "icd_chapter": rng.choice(chapters()),
    }


async def _write_log(
    template: Template, samples: int, m: int, models: int, out: Path, run_id: str, seed: int, distinct: int = 0
) -> str:
    from datetime import UTC, datetime

    from inspect_ai.log import (
        EvalLog,
        EvalSample,
        EvalSampleReductions,
        EvalSampleScore,
        recompute_metrics,
    )
    from inspect_ai.model import ModelUsage

    from bedside import sample_usage
    from bedside.log_writer import LogWriter

    model = f"bench/educator-{m + 1:02d}"
    strength = (m - (models - 1) / 2) * 0.08
    ids = [f"bench-{k + 1:04d}" for k in range(samples)]
    header = template.header
    now = datetime.now(UTC).isoformat()
    dataset = header.eval.dataset.model_copy(update={"samples": samples, "sample_ids": ids})
    spec = header.eval.model_copy(
        update={
            "eval_id": uuid.uuid4().hex[:22],
            "run_id": run_id,
            "created": now,
            "model": model,
            "dataset": dataset,
            "task_id": uuid.uuid4().hex[:22],
        }
    )
    writer = LogWriter(out / f"{model.replace('/', '-')}.eval")
    await writer.open(spec)
    light: list[EvalSample] = []
    built: list[EvalSample] = []
    usage: dict[str, ModelUsage] = {}
    roles: dict[str, ModelUsage] = {}
    for k, case_id in enumerate(ids):
        rng = random.Random(f"{seed}-{m}-{k}")
        if distinct and k >= distinct:  # a copy of one built before
            sample = copy_of(built[k % distinct], case_id, strength, rng, traits_of(k, seed))
        else:
            sample = EvalSample.model_validate(sample_of(template, case_id, model, strength, rng, traits_of(k, seed)))
            # the health score's record of the sample's calls, as the scorer makes it when a sample ends
            health = (sample.scores or {})[sample_usage.HOLDER]
            record = sample_usage.of_events(sample.events, sample.scores or {})
            health.metadata = {**(health.metadata or {}), sample_usage.KEY: record}
            built.append(sample)
        for table, got in ((usage, sample.model_usage), (roles, sample.role_usage)):
            for key, u in got.items():
                table[key] = table[key] + u if key in table else u
        await writer.sample(sample)
        light.append(
            EvalSample(
                id=sample.id, epoch=sample.epoch, input="", target="", scores=sample.scores, metadata=sample.metadata
            )
        )
    summary = EvalLog(eval=spec, plan=header.plan, results=header.results, status="success", samples=light)
    recompute_metrics(summary)
    stats = header.stats.model_copy(
        update={
            "started_at": now,
            "completed_at": datetime.now(UTC).isoformat(),
            "model_usage": usage,
            "role_usage": roles,
        }
    )
    reductions = [
        EvalSampleReductions(
            scorer=name,
            samples=[
                EvalSampleScore(**s.scores[name].model_dump(), sample_id=s.id)
                for s in light
                if s.scores and name in s.scores
            ],
        )
        for name in (light[0].scores or {})
    ]
    log = summary.model_copy(update={"samples": None, "stats": stats, "reductions": reductions})
    return str(await writer.finish(log))


# ---------------------------------------------------------------------------------------------
# the readers, each in a process of its own


def read_samples_df(paths: Sequence[str]) -> int:
    from inspect_ai.analysis import samples_df

    return len(samples_df(list(paths), quiet=True))


def read_leaderboard(paths: Sequence[str]) -> int:
    """What the report's leaderboard section reads and computes: every log loaded, the per-case values,
    the ranking and the paired differences."""
    from bedside.reporting import sweep
    from bedside.reporting.load import load

    ranking, pairs = sweep.leaderboard(sweep.case_values(load(list(paths))))
    return len(ranking) + len(pairs)


READERS = {"samples_df": read_samples_df, "leaderboard": read_leaderboard}


def command(reader: str, paths: Sequence[str], scratch: Path) -> list[str]:
    if reader == "report":
        return [str(BIN / "bedside"), "report", *paths, "--out", str(scratch / "report")]
    if reader == "report_tables":
        return [str(BIN / "bedside"), "report", *paths, "--out", str(scratch / "report_tables"), "--no-figures"]
    if reader == "compare":
        return [str(BIN / "bedside"), "compare", *paths]
    return [sys.executable, __file__, "read", reader, *paths]


def measure(argv: list[str], rss_limit_gb: float) -> dict[str, Any]:
    """Wall-clock and peak RSS of ``argv`` run to its end (or stopped past ``rss_limit_gb``)."""
    import psutil

    # never more than the machine has free now, less 2 GB for the others (the machine is shared)
    rss_limit_gb = min(rss_limit_gb, psutil.virtual_memory().available / 2**30 - 2)
    load_before = common.loadavg()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    polled, stopped = 0.0, False
    output: list[str] = []
    import threading

    reader = threading.Thread(target=lambda: output.extend(proc.stdout or []), daemon=True)
    reader.start()
    root = psutil.Process(proc.pid)
    while True:
        try:
            rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            polled = max(polled, rss / 2**20)
        except psutil.Error:
            pass
        if polled > rss_limit_gb * 1024 and not stopped:
            proc.kill()
            stopped = True
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            break
        time.sleep(0.05)
    wall = time.perf_counter() - start
    reader.join(timeout=5)
    code = os.waitstatus_to_exitcode(status)
    return {
        "argv": argv,
        "seconds": wall,
        "peak_rss_mb": max(polled, usage.ru_maxrss / 1024),
        "polled_rss_mb": polled,
        "maxrss_mb": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "exit": code,
        "stopped_at_rss_limit": stopped,
        "rss_limit_gb": rss_limit_gb,
        "tail": "".join(output)[-2000:],
        "loadavg": [load_before, common.loadavg()],
    }


def logs_of(root: Path, total: int, template: str | None, processes: int, distinct: int = 0) -> list[str]:
    """The logs of one size: the first of the finished logs of its sweep (``root/n<largest size with as many
    cases per log>``), the sweep written first if its folder is empty."""
    models, cases = SIZES[total]
    largest = max(t for t, (m, c) in SIZES.items() if c == cases)
    folder = root / f"n{largest}"
    done = finished(folder)
    if len(done) >= models:
        return done[:models]
    if any(folder.glob("*.eval")):
        raise SystemExit(f"{folder}: {len(done)} finished logs, {models} needed (still being written?)")
    start, cpu = time.perf_counter(), _cpu_with_children()
    sweep_models = SIZES[largest][0]
    make(cases, sweep_models, folder, template, processes=processes, distinct=distinct)
    seconds, cpu = time.perf_counter() - start, _cpu_with_children() - cpu
    written = sweep_models * cases
    made = {
        "samples": written,
        "seconds": seconds,
        "per_1000_s": seconds / written * 1000,
        "cpu_per_1000_s": cpu / written * 1000,
        "distinct": distinct,
    }
    common.write_json(folder / "made.json", made)
    print(
        f"readers: made {sweep_models} x {cases} samples in {seconds:.0f} s ({made['per_1000_s']:.0f} s per 1,000; "
        f"CPU {made['cpu_per_1000_s']:.0f} s per 1,000)",
        flush=True,
    )
    return finished(folder)[:models]


def finished(folder: Path) -> list[str]:
    """The logs in ``folder`` whose run finished (a log still being written is left out)."""
    from inspect_ai.log import read_eval_log

    done = []
    for path in sorted(folder.glob("*.eval")):
        try:
            if read_eval_log(str(path), header_only=True).status == "success":
                done.append(str(path))
        except Exception:  # a zip still being written has no header yet
            continue
    return done


def _cpu_with_children() -> float:
    """CPU seconds of this process and of its ended children (the writers of ``make``)."""
    import resource

    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def run_reader(reader: str, given: list[str], samples: int, size: int, rss_limit_gb: float) -> dict[str, Any]:
    """One reader over ``given`` (``samples`` samples), measured in a process of its own."""
    print(f"readers: {reader} over {samples} samples ({len(given)} logs), load {common.loadavg()} ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-readers-") as scratch:
        got = measure(command(reader, given, Path(scratch)), rss_limit_gb)
    got.update(reader=reader, samples=samples, logs=len(given), size=size)
    print(f"  {reader}: {got['seconds']:.1f} s, {got['peak_rss_mb']:.0f} MB, exit {got['exit']}", flush=True)
    if got["exit"] != 0 and not got["stopped_at_rss_limit"]:
        print(got["tail"], flush=True)
    return got


def time_all(args: argparse.Namespace) -> None:
    root = Path(args.dir or LOGS / f"readers-{time.strftime('%Y%m%d-%H%M%S')}")
    root.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",")]
    readers = args.readers.split(",")
    results: dict[str, Any] = {"machine": common.machine(), "argv": sys.argv[1:], "runs": [], "made": {}}
    out = root / f"readers-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for total in sizes:
        paths = logs_of(root, total, args.template, args.processes, args.distinct)
        made = root / f"n{max(t for t, (_, c) in SIZES.items() if c == SIZES[total][1])}" / "made.json"
        if made.exists():
            results["made"][made.parent.name] = json.loads(made.read_text())
        pair = paths[:2]
        plan = [(r, paths) for r in readers if r != "compare"]
        if "compare" in readers and len(pair) == 2:  # a size of one log has nothing to compare
            plan += [("compare", pair)] + ([("samples_df", pair)] if len(paths) > 2 else [])  # its base line

        jobs = [(reader, given, total if given is paths else SIZES[total][1] * 2, total) for reader, given in plan]
        with ThreadPoolExecutor(args.concurrent) as pool:  # one process a reader, --concurrent at once
            for got in pool.map(lambda job: run_reader(*job, rss_limit_gb=args.rss_limit_gb), jobs):
                results["runs"].append(got)
                common.write_json(out, results)
    text = report(results)
    (root / "RESULTS-readers.md").write_text(text)
    print(text)


def report(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"`bench/readers.py {' '.join(results['argv'])}`; machine: {m['cores']} cores ({m['cpu']}), {m['ram_gb']} GB, "
        f"Python {m['python']}, inspect_ai {m['inspect_ai']}, bedside `{m['git']}`, {time.strftime('%Y-%m-%d')}.",
        "",
        "| reader | samples (logs) | seconds | CPU s | peak RSS MB | ms / sample (CPU) | KB RSS / sample "
        "| time (CPU) / samples_df | RSS / samples_df | load 1-min before → after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = {(r["size"], r["logs"]): r for r in results["runs"] if r["reader"] == "samples_df" and r["exit"] == 0}
    for r in results["runs"]:
        ref = base.get((r["size"], r["logs"]))
        failed = r["exit"] != 0
        stop = f" (stopped at {r['rss_limit_gb']:.1f} GB, the free memory)"
        note = stop if r["stopped_at_rss_limit"] else (f" (exit {r['exit']})" if failed else "")
        name = {
            "report": "`bedside report`",
            "report_tables": "`bedside report --no-figures`",
            "compare": "`bedside compare`",
            "leaderboard": "leaderboard",
            "samples_df": "`samples_df`",
        }[r["reader"]]
        time_ratio = (
            "" if ref is None or failed else f"{r['seconds'] / ref['seconds']:.1f}× ({r['cpu_s'] / ref['cpu_s']:.1f}×)"
        )
        rss_ratio = "" if ref is None or failed else f"{r['peak_rss_mb'] / ref['peak_rss_mb']:.1f}×"
        lines.append(
            f"| {name}{note} | {r['samples']:,} ({r['logs']}) | {r['seconds']:.1f} | {r['cpu_s']:.1f} "
            f"| {r['peak_rss_mb']:,.0f} "
            f"| {1000 * r['seconds'] / r['samples']:.1f} ({1000 * r['cpu_s'] / r['samples']:.1f}) "
            f"| {1024 * r['peak_rss_mb'] / r['samples']:,.0f} "
            f"| {time_ratio} | {rss_ratio} | {r['loadavg'][0][0]} → {r['loadavg'][1][0]} |"
        )
    made = results.get("made") or {}
    if made:
        lines += [
            "",
            "Logs written by `make` (Inspect's recorder): "
            + "; ".join(
                f"{v['samples']:,} samples in {v['seconds']:.0f} s ({v['per_1000_s']:.0f} s per 1,000"
                + (f", CPU {v['cpu_per_1000_s']:.0f} s per 1,000" if "cpu_per_1000_s" in v else "")
                + ")"
                for v in made.values()
            )
            + ".",
        ]
    return "\n".join(lines) + "\n"


DISTINCT = "sessions built per log, the other cases copies of them (0: every case its own)"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    writer = sub.add_parser("make", help="write sweep-sized DischargeBench logs without model calls")
    writer.add_argument("--samples", type=int, required=True, help="cases per log (per model)")
    writer.add_argument("--models", type=int, default=1, help="logs: one per model under test")
    writer.add_argument("--out", required=True)
    writer.add_argument("--template", help="a scripted DischargeBench log of one sample (default: made once)")
    writer.add_argument("--seed", type=int, default=0)
    writer.add_argument("--processes", type=int, default=2, help="logs written at once")
    writer.add_argument("--distinct", type=int, default=0, help=DISTINCT)
    timer = sub.add_parser("time", help="time the readers at each size")
    timer.add_argument("--sizes", default="480,2385,4770", help=f"of {sorted(SIZES)}")
    timer.add_argument("--readers", default="samples_df,report,report_tables,leaderboard,compare")
    timer.add_argument("--dir", help="folder of the logs (made there unless present) and the results")
    timer.add_argument("--template")
    timer.add_argument("--processes", type=int, default=2, help="logs written at once")
    timer.add_argument("--distinct", type=int, default=0, help=DISTINCT)
    timer.add_argument(
        "--concurrent",
        type=int,
        default=1,
        help="readers run at once (each its own process; on a busy machine: the CPU seconds and RSS stay "
        "comparable, the wall-clock does not)",
    )
    timer.add_argument("--rss-limit-gb", type=float, default=14.0, help="stop a reader past this RSS")
    table = sub.add_parser("table", help="the table of one or more runs' JSON (their runs in order)")
    table.add_argument("results", nargs="+")
    read = sub.add_parser("read", help="one reader (run by `time` in a process of its own)")
    read.add_argument("reader", choices=sorted(READERS))
    read.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    if args.step == "make":
        start = time.perf_counter()
        paths = make(args.samples, args.models, Path(args.out), args.template, args.seed, args.processes, args.distinct)
        seconds = time.perf_counter() - start
        total = args.samples * args.models
        print(f"{len(paths)} logs, {total} samples in {seconds:.1f} s ({seconds / total * 1000:.0f} s per 1,000)")
    elif args.step == "time":
        time_all(args)
    elif args.step == "table":
        runs = [json.loads(Path(p).read_text()) for p in args.results]
        merged = {**runs[0], "runs": [r for run in runs for r in run["runs"]]}
        merged["made"] = {json.dumps(v): v for run in runs for v in (run.get("made") or {}).values()}
        merged["argv"] = [a for run in runs for a in ["(", *run["argv"], ")"]] if len(runs) > 1 else runs[0]["argv"]
        print(report(merged))
    else:
        print(json.dumps({"reader": args.reader, "rows": READERS[args.reader](args.paths)}))


if __name__ == "__main__":
    main()
