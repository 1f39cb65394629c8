"""A run past one process: cut into units of (task, model, shard), run as Ray tasks, read back as one.

- :mod:`bedside.scale.shards`: what a shard is (a stable function of the sample id) and what every unit's
  log carries (the run id, shard *i* of *n*), the directory layout of a run's logs;
- :mod:`bedside.scale.plan`: a run's units, decided on the whole case set as Inspect builds it (the same
  tasks, ``-T``, model and role arguments as ``inspect eval``), and the connection budget per unit;
- :mod:`bedside.scale.unit`: one unit, an ordinary ``eval_set()`` in its own log directory (a re-run
  resumes it: only unfinished samples run again);
- :mod:`bedside.scale.engine`: the units in this process or as Ray tasks (every core of a laptop, or a
  Ray cluster by address);
- :mod:`bedside.scale.command`: the ``bedside scale`` command;
- :mod:`bedside.scale.merge`: the logs of a sharded run read back as one log (every reader, through
  :mod:`bedside.reporting.load`), refusing a missing or duplicated shard or shards of different runs.

Nothing here names a benchmark, and only :mod:`bedside.scale.engine` imports Ray (when a run asks for it).
The docs page: docs/scaling-out.md.
"""
