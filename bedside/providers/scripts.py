"""What the scripted model's scripts share (each benchmark's scripts are in its package, e.g.
``bedside/<benchmark>/scripted.py``; :mod:`bedside.providers.scripted`).

A script module exports ``Options`` (a dataclass of behaviour switches), ``HANDLERS`` (protocol name →
``fn(messages, situation, attempt, options) -> str``: the reply) and ``SITUATIONS`` (protocol name →
``fn(call: Call) -> dict``: what the role must know about the call besides its chat messages). A
situation is read from the sample the call runs in, never from the prompt: the sample's metadata (the
case), its store (what the solvers and scorers keep), the encounter in progress (the orchestrator's
turns so far), the call's protocol tag (name and reply schema), which of a ``collect()``'s tasks the call
runs in, and the earlier calls of the sample in its transcript (their replies, read by their own
protocols; the info events the solvers write). It is gathered where the sample is — by
``bedside/scripted`` itself, or, for the loopback test server, by its Inspect hook
(:mod:`loopback_channel`), which sends it along with the request — as plain JSON values, so that
both give a handler the same input. A protocol without an entry in ``SITUATIONS`` gets ``{}``; one with an
entry also gets ``sample``, the sample and epoch the call runs in (``"<id>|<epoch>"``), on which seeded
noise keys (:func:`noisy`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from inspect_ai.event import InfoEvent, ModelEvent, SampleInitEvent, SpanBeginEvent
from inspect_ai.log import transcript
from inspect_ai.model import ChatMessage, ChatMessageUser
from inspect_ai.util import StoreModel, current_span_id, store_as

from bedside import parts
from bedside.compat import collect_task, epoch, sample_state
from bedside.parts import protocol as protocol_named
from bedside.protocols import tag_of
from bedside.records import EncounterProgress, Turn

if TYPE_CHECKING:
    from bedside.parts import ScriptModule

S = TypeVar("S", bound=StoreModel)


def script_modules() -> tuple[ScriptModule, ...]:
    """Every registered benchmark's script modules (its parts' ``scripts``)."""
    return parts.scripts()


@dataclass(frozen=True)
class Earlier:
    """An earlier call's reply, as the sample's transcript holds it."""

    protocol: str
    text: str
    #: the ``collect()`` task (1-based) the call ran in, when it ran in one
    task: int | None
    #: the reply came back whole (no error, not cut off by the context window)
    complete: bool

    def read(self) -> Any:
        """The reply as its protocol reads it (its value), or None when it is unreadable."""
        if not self.complete:
            return None
        try:
            return protocol_named(self.protocol).read(self.text)[0]
        except (ValueError, KeyError):
            return None


class Call:
    """One call, as a situation reads it: its protocol, chat messages and the sample it runs in."""

    def __init__(self, protocol: str, messages: list[ChatMessage]) -> None:
        self.protocol = protocol
        self.messages = messages

    @cached_property
    def schema(self) -> dict[str, Any]:
        """The reply schema of the call's tag (``{}`` for prose)."""
        tag = tag_of(self.messages)
        return (tag.schema if tag is not None else None) or {}

    @cached_property
    def events(self) -> list[Any]:
        return list(transcript().events)

    @cached_property
    def metadata(self) -> dict[str, Any]:
        """The sample's metadata: the running sample's, or (re-scoring a log) the logged sample's."""
        state = sample_state()
        if state is not None:
            return dict(state.metadata)
        init = next((e for e in self.events if isinstance(e, SampleInitEvent)), None)
        return dict(init.sample.metadata or {}) if init is not None else {}

    @cached_property
    def sample(self) -> str:
        """The sample the call runs in and its epoch, ``"<id>|<epoch>"``. Re-scoring a log (``bedside rescore``,
        ``inspect score``), Inspect does not say which epoch a logged sample is: ``"<id>|1"`` for every epoch,
        so seeded noise then draws alike in every epoch of a case."""
        state = sample_state()
        if state is not None:
            return f"{state.sample_id}|{state.epoch}"
        init = next((e for e in self.events if isinstance(e, SampleInitEvent)), None)
        return f"{init.sample.id if init is not None else ''}|{epoch.get(1)}"

    def store(self, model: type[S]) -> S:
        """A record of the sample store (what the solvers and scorers keep)."""
        return store_as(model)

    @property
    def turns(self) -> list[Turn]:
        """The turns the encounter in progress has accepted so far (empty outside an encounter)."""
        return list(store_as(EncounterProgress).turns)

    @cached_property
    def _spans(self) -> dict[str, SpanBeginEvent]:
        return {e.id: e for e in self.events if isinstance(e, SpanBeginEvent)}

    def _task_of(self, span_id: str | None, opened_in: str | None = None) -> int | None:
        """The ``collect()`` task (1-based) that span ``span_id`` is or lies in: the innermost one, or with
        ``opened_in`` the one opened directly in that span. None when there is none."""
        while span_id is not None and span_id in self._spans:
            span = self._spans[span_id]
            index = collect_task(span.name, span.type)
            if index is not None and (opened_in is None or span.parent_id == opened_in):
                return index
            span_id = span.parent_id
        return None

    @cached_property
    def task(self) -> int | None:
        """Which of a ``collect()``'s tasks (1-based, in the order of its coroutines) the call runs in;
        None when it runs in none."""
        return self._task_of(current_span_id())

    def replies(self, *protocols: str, this_span: bool = False) -> list[Earlier]:
        """The replies of the sample's earlier calls of ``protocols``, oldest first, each with the
        ``collect()`` task it ran in. With ``this_span``: only the calls made in the span this call runs
        in (e.g. this turn), there or in the ``collect()`` tasks it opened (the task: their index, None
        for a call made in the span itself)."""
        here = current_span_id()
        found = []
        for e in self.events:
            if not isinstance(e, ModelEvent) or e.pending:
                continue
            tag = tag_of(e.input)
            if tag is None or tag.name not in protocols:
                continue
            if this_span:
                if e.span_id == here:
                    task = None
                else:
                    task = self._task_of(e.span_id, opened_in=here)
                    if task is None:
                        continue
            else:
                task = self._task_of(e.span_id)
            complete = not e.error and e.output.stop_reason != "model_length"
            found.append(Earlier(tag.name, e.output.completion, task, complete))
        return found

    def latest_reply(self, *protocols: str) -> Earlier | None:
        """The most recent readable reply of ``protocols`` in the sample (None if there is none)."""
        found = [r for r in self.replies(*protocols) if r.read() is not None]
        return found[-1] if found else None

    def info(self, source: str) -> list[dict[str, Any]]:
        """The data of the sample's info events of ``source`` (e.g. the orchestrator's soft corrections)."""
        return [
            e.data for e in self.events if isinstance(e, InfoEvent) and e.source == source and isinstance(e.data, dict)
        ]


