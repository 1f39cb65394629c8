"""Person-time: the time a person worked on ``bedside/human``'s calls, as the union of working intervals.

The page reports every few seconds that a call is shown on a visible page whose person has been active
lately; reports closer than :data:`WORK_GAP_SECONDS` join into one working interval (epoch seconds). A
call's output carries its intervals (``human_intervals``) and their length (``human_seconds``). Waiting
time is never working time, and time counts once however many calls were open: a run's person-time is
the length of the union of its calls' intervals (:func:`person_seconds`), so two tabs open side by side
do not double it. Older logs without intervals count their ``human_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: the page reports work every 2 s; reports further apart than this end a working interval
WORK_GAP_SECONDS = 10.0


def extend(intervals: list[list[float]], at: float) -> None:
    """Work seen at ``at``: the last interval grows to it, or a new one starts after a gap."""
    if intervals and at - intervals[-1][1] <= WORK_GAP_SECONDS:
        intervals[-1][1] = max(intervals[-1][1], at)
    else:
        intervals.append([at, at])


def union(intervals: Iterable[Iterable[float]]) -> list[list[float]]:
    """The intervals merged where they overlap or touch, in order."""
    merged: list[list[float]] = []
    for start, end in sorted((float(a), float(b)) for a, b in intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def length(intervals: Iterable[Iterable[float]]) -> float:
    return sum(end - start for start, end in union(intervals))


def person_seconds(metadata: Iterable[dict[str, Any] | None]) -> float:
    """The person-time of these human outputs (their metadata): the union of their working intervals,
    plus ``human_seconds`` of outputs recorded without intervals."""
    intervals: list[list[float]] = []
    without = 0.0
    for meta in metadata:
        if not meta or not meta.get("human"):
            continue
        if meta.get("human_intervals") is not None:
            intervals += meta["human_intervals"]
        else:
            without += float(meta.get("human_seconds") or 0.0)
    return length(intervals) + without
