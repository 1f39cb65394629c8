"""``bedside/human``: a person plays the role this model is bound to, in their browser.

``--model bedside/human`` (a physician as the educator, examinee or doctor: a human baseline),
``--model-role patient=bedside/human`` (a person as the patient) or ``grader=bedside/human`` (a
physician as the judge). For every generate call of that role, the eval process lists the call on a
page it serves on loopback (``http://127.0.0.1:<port>/``, printed once on stderr): which case, epoch,
role and turn it is, what that role sees (its prompt messages: the system prompt, the conversation so
far; nothing else: a call's render context and tag are never shown, and bedside never sends the render
context to this provider), and a reply box. A call whose protocol has a JSON reply (judges, a patient
answering ``{"utterance": ...}``) gets a form built from the protocol's JSON schema, with each field's
criterion beside it (the protocol's ``form``, :attr:`bedside.protocols.Protocol.form`), so the submitted
JSON is read by the same reader as a model's reply; a reply that does not fit the schema is refused at
the field, with the reason.

- **The session.** Several samples may wait at once; the page keeps the person on one case from its start
  to its end (each other case waiting shows as a closed tab, in a stable order) unless they tick "side by
  side", and at a case's end shows its end reason and opens the next case on a click. A role in an
  encounter sees its turn budget (the orchestrator's, in the sample store) and a notice on its last
  turn; the end of each conversation, of each case and of the run are shown as they happen ("session
  complete", with the log's path), through Inspect's hooks (:class:`HumanPageHooks`).
- **What a model in the role is not told** (``-M notices=false`` hides it): :func:`tell` — a
  supervisor's verdict on the person's own turn, an action the scenario could not carry out — shown at
  the person's next turn and recorded in the transcript (source ``bedside_human``). A correction that a
  model would read in its instructions is shown highlighted; a call asked again says why (the reply could
  not be read: the reader's reason; the supervisor discarded it).
- **One journal per run.** Every accepted reply is appended to the run's journal, keyed by the call
  (task, sample, epoch, protocol, attempt and the exact prompt) and the run (Inspect's ``task_id``,
  which ``inspect eval-retry`` keeps): by default ``<the run's log folder>/human/<task>-<task_id>.jsonl``.
  When the same call of the same run comes again (``inspect eval-retry`` re-running an interrupted
  sample whose other roles are deterministic) the journal's reply is returned at once, marked
  ``replayed`` in the output metadata and announced on the page, so a person never types an accepted
  reply twice. A reply of another run (a shared ``-M journal=PATH``) is reused only with
  ``-M replay=across_runs``, also announced. A person re-judging finished logs (``bedside rescore
  --grader bedside/human``) makes a run of each log it writes (:func:`scoring`). Inspect's own cache
  never serves a person's reply: each ``bedside/human`` model has an identity of its own.
- **The same address after a crash.** The page's port is kept in the journal's state
  (``<journal>.state``, beside drafts and working time), so a retried run serves the page where the
  old tab is still looking; the page and stderr name the exact ``inspect eval-retry LOG --log-dir DIR``
  that resumes the run beside its log.
- **Person-time** is working time, never waiting time: the page reports, every few seconds, that a
  call is shown on a visible page whose person has been active in the last minutes (:data:`IDLE` on the
  page); a call's ``human_seconds`` is the length of its working intervals (``human_intervals``, epoch
  seconds, in the output metadata; intervals of two calls never overlap on one page, and ``bedside
  estimate`` takes their union across a run). Work on a call before a crash is kept in the journal's
  state and counted when the retried run asks the call again. Usage is 0 model tokens.
- The page long-polls (``/api/pending?after=<version>`` returns as soon as anything changes, or after
  :data:`~bedside.providers.human_desk.LONG_POLL_SECONDS`); typed text survives a reload (the browser's
  storage) and a crash (drafts in the journal's state); Ctrl+Enter submits.

The page and its session are :mod:`bedside.providers.human_desk`, a pending call and a run's journal
:mod:`bedside.providers.human_journal`; this module is the model
provider, the hooks that tell the page about runs and cases, and :func:`tell`.

Options (``-M`` on ``--model bedside/human``; for a role, its mapping: ``--model-role
'grader={model: bedside/human, model_args: {journal: PATH}}'``): ``port`` (default: the run's last
port, else a free one), ``journal`` (a journal file of your own), ``replay`` (``this_run`` or
``across_runs``), ``notices`` (``true``/``false``), ``steps`` (``true``: a judge's intermediate steps
are asked of the person too; :func:`bedside.calls.asks_steps`). Every role bound to ``bedside/human`` in one eval
shares one page: a role given no options joins the page the first one opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import anyio
from inspect_ai.hooks import Hooks, RunEnd, SampleEnd, SampleEvent, SampleStart, TaskEnd, TaskStart, hooks
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage

from bedside.compat import awaiting_human, sample_active, sample_state
from bedside.params import SetupError
from bedside.person_time import length, union
from bedside.protocols import tag_of
from bedside.providers.human_desk import OPTIONS, Desk
from bedside.providers.human_journal import Call, Replay, default_journal, saved_port
from bedside.records import EncounterProgress

#: how each shared end reason reads on the page (a benchmark's own end reasons read as their words)
ENDINGS = {
    "clean_complete": "the conversation came to its end",
    "max_turns": "the session reached its turn limit",
    "hard_stop": "the supervisor stopped the session",
    "error": "a model call failed (a system failure)",
    "system_failure": "the supervisor's verdict could not be read (a system failure)",
}


# ---------------------------------------------------------------------------------------------
# the process's one desk and session


_desk: Desk | None = None
_desk_lock = threading.Lock()
#: the options a human role of this process named (every role's model is built before any call)
_asked: dict[str, Any] = {}
#: from the hooks: eval_id -> (run = the task's task_id, task name); sample uuid -> (run, task, case, epoch)
_evals: dict[str, tuple[str, str]] = {}
_samples: dict[str, tuple[str, str, str, int]] = {}


def desk(port: int | None, preferred: int | None) -> Desk:
    """The process's one desk (started on first use), shared by every role bound to ``bedside/human``:
    one page lists all their calls. It listens on ``port`` (an option), else on ``preferred`` (the run's
    journal's last port) when that is free, else on a free port. A role that names another port than the
    running desk's is refused (two pages would split a person's work)."""
    global _desk
    with _desk_lock:
        if _desk is None:
            wanted = port or _asked.get("port") or preferred or 0
            try:
                made = Desk(wanted)
            except OSError as ex:
                if port or _asked.get("port"):
                    raise RuntimeError(f"bedside/human: cannot serve the page on port {wanted}: {ex}") from None
                made = Desk(0)
                print(
                    f"bedside/human: port {wanted} of the last run is taken; the page moved to {made.url}",
                    file=sys.stderr,
                )
            for run, task, case, epoch in list(_samples.values()):  # the samples already running
                made.case_state(run, task, case, epoch, "running")
            _desk = made
            print(f"bedside/human: replies are typed at {made.url}", file=sys.stderr, flush=True)
        elif port and port != _desk.port:
            raise ValueError(
                f"bedside/human: one page per eval process, already at {_desk.url}; a role asked for "
                f"port={port}: give the same -M options to every human role"
            )
        return _desk


def tell(role: str, text: str) -> None:
    """Tells the person playing ``role`` in the running sample ``text`` at their next turn, if a person
    plays it in this process (``bedside/human``): what the run records about their own turn that a model
    in the role is not told (a supervisor's verdict on it, an action the scenario could not carry out).
    Does nothing otherwise."""
    if _desk is None:
        return
    where = sample_key()
    if where is not None:
        run, _task, case, epoch = where
        _desk.tell((run, case, epoch, role), text)


#: a run outside an eval: a log being re-judged (``bedside rescore``; :func:`scoring`): run, journal, log
_scoring: dict[str, Any] = {}
#: a run Inspect does not name (``inspect score`` without bedside): this process's own, never another's
_PROCESS_RUN = f"process-{os.getpid()}-{int(time.time())}"


def sample_key() -> tuple[str, str, str, int] | None:
    """(run, task, case, epoch) of the running sample: in an eval, the run is the task's ``task_id`` (from
    the hooks), else the log file's name; while a finished log is re-judged, the case comes from the
    sample's transcript and the run is the rescored log's (:func:`scoring`), else this process's."""
    from inspect_ai.log import transcript

    active, state = sample_active(), sample_state()
    if state is None:
        init = next((e for e in transcript().events if e.event == "sample_init"), None)
        if init is None:
            return None
        return _scoring.get("run", _PROCESS_RUN), _scoring.get("task", ""), str(init.sample.id), 1
    known = _samples.get(str(getattr(active, "sample_uuid", "")))
    if known is not None:
        return known
    run = Path(active.log_location).stem if active is not None and active.log_location else _PROCESS_RUN
    return run, active.task if active is not None else "", str(state.sample_id), int(state.epoch)


