"""One run as the readers read it: :class:`Run`, a log's header and one light record per sample (Inspect's
:class:`~inspect_ai.log.EvalSampleSummary`), its transcripts read only when asked, one sample at a time.
:mod:`bedside.reporting.load` makes runs from log files (and says what a record holds); a sharded run's
units become one run in :mod:`bedside.scale.merge`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from inspect_ai.log import (
    EvalLog,
    EvalSample,
    EvalSampleSummary,
    read_eval_log,
    read_eval_log_async,
    read_eval_log_sample,
    read_eval_log_sample_async,
)


@dataclass
class Run:
    """One run as the readers read it: its header and one record per (sample id, epoch), in Inspect's order."""

    path: str  # the log file, or a sharded run's ``.shards`` folder
    header: EvalLog  # header only (``samples`` None)
    samples: list[EvalSampleSummary]  # in Inspect's order (epoch, then id)
    #: (sample id as text, epoch) -> the log file its sample is read from (an attempt, a shard's unit)
    sources: dict[tuple[str, int], str] = field(default_factory=dict)
    superseded: list[str] = field(default_factory=list)  # earlier attempts no sample is read from
    #: a run made from a log held in memory (:meth:`of`): its samples, read from it instead of a file
    held: EvalLog | None = None
    _json: tuple[str, dict[tuple[str, int], EvalSample]] = field(default=("", {}), repr=False)
    _reading: anyio.Lock | None = field(default=None, repr=False)

    @property
    def eval(self) -> Any:
        return self.header.eval

    @property
    def status(self) -> str:
        return self.header.status

    @property
    def error(self) -> Any:
        return self.header.error

    @property
    def stats(self) -> Any:
        return self.header.stats

    @property
    def results(self) -> Any:
        return self.header.results

    @property
    def plan(self) -> Any:
        return self.header.plan

    @property
    def location(self) -> str:
        return self.path

    @classmethod
    def of(cls, log: EvalLog, path: str | None = None) -> Run:
        """A run of a log held in memory (its records whole, its transcripts its samples)."""
        samples = [record_of(s) for s in log.samples or []]
        header = log.model_copy(update={"samples": None})
        return cls(path or str(log.location), header, samples, held=log)

    def transcripts(self, exclude: set[str] | None = None) -> Iterator[EvalSample]:
        """Each sample whole (messages, events, store), one at a time, in the order of ``samples``; ``exclude``:
        fields left out (of a ``.eval`` log's samples, as Inspect's ``exclude_fields``)."""
        for record in self.samples:
            yield self.sample(record.id, record.epoch, exclude=exclude)

    def sample(
        self, id: int | str, epoch: int, resolve_attachments: bool = False, exclude: set[str] | None = None
    ) -> EvalSample:
        """One sample whole, read from the log that holds it (a ``.json`` log is read whole: it has no index;
        the last one read is kept for the next sample)."""
        key = (str(id), epoch)
        if self.held is not None:
            return next(s for s in self.held.samples or [] if (str(s.id), s.epoch) == key)
        source = self.sources.get(key, self.path)
        if not source.endswith(".json"):
            return read_eval_log_sample(
                source, id, epoch, resolve_attachments=resolve_attachments, exclude_fields=exclude
            )
        if self._json[0] != source:
            self._keep_json(source, read_eval_log(source, resolve_attachments=resolve_attachments))
        return self._json[1][key]

    async def sample_async(self, id: int | str, epoch: int) -> EvalSample:
        """:meth:`sample` in a running event loop (Inspect's async readers; the sync ones would re-enter the loop)."""
        key = (str(id), epoch)
        if self.held is not None:
            return self.sample(id, epoch)
        source = self.sources.get(key, self.path)
        if not source.endswith(".json"):
            return await read_eval_log_sample_async(source, id, epoch)
        self._reading = self._reading or anyio.Lock()  # one whole read of a .json log, however many samples wait
        async with self._reading:
            if self._json[0] != source:
                self._keep_json(source, await read_eval_log_async(source))
        return self._json[1][key]

    def _keep_json(self, source: str, log: EvalLog) -> None:
        """A ``.json`` log's samples, kept for the next sample read from it."""
        self._json = (source, {(str(s.id), s.epoch): s for s in log.samples or []})


def record_of(sample: EvalSample) -> EvalSampleSummary:
    """A sample's record: its summary with its scores and metadata whole (Inspect's summary thins them)."""
    summary = sample.summary()
    fields = {name: getattr(summary, name) for name in EvalSampleSummary.model_fields}
    return EvalSampleSummary.model_construct(**(fields | {"metadata": sample.metadata, "scores": sample.scores}))


def inspect_order(sample: EvalSample | EvalSampleSummary) -> tuple[int, str]:
    """The order Inspect reads a log's samples back in: epoch, then id (numbers as zero-filled text)."""
    return sample.epoch, sample.id if isinstance(sample.id, str) else str(sample.id).zfill(20)
