"""A sample's model calls and tokens by role, model and mode, from its ``ModelEvent`` s: what the health scorer
records when the sample ends (so that ``bedside report`` reads a sample's usage from its summary) and what the
report derives from a sample's events when no record is there.

Per (role, model, mode): ``calls`` (every ``ModelEvent``), ``cached_calls`` (served from Inspect's local
generation cache, ``event.cache == "read"``: counted, with no tokens) and the token fields of each call's
``output.usage`` (:data:`TOKEN_FIELDS`). ``role`` is the event's (``None``: the model under test); ``mode`` is
``batch`` for a call sent through a provider's batch API (its generate config's ``batch``), else ``live``. Where
a person played the role (``bedside/human``), ``person_seconds``: the union of the working intervals of the
person's calls (:func:`bedside.person_time.person_seconds`); None for a model's.

**The record** is a column-wise dict under the metadata key :data:`KEY` of the health score (:data:`HOLDER`), one
list per column of :data:`COLUMNS` (a count column that is 0, or ``person_seconds`` None, in every row left out),
one row per (role, model, mode) in the order of its first call, beside ``scores``: how many scores the sample had
when it was made. Why there: the health scorer ends every task's scorers, so every other scorer's model calls are in
the transcript when it records, and Inspect's re-scoring runs it again; a sample's own metadata is no place (a
scorer does not write it, and re-scoring does not rewrite it), and a scorer of its own would add a block to every
results table and ``inspect view``. Inspect's sample summary keeps a score's metadata value up to 1k of JSON, so the
record is compact: four roles of one model each take about 400 characters; a sample with about eight (role, model)
pairs still fits. A record is trusted only when whole (:func:`read`): a value over 1k (thinned by the summary), or
one made before a scorer was added to the sample (``inspect score --action append``: the sample has more scores than
it counts), is not, and the sample's events are read instead.

When Inspect re-scores a log (``inspect score``, ``bedside rescore``) it seeds the transcript with the sample's
recorded events, the old scorers' calls among them, and replaces the old ``scorers`` span with the new one in the
written log: the calls of an earlier ``scorers`` span are not counted (:func:`of_transcript`). ``bedside rescore``
records each sample's usage again from its written events (:func:`of_events`), whatever scorers it ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from inspect_ai.event import Event, ModelEvent, SpanBeginEvent
from inspect_ai.scorer import Score

from bedside.benchmark import DERIVED_SCORERS
from bedside.person_time import person_seconds

#: the score whose metadata holds the record (the health block, which every task's scorers end with), and its key
(HOLDER,) = DERIVED_SCORERS
KEY = "usage"
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "input_tokens_cache_read",
    "input_tokens_cache_write",
    "reasoning_tokens",
    "total_tokens",
)
#: a call's ``mode``: sent through a provider's batch API, or live (module docstring)
LIVE, BATCH = "live", "batch"
#: one row of usage: the call's (role, model, mode), its counts, and the working seconds of a person's calls
KEYS = ("role", "model", "mode")
COUNTS = ("calls", "cached_calls", *TOKEN_FIELDS)
PERSON = "person_seconds"
COLUMNS = (*KEYS, *COUNTS, PERSON)
#: the span Inspect opens around a sample's scorers
SCORERS_SPAN = "scorers"


def mode_of(event: ModelEvent) -> str:
    """``batch`` for a model call sent through a provider's batch API (its generate config's ``batch``), else
    ``live``."""
    config = getattr(event, "config", None)
    return BATCH if config is not None and config.batch else LIVE


def rows_of(events: Iterable[Event]) -> list[dict[str, Any]]:
    """One row per (role, model, mode) of the model calls among ``events``, in the order of each one's first
    call: its keys and counts (module docstring)."""
    rows: dict[tuple[str | None, str, str], dict[str, Any]] = {}
    worked: dict[tuple[str | None, str, str], list[dict[str, Any]]] = {}  # a person's calls' output metadata
    for event in events:
        if not isinstance(event, ModelEvent):
            continue
        key = (event.role, event.model, mode_of(event))
        row = rows.setdefault(key, {**dict(zip(KEYS, key)), **{c: 0 for c in COUNTS}, PERSON: None})
        row["calls"] += 1
        meta = event.output.metadata if event.output is not None else None
        if meta and meta.get("human"):
            worked.setdefault(key, []).append(meta)
        if event.cache == "read":
            row["cached_calls"] += 1
            continue
        usage = event.output.usage if event.output is not None else None
        if usage is None:
            continue
        for field in TOKEN_FIELDS:
            row[field] += int(getattr(usage, field, None) or 0)
    for key, metadata in worked.items():
        rows[key][PERSON] = person_seconds(metadata)
    return list(rows.values())


def record(rows: Sequence[Mapping[str, Any]], scorers: Iterable[str]) -> dict[str, Any]:
    """The record of ``rows`` (:func:`rows_of`), made when the sample's scores were ``scorers``: a count column
    that is 0 in every row left out."""
    columns = {column: [row[column] for row in rows] for column in COLUMNS}
    kept = {c: v for c, v in columns.items() if c in KEYS or (any(v) if c in COUNTS else any(x is not None for x in v))}
    return {"scores": len(set(scorers)), **kept}


def of_events(events: Sequence[Event], scorers: Iterable[str]) -> dict[str, Any]:
    """The record of a sample's events as written in its log."""
    return record(rows_of(events), scorers)


def of_transcript(events: Sequence[Event], scorers: Iterable[str]) -> dict[str, Any]:
    """The record of a sample's events in its transcript while its scorers run: every model call but those of an
    earlier ``scorers`` span (a re-scored sample's recorded scorers, which its written log replaces)."""
    parents: dict[str, str | None] = {}
    scoring: list[str] = []
    for event in events:
        if isinstance(event, SpanBeginEvent):
            parents[event.id] = event.parent_id
            if event.name == SCORERS_SPAN:
                scoring.append(event.id)
    replaced = set(scoring[:-1])

    def kept(event: Event) -> bool:
        span, seen = event.span_id, set()
        while span is not None and span not in seen:
            if span in replaced:
                return False
            seen.add(span)
            span = parents.get(span)
        return True

    return record(rows_of(e for e in events if isinstance(e, ModelEvent) and kept(e)), scorers)


def read(scores: Mapping[str, Score] | None) -> list[dict[str, Any]] | None:
    """The rows recorded in a sample's ``scores``, or None when there is no whole record of these scores (none,
    thinned by Inspect's summary, or made before another scorer was added)."""
    found = (scores or {}).get(HOLDER)
    value = (found.metadata or {}).get(KEY) if found is not None else None
    if not isinstance(value, dict) or value.get("scores") != len(scores or {}):
        return None
    keys = [value.get(column) for column in KEYS]
    if not all(isinstance(c, list) and len(c) == len(keys[0]) for c in keys):  # type: ignore[arg-type]
        return None
    rows = [dict(zip(KEYS, values)) for values in zip(*keys)]
    for column in (*COUNTS, PERSON):
        counts = value.get(column, [0 if column in COUNTS else None] * len(rows))
        if not isinstance(counts, list) or len(counts) != len(rows):
            return None
        for row, count in zip(rows, counts):
            row[column] = count
    return rows