@contextmanager
def scoring(log: Path, task: str) -> Iterator[None]:
    """A finished log re-judged by a person (``bedside rescore --grader bedside/human``) is a run of its
    own: named by the log it writes, with its journal beside it (``<out>/human/judged-<log>.jsonl``, unless
    ``-M journal``), so a re-judging stopped half-way and started again resumes from its journal, and two
    physicians writing to two folders never share a reply. The page shows the log once it is written."""
    journal = log.parent / "human" / f"judged-{log.stem}.jsonl"  # not named like a log: inspect view skips it
    _scoring.update(run=str(log.resolve()), journal=journal, task=task, log=log)
    try:
        yield
        if _desk is not None:
            _desk.run_ended(str(log.resolve()), str(log), "success")
    finally:
        _scoring.clear()


def finish() -> None:
    """The end of a re-judging session (``bedside rescore``): the page says the session is complete and
    waits (a few seconds at most) until an open page has seen it."""
    if _desk is not None and _desk.session.runs:
        _desk.finish()
        anyio.run(_desk.farewell)


class HumanPageHooks(Hooks):
    """Tells ``bedside/human``'s page what happens around its calls: which run a sample belongs to, the
    end of each conversation (the orchestrator's ``encounter`` event), of each case and of the run.
    Registered with Inspect by the first ``bedside/human`` model a process builds
    (:func:`register_page_hooks`), never at import: an eval without a person never runs it."""

    async def on_task_start(self, data: TaskStart) -> None:
        _evals[data.eval_id] = (data.spec.task_id, data.spec.task)
        if _desk is not None:
            _desk.restart()

    async def on_sample_start(self, data: SampleStart) -> None:
        run, task = _evals.get(data.eval_id, (data.eval_id, ""))
        summary = data.summary
        _samples[data.sample_id] = (run, task, str(summary.id), int(summary.epoch))
        if _desk is not None:
            _desk.case_state(run, task, str(summary.id), int(summary.epoch), "running")

    async def on_sample_event(self, data: SampleEvent) -> None:
        event = data.event
        if _desk is None or event.event != "info" or getattr(event, "source", None) != "encounter":
            return
        info = event.data if isinstance(event.data, dict) else {}
        known = _samples.get(data.sample_id)
        if known is not None and "end_reason" in info:
            run, task, case, epoch = known
            reason = str(info["end_reason"])
            said = ENDINGS.get(reason, reason.replace("_", " "))
            _desk.case_state(run, task, case, epoch, "ended", f"{said} ({reason}, {info.get('turns')} turns)")

    async def on_sample_end(self, data: SampleEnd) -> None:
        known = _samples.pop(data.sample_id, None)
        if _desk is not None and known is not None:
            run, task, case, epoch = known
            sample = data.sample
            detail = f"error: {sample.error.message}" if sample.error else ("scored" if sample.scores else "")
            _desk.case_state(run, task, case, epoch, "complete", detail)

    async def on_task_end(self, data: TaskEnd) -> None:
        run, _ = _evals.pop(data.eval_id, (data.eval_id, ""))
        if _desk is not None:
            _desk.run_ended(run, data.log.location, data.log.status)

    async def on_run_end(self, data: RunEnd) -> None:
        if _desk is not None and _desk.session.runs:  # a run in which a person answered
            _desk.finish()
            await _desk.farewell()


