"""An ``.eval`` log written sample by sample through Inspect's own recorder, holding no sample once written:
:class:`LogWriter` (``bedside rescore``; bench/readers.py's sweep-sized logs).

It writes what Inspect's ``write_eval_log`` writes for a log held whole (the same recorder, each sample
condensed as Inspect stores a run's: long texts as attachments), but each sample goes into the recorder's
temporary zip as it comes (Inspect's write-through) instead of the whole log at the end. The log's start
(its header's eval and plan) is written last, with the summaries, reductions and results, so that a header
that changes while the samples are written (``bedside rescore``: the scorers applied, the new grader) is
written as it ends. The log is built at ``LOCATION.partial`` and renamed to ``LOCATION`` once finished: a
write that fails leaves nothing at ``LOCATION`` (:meth:`LogWriter.discard` removes the partial file).

A ``.json`` log is one JSON document, which no recorder writes sample by sample: its samples are held and the
log written whole at the end (Inspect's ``write_eval_log``), as it was read (a ``.json`` log has no index: it is
read whole).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

from inspect_ai.log import EvalLog, EvalSample, EvalSpec, write_eval_log_async

from bedside.compat import EvalRecorder, condense_sample


class LogWriter:
    """One local ``.eval`` log written sample by sample (module docstring): :meth:`open`, :meth:`sample` for each
    sample, then :meth:`finish` with the header (or :meth:`discard`)."""

    def __init__(self, location: str | Path) -> None:
        self.location = Path(location)
        self.partial = self.location.with_name(self.location.name + ".partial")
        self._recorder = EvalRecorder(str(self.location.parent))
        self._spec: EvalSpec | None = None
        self._held: list[EvalSample] | None = [] if self.location.suffix == ".json" else None

    async def open(self, spec: EvalSpec) -> None:
        """Start the log of the eval ``spec`` (its task, task id, creation time and model name the log's key)."""
        self.location.parent.mkdir(parents=True, exist_ok=True)
        if self._held is None:
            await self._recorder.log_init(spec, str(self.partial), clean=True)
        self._spec = spec

    async def sample(self, sample: EvalSample) -> None:
        """Write one finished sample (condensed as Inspect stores it) and its summary; nothing of it is kept."""
        assert self._spec is not None, "open() first"
        if self._held is not None:
            self._held.append(sample)
            return
        await self._recorder.log_sample(self._spec, condense_sample(sample), write_through=True)
        release_freed_memory()

    async def finish(self, header: EvalLog) -> Path:
        """Write the header (``header``'s eval, plan, status, stats, results, reductions, error and updates; its
        samples are not read), the summaries and reductions, and move the log to its location."""
        assert self._spec is not None, "open() first"
        if self._held is not None:
            await write_eval_log_async(header.model_copy(update={"samples": self._held}), str(self.partial), "json")
            os.replace(self.partial, self.location)
            return self.location
        await self._recorder.log_start(header.eval, header.plan)
        await self._recorder.log_finish(
            header.eval,
            header.status,
            header.stats,
            header.results,
            header.reductions,
            header.error,
            invalidated=header.invalidated,
            log_updates=header.log_updates,
            config_updates=header.config_updates,
        )
        os.replace(self.partial, self.location)
        return self.location

    async def discard(self) -> None:
        """Drop the log being written (its partial file removed; nothing was at its location)."""
        if self._spec is not None and self._held is None:
            await self._recorder.log_discard(self._spec)
        self.partial.unlink(missing_ok=True)


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)


def release_freed_memory() -> None:
    """Hand the memory freed since (a written sample's transcript) back to the system where the C library can
    (glibc's ``malloc_trim``; elsewhere nothing). Without it glibc's per-thread arenas keep what the zip reads
    and the metrics' threads freed: ``bedside rescore`` over 60 and 240 samples peaked at 992 and 1,134 MB
    (0.8 MB more a sample), with it at 907 and 924 MB (0.1 MB; bench/RESULTS-readers.md)."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)
