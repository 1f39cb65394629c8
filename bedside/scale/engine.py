"""Where a run's units run: in this process one after another (:class:`InProcess`), or as Ray tasks
(:class:`RayEngine`) on every core of this machine or on a Ray cluster by address.

The engine never has more than ``at_once`` units running (:mod:`bedside.scale.plan` divided the run's
connection budget by that number). A unit that does not end ``success`` is tried again, up to ``retries``
times, after a pause that doubles each time (a store that was unreachable for a while, a provider's
outage); each try resumes the unit's log (:mod:`bedside.scale.unit`). Ray itself re-runs a unit whose
worker process died (killed, out of memory) or whose node left the cluster (``max_retries``), on whatever
node is left; that re-run resumes the unit's log too.

Ray is imported only by :class:`RayEngine`. On a Ray cluster every node needs bedside installed (the same
version), the task files and data at the same paths, and the credentials of the models in its environment:
a driver's variables reach the workers only when named with ``--env`` (Ray's ``runtime_env``), since Ray
keeps them in its cluster state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bedside.scale.plan import Unit
from bedside.scale.unit import UnitResult, run_unit

#: Ray's re-runs of a unit whose worker died or whose node left (system failures)
RAY_MAX_RETRIES = 3


@dataclass
class Outcome:
    """A unit's last result (None: it never returned) and every failure of its tries, in order."""

    unit: Unit
    result: UnitResult | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.result is not None and self.result.status == "success"


class Engine:
    """Runs units, at most ``at_once`` at a time; ``slots``: how many it can run at once."""

    slots: int = 1

    def run(
        self,
        units: Sequence[Unit],
        at_once: int,
        retries: int = 2,
        pause: float = 5.0,
        say: Callable[[str], None] = print,
    ) -> list[Outcome]:
        outcomes = {id(u): Outcome(u) for u in units}
        waiting: list[tuple[float, Unit, int]] = [(0.0, u, 0) for u in units]  # (not before, unit, try)
        running: dict[Any, tuple[Unit, int]] = {}
        while waiting or running:
            now = time.monotonic()
            for entry in [w for w in waiting if w[0] <= now]:
                if len(running) >= at_once:
                    break
                waiting.remove(entry)
                _, unit, attempt = entry
                running[self.submit(unit)] = (unit, attempt)
            if not running:
                time.sleep(max(0.0, min(w[0] for w in waiting) - now))
                continue
            for handle, (result, error) in self.finished(list(running)):
                unit, attempt = running.pop(handle)
                outcome = outcomes[id(unit)]
                if result is not None:
                    outcome.result = result
                if outcome.done and result is not None:
                    where = f" on node {result.node[:8]}" if result.node else ""
                    say(f"{unit}: success, {result.samples} samples{where} ({result.log})")
                    continue
                failure = error or f"status {result.status if result else 'unknown'}" + (
                    f": {result.error}" if result and result.error else ""
                )
                outcome.failures.append(failure)
                if attempt < retries:
                    wait = pause * 2**attempt
                    say(f"{unit}: {failure}; trying again in {wait:.0f} s (it resumes its log)")
                    waiting.append((time.monotonic() + wait, unit, attempt + 1))
                else:
                    say(f"{unit}: {failure}; giving up after {attempt + 1} tries")
        return [outcomes[id(u)] for u in units]

    def submit(self, unit: Unit) -> Any:
        raise NotImplementedError

    def finished(self, handles: list[Any]) -> list[tuple[Any, tuple[UnitResult | None, str | None]]]:
        """At least one of ``handles`` that has finished (blocking until one has), with (result, error)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class InProcess(Engine):
    """The units one after another in this process (``--workers 1``; no Ray needed)."""

    slots = 1

    def __init__(self) -> None:
        self._done: dict[int, tuple[UnitResult | None, str | None]] = {}
        self._next = 0

    def submit(self, unit: Unit) -> Any:
        self._next += 1
        try:
            self._done[self._next] = (run_unit(unit), None)
        except Exception as error:  # a failed try: reported and retried like a Ray task's
            self._done[self._next] = (None, f"{type(error).__name__}: {error}")
        return self._next

    def finished(self, handles: list[Any]) -> list[tuple[Any, tuple[UnitResult | None, str | None]]]:
        return [(h, self._done.pop(h)) for h in handles]


class RayEngine(Engine):
    """Units as Ray tasks (one CPU each): a new local Ray instance of ``workers`` CPUs, or the cluster at
    ``address`` (``workers``: how many units at once; default its CPUs). ``env``: variables of this process
    to set in every worker (Ray's ``runtime_env``).

    Without an address the local instance is always a new one (Ray's ``address="local"``): never a cluster
    that Ray's own look-up would find (``RAY_ADDRESS``, or the address file ``ray start`` leaves in Ray's
    temporary folder, which outlives a cluster that died). :mod:`bedside.scale.command` passes
    ``RAY_ADDRESS`` as the address when ``--address`` is not given."""

    def __init__(self, workers: int | None = None, address: str | None = None, env: Sequence[str] = ()) -> None:
        import ray

        self.ray = ray
        missing = [name for name in env if name not in os.environ]
        if missing:
            raise ValueError(f"--env {missing[0]}: not set in this environment")
        runtime_env = {"env_vars": {name: os.environ[name] for name in env}} if env else None
        options: dict[str, Any] = {"runtime_env": runtime_env, "logging_level": "warning"}
        if address:
            ray.init(address=address, **options)
            cpus = int(ray.cluster_resources().get("CPU", 1))
            self.slots = workers or max(1, cpus)
        else:
            self.slots = workers or os.cpu_count() or 1
            ray.init(address="local", num_cpus=self.slots, include_dashboard=False, **options)
        self.remote = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(run_unit)

    def submit(self, unit: Unit) -> Any:
        # the task's name is the worker's process title while it runs (``ray::<name>``, e.g. in ``ps``)
        return self.remote.options(name=f"bedside-unit {unit.task_name} {unit.info.shard}/{unit.info.shards}").remote(
            unit
        )

    def finished(self, handles: list[Any]) -> list[tuple[Any, tuple[UnitResult | None, str | None]]]:
        done, _ = self.ray.wait(handles, num_returns=1)
        out: list[tuple[Any, tuple[UnitResult | None, str | None]]] = []
        for handle in done:
            try:
                out.append((handle, (self.ray.get(handle), None)))
            except Exception as error:  # the task raised, or Ray gave up on it (worker or node lost)
                out.append((handle, (None, _one_line(error))))
        return out

    def close(self) -> None:
        self.ray.shutdown()


def _one_line(error: BaseException) -> str:
    """A Ray error in one line: its type and the first line of its own message (Ray's carry a traceback)."""
    cause = getattr(error, "cause", None) or error
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}".strip()
