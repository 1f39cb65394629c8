"""What a benchmark is, declared once: :class:`Benchmark` (issue 19).

Each benchmark describes itself in its own module of this package (``discharge.py``, ``medsp.py``,
``cpb.py``) as a ``BENCHMARK = Benchmark(...)``; :mod:`bedside.benchmarks` lists them in one registry
tuple. Reporting (``bedside report``, ``strata``, ``audit``), ``bedside compare`` and the report
loader (:mod:`bedside.reporting.load`) read these descriptors instead of keeping their own
per-benchmark tables, so adding a benchmark means one new module here and one registry line.

The store model and the protocols are named by dotted path and imported only when asked for
(:meth:`Benchmark.store_model`, :meth:`Benchmark.protocols`): reading a log's numbers never imports
solvers, and moving a store model is a one-line change in its descriptor.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bedside.end_reasons import EndReason

#: score keys that are bookkeeping of every benchmark, not outcomes: left out of every table
SKIP_KEYS: frozenset[str] = frozenset({"unscored"})
#: scorers whose keys copy other scorers' (the health block): left out of per-stratum tables
DERIVED_SCORERS: frozenset[str] = frozenset({"health"})
#: lower-is-better keys every benchmark's health block reports (role fallbacks, unscored judgements)
HEALTH_LOWER_IS_BETTER: frozenset[str] = frozenset({"role_fallbacks", "unscored", "judge_unscored"})


def resolve(dotted: str) -> Any:
    """The object named ``"package.module:attribute"`` (or a module, without ``:``), imported now."""
    module, _, attribute = dotted.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


@dataclass(frozen=True)
class Benchmark:
    """One benchmark's rules as reporting and the tools need them.

    - ``name``: the short name logs and reports use (``discharge``); ``title``: the paper's name;
    - ``tasks``: the Inspect task names whose logs belong to it (a task name that starts with
      ``name`` also does, e.g. a test task ``discharge_smoke``);
    - ``subject_role``: what the model under test is called (its model events carry no role);
      ``roles``: the other model roles (``--model-role``) its tasks use;
    - ``end_reasons``: the :class:`~bedside.end_reasons.EndReason` members its encounters end with;
    - ``strata``: sample- (else score-) metadata keys its results are broken down by, in order;
      ``min_n``: fewest scored cases a stratum value needs to be reported;
    - ``lower_is_better``: score keys for which lower is better (``compare``, leaderboards);
      ``pooled_keys``: rates pooled over items, never averaged per case (``strata`` leaves them out);
      ``skip_keys``: its bookkeeping keys (left out of every table);
    - ``headline``: (score key, label) of its headline table, in order; ``ranked_keys``: the
      per-case keys a sweep's leaderboard ranks models on (default: the headline keys);
    - ``variant_args``: task arguments that make two runs of one model measure different things
      (shown in a log's label when not neutral);
    - ``store``: dotted path of its sample-store model; ``protocols``: module of its reply protocols.
    """

    name: str
    title: str
    tasks: tuple[str, ...]
    subject_role: str
    roles: tuple[str, ...] = ()
    end_reasons: tuple[EndReason, ...] = ()
    strata: tuple[str, ...] = ()
    min_n: Mapping[str, int] = field(default_factory=dict)
    lower_is_better: frozenset[str] = frozenset()
    pooled_keys: frozenset[str] = frozenset()
    skip_keys: frozenset[str] = frozenset()
    headline: tuple[tuple[str, str], ...] = ()
    ranked_keys: tuple[str, ...] = ()
    variant_args: tuple[str, ...] = ()
    store: str | None = None
    protocols_module: str | None = None

    def owns(self, task: str) -> bool:
        """Whether a log of Inspect task ``task`` (``bedside/discharge`` or ``discharge``) is this benchmark's."""
        task = task.split("/")[-1]
        return task in self.tasks or task.startswith(self.name)

    def store_model(self) -> type:
        """The sample-store model (imported now)."""
        if self.store is None:
            raise LookupError(f"benchmark {self.name!r} declares no store model")
        return resolve(self.store)

    def protocols(self) -> tuple[Any, ...]:
        """The reply protocols of its model calls (``PROTOCOLS`` of :attr:`protocols_module`)."""
        return tuple(resolve(self.protocols_module).PROTOCOLS) if self.protocols_module else ()

    @property
    def ranked(self) -> tuple[str, ...]:
        return self.ranked_keys or self.headline_keys

    @property
    def headline_keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.headline)
