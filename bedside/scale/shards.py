"""What a shard is, and what every unit of a sharded run writes into its log.

A run is cut into units of (task, model, shard). The shards of a case set are dealt by sample id
(:func:`assignment`): the ids in the order of their SHA-256, dealt round-robin, so a shard's samples do not
depend on the order of the case set, and the shards' sizes differ by one at most (a run takes as long as
its largest shard: a hash of each id alone would leave them uneven, e.g. 27 and 21 of 48). Everything else
about a sample (its persona, its balanced assignment, its seed, its epochs) is decided when the task builds
the whole case set, before any shard is taken (the units select their samples with Inspect's
``sample_id``): the samples of a sharded run are exactly those of the unsharded run. (A changed case set is
another run: its run id hashes the ids.)

Each unit's log is an ordinary Inspect log whose eval metadata holds :data:`KEY`: the run id, the shard
(1-based) and the number of shards (:class:`ShardInfo`); beside it, the task's own record of the data and
prompt hashes (``data_versions``, :mod:`bedside.versions`). The run id is a hash of the run's definition
(tasks, their arguments and data hashes, models, roles, shards, epochs, the sample selection): the same
command re-run finds its units again (and resumes them), a changed one starts another run.

A run's logs: ``<log dir>/<task>_<model>_<run id>.shards/<shard>/`` per unit (the layout Inspect's
listing and ``inspect ctl`` know as a shard set: ``inspect_ai._util.log_layout``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: the eval-metadata key of a unit's log
KEY = "bedside_shard"
#: the eval-metadata key of a log merged from a sharded run's units (a reader's, or ``bedside rescore``'s log of
#: a sharded run): the run id, the number of shards and the units' logs; such a log is an ordinary log
MERGED_KEY = "bedside_merged_shards"


@dataclass(frozen=True)
class ShardInfo:
    """The unit a log is: shard ``shard`` (1-based) of ``shards`` of run ``run_id``."""

    run_id: str
    shard: int
    shards: int

    def metadata(self) -> dict[str, Any]:
        return {KEY: {"run_id": self.run_id, "shard": self.shard, "shards": self.shards}}

    def __str__(self) -> str:
        return f"shard {self.shard} of {self.shards} of run {self.run_id}"


def shard_info(log: Any) -> ShardInfo | None:
    """The unit an Inspect log (or log header) is, or None for a log of an unsharded run."""
    found = (log.eval.metadata or {}).get(KEY)
    if not isinstance(found, dict):
        return None
    return ShardInfo(run_id=str(found["run_id"]), shard=int(found["shard"]), shards=int(found["shards"]))


def assignment(ids: Iterable[str | int], shards: int) -> dict[str, int]:
    """Sample id (as text, so ``7`` and ``"7"`` agree) -> its shard (1..``shards``): the ids in the order of
    their SHA-256, dealt round-robin (module docstring)."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    texts = sorted({str(i) for i in ids}, key=lambda t: (hashlib.sha256(t.encode("utf-8")).digest(), t))
    return {text: k % shards + 1 for k, text in enumerate(texts)}


def split(ids: Sequence[str | int], shards: int) -> list[list[str | int]]:
    """The ids of each shard (index 0 = shard 1), each in the order given."""
    where = assignment(ids, shards)
    out: list[list[str | int]] = [[] for _ in range(shards)]
    for sample_id in ids:
        out[where[str(sample_id)] - 1].append(sample_id)
    return out


def run_id(definition: Any) -> str:
    """A run id from a run's definition (any JSON-ready value): ``run-`` and 12 hex digits of its hash."""
    text = json.dumps(definition, sort_keys=True, default=str, separators=(",", ":"))
    return "run-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def slug(text: str) -> str:
    """``text`` as one path component (``openai-api/loopback/educator`` -> ``openai-api-loopback-educator``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "none"


def shards_dir(log_dir: str, task: str, model: str, run: str) -> str:
    """The folder of a (task, model)'s shards in a run: ``<log dir>/<task>_<model>_<run id>.shards``."""
    return f"{log_dir.rstrip('/')}/{slug(task.split('/')[-1])}_{slug(model)}_{run}.shards"


def unit_dir(log_dir: str, task: str, model: str, run: str, shard: int) -> str:
    """The log directory of one unit: ``<shards dir>/<shard>`` (its own eval set)."""
    return f"{shards_dir(log_dir, task, model, run)}/{shard}"
