"""``bedside scale TASK... --model M [--model-role R=M ...] [-T k=v ...] [--workers N | --address ADDR]``:
one run spread over processes and machines, resumable, read back as one run.

Takes the task, model and role arguments of ``inspect eval`` (task files or names, ``-T``, ``--model`` with
several models separated by commas, ``-M``, ``--model-role``, ``--limit``, ``--sample-id``, ``--epochs``),
cuts the run into units of (task, model, shard) and runs them: ``--workers 1`` one after another in this
process; otherwise as Ray tasks, on a new local Ray instance of ``--workers`` CPUs (default: every core) or
on the Ray cluster at ``--address`` (``ray start --head`` on one node and ``ray start --address`` on the
others, KubeRay, a Ray cluster inside a Slurm allocation; default ``RAY_ADDRESS``, which a Ray job's
entrypoint has). Without an address the local instance is always a new one, whatever a dead cluster left
behind in Ray's temporary folder. ``--log-dir`` may be a local folder, a shared file
system or ``s3://bucket/prefix`` (Inspect writes it through fsspec; ``AWS_ENDPOINT_URL`` for an S3-compatible
store).

``--max-connections`` is the connection budget per model for the whole run and ``--max-samples`` the samples
at once over the whole run (each unit gets its share: :mod:`bedside.scale.plan`). Re-running the same command
resumes the run: finished units are left as they are, unfinished ones run only their unfinished samples
(:mod:`bedside.scale.unit`). ``bedside report LOG_DIR`` (and every reader) reads the units as one run.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from bedside.cli import BadInput, add_command, bad_input
from bedside.compat import parse_cli_args
from bedside.scale.engine import Engine, InProcess, RayEngine
from bedside.scale.plan import PlanError, RunSpec, plan

#: pass-through ``eval_set()`` options: flag -> (argument name, type)
EVAL_OPTIONS: dict[str, tuple[str, Any]] = {
    "--epochs": ("epochs", int),
    "--max-retries": ("max_retries", int),
    "--timeout": ("timeout", int),
    "--attempt-timeout": ("attempt_timeout", int),
    "--retry-on-error": ("retry_on_error", int),
    "--log-buffer": ("log_buffer", int),
    "--message-limit": ("message_limit", int),
    "--token-limit": ("token_limit", int),
    "--time-limit": ("time_limit", int),
    "--temperature": ("temperature", float),
    "--seed": ("seed", int),
}


def spec_of(args: argparse.Namespace) -> RunSpec:
    models = args.model or os.environ.get("INSPECT_EVAL_MODEL")
    if not models:
        raise PlanError("--model is required (or INSPECT_EVAL_MODEL)")
    eval_args = {name: getattr(args, name) for name, _ in EVAL_OPTIONS.values() if getattr(args, name) is not None}
    if args.fail_on_error is not None:
        eval_args["fail_on_error"] = args.fail_on_error
    if args.no_log_realtime:
        eval_args["log_realtime"] = False
    return RunSpec(
        tasks=tuple(args.tasks),
        models=tuple(m.strip() for m in models.split(",") if m.strip()),
        log_dir=args.log_dir or os.environ.get("INSPECT_LOG_DIR", "./logs"),
        task_args=parse_cli_args(args.T) if args.T else {},
        model_args=parse_cli_args(args.M) if args.M else {},
        model_base_url=args.model_base_url,
        model_roles=tuple(args.model_role or ()),
        shards=args.shards,
        limit=_limit(args.limit),
        sample_id=tuple(s.strip() for s in args.sample_id.split(",")) if args.sample_id else None,
        max_connections=args.max_connections,
        max_samples=args.max_samples,
        eval_args=eval_args,
        run_id=args.run_id,
    )


def run(args: argparse.Namespace) -> int:
    with bad_input("scale", PlanError, ValueError):
        spec = spec_of(args)
    engine: Engine
    address = args.address or os.environ.get("RAY_ADDRESS") or None
    if args.workers == 1 and not address:
        engine = InProcess()
    else:
        try:
            engine = RayEngine(args.workers, address, args.env or ())
        except ImportError as missing:
            message = "Ray is not installed (pip install 'bedside[scale]'), or run with --workers 1"
            raise BadInput("scale", message) from missing
    try:
        with bad_input("scale", PlanError, ValueError):
            run_plan = plan(spec, engine.slots)
        print(
            f"run {run_plan.run_id}: {len(run_plan.units)} units "
            f"({', '.join(f'{k}: {n} samples' for k, n in run_plan.samples.items())}), "
            f"{run_plan.at_once} at once on {engine.slots} slot(s); each unit max_connections "
            f"{run_plan.units[0].max_connections if run_plan.units else 0} (budget {run_plan.budget} per model)"
            + (
                f", max_samples {run_plan.units[0].max_samples}"
                if run_plan.units and run_plan.units[0].max_samples
                else ""
            )
            + f"; logs in {spec.log_dir}",
            flush=True,
        )
        outcomes = engine.run(run_plan.units, run_plan.at_once, retries=args.unit_retries, say=_say)
    finally:
        engine.close()
    unfinished = [o for o in outcomes if not o.done]
    if unfinished:
        print(
            f"bedside scale: {len(unfinished)} of {len(outcomes)} units of run {run_plan.run_id} are unfinished "
            f"(first: {unfinished[0].unit}: {unfinished[0].failures[-1] if unfinished[0].failures else 'no result'}); "
            "re-run the same command to resume them"
        )
        return 1
    print(f"run {run_plan.run_id}: every unit finished; read it with: bedside report {spec.log_dir}")
    return 0


def _say(line: str) -> None:
    print(line, flush=True)


def _limit(text: str | None) -> int | tuple[int, int] | None:
    """``--limit`` as ``inspect eval`` reads it: ``N`` or ``START-END`` (1-based, inclusive)."""
    if text is None:
        return None
    if "-" not in text:
        return int(text)
    start, end = (int(x) for x in text.split("-"))
    return (start - 1, end)


def register(sub: argparse._SubParsersAction) -> None:
    """The ``scale`` sub-command (module docstring)."""
    p = add_command(
        sub, "scale", "one run over many processes or a Ray cluster, resumable, read back as one run", __doc__, run
    )
    p.add_argument("tasks", nargs="+", metavar="TASK", help="task file(s) or name(s), as for inspect eval")
    p.add_argument("--model", help="model(s) under test, comma-separated (as inspect eval)")
    p.add_argument("-M", action="append", metavar="KEY=VALUE", help="model argument (repeatable)")
    p.add_argument("--model-base-url", help="base URL of the model under test")
    p.add_argument(
        "--model-role", action="append", metavar="ROLE=MODEL", help="model role (repeatable, as inspect eval)"
    )
    p.add_argument("-T", action="append", metavar="KEY=VALUE", help="task argument (repeatable)")
    p.add_argument(
        "--log-dir", help="log folder: local, shared, or s3://bucket/prefix (default INSPECT_LOG_DIR or ./logs)"
    )
    p.add_argument("--limit", help="first N samples, or START-END (as inspect eval), taken before sharding")
    p.add_argument("--sample-id", help="sample ids, comma-separated (as inspect eval), taken before sharding")
    p.add_argument("--shards", type=int, help="shards per (task, model) (default: the units that run at once)")
    p.add_argument(
        "--workers", type=int, help="units at once: CPUs of a local Ray instance (default every core); 1: no Ray"
    )
    p.add_argument(
        "--address",
        help="address of a running Ray cluster (ray start --head ...; default RAY_ADDRESS, as Ray's own commands and "
        "a Ray job's entrypoint have it); without either, a new local Ray instance",
    )
    p.add_argument("--env", action="append", metavar="NAME", help="set this variable in every Ray worker (repeatable)")
    p.add_argument("--run-id", help="the run's id (default: a hash of its definition, so a re-run resumes it)")
    p.add_argument("--max-connections", type=int, help="connections per model for the whole run")
    p.add_argument("--max-samples", type=int, help="samples at once for the whole run")
    p.add_argument(
        "--fail-on-error",
        type=float,
        help="as inspect eval: a proportion (< 1) or count of sample errors that fails a unit",
    )
    p.add_argument(
        "--no-log-realtime",
        action="store_true",
        help="as inspect eval: no realtime sample buffer (less CPU a model call; no live view of a unit's running "
        "samples, and a killed unit re-runs the samples it finished since its log's last flush)",
    )
    p.add_argument("--unit-retries", type=int, default=2, help="tries again of a unit that did not finish (default 2)")
    for flag, (name, kind) in EVAL_OPTIONS.items():
        p.add_argument(flag, dest=name, type=kind, help=f"as inspect eval {flag}")