def situation_of(protocol: str, messages: list[ChatMessage]) -> dict[str, Any]:
    """What the script of ``protocol`` reads about this call (module docstring), as JSON values."""
    from pydantic_core import to_jsonable_python

    gather: Callable[[Call], dict[str, Any]] | None = next(
        (m.SITUATIONS[protocol] for m in script_modules() if protocol in getattr(m, "SITUATIONS", {})), None
    )
    if gather is None:
        return {}
    call = Call(protocol, messages)
    return to_jsonable_python({**gather(call), "sample": call.sample}, fallback=str)


def noisy(verdict: bool, probability: float, seed: int, situation: dict[str, Any], *item: object) -> bool:
    """``verdict``, flipped with ``probability`` by a seeded draw: the same draw for the same ``seed``, sample
    and epoch (the situation's ``sample``) and ``item`` (e.g. the judge and the question), independent across
    them. A scripted judge's run-to-run noise (the options ``judge_flip`` and ``noise_seed`` of the
    benchmarks' scripts): its verdicts differ between epochs and between runs of other seeds, never between
    retries of one call."""
    if not float(probability) > 0:
        return verdict
    key = repr((int(seed), str(situation.get("sample", "")), *map(str, item))).encode()
    draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
    return verdict != (draw < float(probability))


def last_user_text(messages: list[ChatMessage]) -> str:
    """The latest conversation turn the role was shown (its last user message)."""
    for m in reversed(messages):
        if isinstance(m, ChatMessageUser):
            return m.text
    return ""