def register_page_hooks() -> None:
    """Registers :class:`HumanPageHooks` with Inspect, once per process."""
    with _desk_lock:
        if _asked.get("hooks"):
            return
        _asked["hooks"] = True
    hooks(name="bedside_human_page", description="bedside/human's page: the runs, cases and end of a session")(
        HumanPageHooks
    )


# ---------------------------------------------------------------------------------------------
# the engine


def call_id(task: str, case: str, epoch: int, protocol: str, attempt: int, messages: list[dict[str, str]]) -> str:
    blob = json.dumps([task, case, epoch, protocol, attempt, messages], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def visible_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """What the role sees: each message's role and text (never its metadata, which holds the tag)."""
    return [{"role": m.role, "text": m.text} for m in messages]


def turn_budget(role: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(the role's turn budget, the other roles) in the running encounter (the orchestrator's store), or
    (None, []) outside one. ``of`` counts the role's turns at most: the history's cap shared by every role
    in turn order, or the role's own cap, whichever comes first."""
    from inspect_ai.util import store_as

    try:
        progress = store_as(EncounterProgress)
    except Exception:  # outside a sample
        return None, []
    if role not in progress.roles or not progress.max_turns:
        return None, []
    others = [r for r in progress.roles if r != role]
    held = len(progress.turns)
    mine = sum(t.role == role for t in progress.turns)
    shared_left = -(-(progress.max_turns - held) // len(progress.roles))  # this turn and the rounds after it
    limit = progress.role_limits.get(role)
    if limit is not None and limit - mine <= shared_left:
        left = limit - mine
        meaning = f"you have at most {limit} turns in this session (only your own turns count)"
    else:
        left = shared_left
        speakers = " and the ".join(others)
        meaning = (
            f"the session stops after {progress.max_turns} turns in all: every message counts, yours and the "
            f"{speakers}'s"
        )
    if progress.min_turns:
        meaning += f"; it may end earlier, once at least {progress.min_turns} turns have been held"
    budget = {"turn": mine + 1, "of": mine + max(left, 1), "last": left <= 1, "meaning": meaning}
    return budget, others


def asked_again(protocol: str, role: str) -> dict[str, str] | None:
    """Why this call repeats the role's previous one, from the transcript since the person's last reply
    to this protocol: the reply could not be read (the reader's reason), or the supervisor discarded it."""
    from inspect_ai.log import transcript

    for event in reversed(transcript().events):
        if event.event == "model" and getattr(event, "pending", False):
            continue  # this very call
        if event.event == "model" and getattr(event, "model", "") == "bedside/human":
            tag = tag_of(list(event.input))
            if tag is not None and tag.name == protocol:
                return None
        if event.event != "info" or not isinstance(event.data, dict):
            continue
        data = event.data
        if event.source == "parse" and data.get("protocol") == protocol:
            return {"kind": "unreadable", "reason": str(data.get("error")), "reply": str(data.get("unparsed_reply"))}
        if event.source == "discard" and data.get("role") == role:
            return {
                "kind": "discarded",
                "reason": "the supervisor did not accept it; write this turn again (its correction is in your "
                "instructions)",
                "reply": str(data.get("discarded")),
            }
    return None


class HumanEngine:
    """See the module docstring."""

    reads_render_context = False  # the render context (case facts, answer material) never reaches the page
    context_window = 0

    def __init__(
        self,
        port: int | str | None = None,
        journal: str | None = None,
        replay: str = "this_run",
        notices: bool | str = True,
        steps: bool | str = False,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise SetupError(
                f"bedside/human: unknown option(s) {', '.join(sorted(unknown))}; it takes {', '.join(OPTIONS)}"
            )
        if replay not in get_args(Replay):
            raise SetupError(f"bedside/human: replay={replay!r}: use {' or '.join(get_args(Replay))}")
        self.port = int(port) if port else None
        self.journal = Path(journal) if journal else None
        self.replay: Replay = "across_runs" if replay == "across_runs" else "this_run"
        self.notices = str(notices).strip().lower() not in ("false", "0", "no", "off")
        #: a judge's intermediate steps (what it extracts before it rates) are asked of the person too
        self.asks_steps = str(steps).strip().lower() in ("true", "1", "yes", "on")
        self.instance = os.urandom(6).hex()
        register_page_hooks()
        with _desk_lock:
            if self.port:
                _asked.setdefault("port", self.port)
            if self.journal:
                _asked.setdefault("journal", self.journal)

    def identity(self) -> str:
        """Never the same twice: Inspect's cache keys a reply on the model's identity, and a reply one
        person typed must never be served to another run (a run's own replies come from its journal)."""
        return f"human/{self.instance}"

    async def generate(self, input: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        from inspect_ai.log import transcript

        tag = tag_of(input)
        protocol = tag.name if tag else "untagged"
        schema = tag.schema if tag else None
        if schema is None and config.response_schema is not None:
            schema = config.response_schema.json_schema.model_dump(exclude_none=True)
        active = sample_active()
        run, task, case, epoch = sample_key() or ("run", "", "?", 1)
        role = protocol.split(".", 1)[-1]
        shown = visible_messages(input)
        attempt = int(config.seed or 0)
        budget, others = turn_budget(role)
        log = active.log_location if active is not None else None
        journal_path = (
            self.journal or _asked.get("journal") or _scoring.get("journal") or default_journal(task, run, log)
        )
        previous = asked_again(protocol, role)
        the_desk = desk(self.port, saved_port(journal_path) if _desk is None else None)
        journal = the_desk.journal(journal_path, run, log, self.replay)
        system = next((m["text"] for m in shown if m["role"] == "system"), None)
        call = Call(
            id=call_id(task, case, epoch, protocol, attempt, shown),
            run=run,
            task=task,
            case=case,
            epoch=epoch,
            protocol=protocol,
            role=role,
            turn=1 + sum(m.role == "assistant" for m in input),
            attempt=attempt,
            messages=shown,
            schema=schema,
            form=tag.form if tag else None,
            budget=budget,
            counterpart=others,
            added=the_desk.added_instructions((run, case, epoch, role), system) if self.notices else None,
            previous=previous,
        )
        with awaiting_human("question", protocol):
            reply, intervals, replayed = await the_desk.answer(call, journal, self.replay, self.notices)
        if call.notices:
            told: list[Any] = list(call.notices)
            transcript().info({"role": role, "shown": told}, source="bedside_human")
        output = ModelOutput.from_content(model="bedside/human", content=reply, stop_reason="stop")
        output.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)
        output.metadata = {
            "human": True,
            "human_seconds": round(length(intervals), 3),
            "human_intervals": [[round(a, 2), round(b, 2)] for a, b in union(intervals)],
            "replayed": replayed,
        }
        return output
