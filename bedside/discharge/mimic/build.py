"""``bedside build-cases``: MIMIC-IV-Ext-DischargeBench from a credentialed MIMIC-IV copy (paper A.1).

    VLLM_BASE_URL=http://localhost:8000/v1 bedside build-cases --mimic physionet.org/files/mimiciv/3.1 \\
        --note physionet.org/files/mimic-iv-note/2.2 --out cases.jsonl \\
        --per-chapter 20 --seed 0 --model vllm/Qwen/Qwen3-32B

(with ``vllm serve Qwen/Qwen3-32B --port 8000`` running on this machine: the notes stay local)

1. selects the cohort (:mod:`bedside.discharge.mimic.cohort`) and writes ``cases.cohort.jsonl`` (the sampled
   admissions with their notes) and ``cases.cohort_summary.json`` / ``.csv`` (selection funnel,
   chapters, Table 2 demographics), and prints the summary;
2. with ``--model``, runs the extraction task ``tasks/discharge_build_cases.py`` through Inspect
   (retries, cache, logs in ``--log-dir``) and writes ``cases.jsonl``, ``cases.audit.csv``,
   ``cases.invalid.csv`` and ``cases.summary.json`` / ``.csv``. Without ``--model`` (or with
   ``--cohort-only``) it stops after step 1 and prints the ``inspect eval`` command of step 2.

The model must be local unless ``--zero-retention`` declares that the endpoint keeps no data
(PhysioNet Credentialed Health Data Use Agreement); the check runs before any file is read.

Exit status: 0 done (invalid records, if any, are listed in ``cases.invalid.csv``), 1 the extraction
run failed, 2 bad input (missing files or columns, bad option), 3 refused by the data-use guard.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bedside.cli import add_command
from bedside.compat import parse_cli_args
from bedside.discharge import BENCHMARK
from bedside.discharge.mimic.cohort import (
    CHUNKSIZE,
    NOTE_CHUNKSIZE,
    format_summary,
    select_cohort,
    write_cohort,
    write_summary,
)
from bedside.discharge.mimic.data_use import DataUseRefused, check_endpoint
from bedside.params import SetupError

if TYPE_CHECKING:
    from bedside.discharge.mimic.cohort import Cohort


def cohort_paths(out: Path) -> dict[str, Path]:
    stem = out.with_suffix("") if out.suffix == ".jsonl" else out
    return {
        "cohort": stem.with_name(stem.name + ".cohort.jsonl"),
        "summary_json": stem.with_name(stem.name + ".cohort_summary.json"),
        "summary_csv": stem.with_name(stem.name + ".cohort_summary.csv"),
    }


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB; ``ru_maxrss`` is in kB on Linux)."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 1024 / 1024


def register(sub: argparse._SubParsersAction) -> None:
    summary = "build MIMIC-IV-Ext-DischargeBench cases from MIMIC-IV v3.1 + MIMIC-IV-Note v2.2 (paper A.1)"
    p = add_command(sub, "build-cases", summary, __doc__, run)
    p.add_argument("--mimic", required=True, help="MIMIC-IV v3.1 folder (holds hosp/patients.csv.gz ...)")
    p.add_argument("--note", required=True, help="MIMIC-IV-Note v2.2 folder (holds note/discharge.csv.gz)")
    p.add_argument("--out", required=True, help="the case file to write (JSONL); other files go next to it")
    p.add_argument("--per-chapter", type=int, default=20, help="patients sampled per ICD chapter label (20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the stratified sample (0)")
    p.add_argument("--model", help="Inspect model of the extraction, e.g. vllm/..., bedside/local (none: cohort only)")
    p.add_argument("--model-base-url", help="base URL of the model's endpoint")
    p.add_argument(
        "-M", dest="model_args", action="append", default=[], metavar="KEY=VALUE", help="model argument (repeatable)"
    )
    p.add_argument(
        "--zero-retention", action="store_true", help="declare that a non-local endpoint retains no data (DUA)"
    )
    p.add_argument("--retries", type=int, default=2, help="fresh samples asked for when a reply is unreadable (2)")
    p.add_argument("--cache", action="store_true", help="use Inspect's generation cache for the extraction calls")
    p.add_argument("--max-connections", type=int, help="concurrent model connections")
    p.add_argument(
        "--log-dir", default="logs", help="Inspect log folder (logs hold note text: keep them with the data)"
    )
    p.add_argument("--display", default=None, help="Inspect display (full, rich, plain, log, none)")
    p.add_argument("--cohort-only", action="store_true", help="stop after writing the cohort files")
    p.add_argument("--chunksize", type=int, default=None, help="rows per chunk of the hosp tables")
    p.add_argument("--note-chunksize", type=int, default=None, help="rows per chunk of the note table")


def _model_args(items: list[str]) -> dict[str, Any]:
    return parse_cli_args(items) if items else {}


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    paths = cohort_paths(out)
    model = None
    try:
        if args.per_chapter < 1:
            raise SetupError(f"--per-chapter must be at least 1, got {args.per_chapter}")
        if args.seed < 0:
            raise SetupError(f"--seed must be a non-negative integer, got {args.seed}")
        if args.model and not args.cohort_only:
            from inspect_ai.model import get_model

            model_args = _model_args(args.model_args)
            if "base_url" in model_args and args.model_base_url:
                raise SetupError("give the model's base URL once: --model-base-url or -M base_url=, not both")
            base_url = args.model_base_url or model_args.pop("base_url", None)  # -M base_url= works here
            model = get_model(args.model, base_url=base_url, memoize=False, **model_args)
            check_endpoint(model, args.zero_retention)  # before any MIMIC file is read
        cohort = _select(args)
    except DataUseRefused as ex:
        print(f"bedside build-cases: {ex}", file=sys.stderr)
        return 3
    except (SetupError, ValueError) as ex:
        print(f"bedside build-cases: {ex}", file=sys.stderr)
        return 2

    out.parent.mkdir(parents=True, exist_ok=True)
    write_cohort(cohort.records, paths["cohort"])
    write_summary(cohort.summary, paths["summary_json"], paths["summary_csv"])
    print(format_summary(cohort.summary))
    print(f"cohort: {paths['cohort']} ({len(cohort.records)} records; contains note text)")
    print(f"cohort summary: {paths['summary_json']}, {paths['summary_csv']}")
    print(f"peak memory so far: {peak_rss_mb():.0f} MB (RSS)")
    if model is None:
        print(
            "next: extract the fields with a local model, e.g.\n"
            "  inspect eval tasks/discharge_build_cases.py --model <local model>"
            f" -T cohort={paths['cohort']} -T out={out}"
        )
        return 0
    return _extract(args, model, paths["cohort"], out)


def _select(args: argparse.Namespace) -> Cohort:
    start = time.perf_counter()
    cohort = select_cohort(
        args.mimic,
        args.note,
        per_chapter=args.per_chapter,
        seed=args.seed,
        chunksize=args.chunksize or CHUNKSIZE,
        note_chunksize=args.note_chunksize or NOTE_CHUNKSIZE,
    )
    print(f"cohort selected in {time.perf_counter() - start:.1f} s")
    return cohort


def _extract(args: argparse.Namespace, model: Any, cohort: Path, out: Path) -> int:
    from inspect_ai import eval as inspect_eval

    eval_args: dict[str, Any] = {"log_dir": args.log_dir}
    if args.display:
        eval_args["display"] = args.display
    if args.max_connections:
        eval_args["max_connections"] = args.max_connections
    task_args = {
        "cohort": str(cohort),
        "out": str(out),
        "zero_retention": args.zero_retention,
        "retries": args.retries,
        "cache": args.cache,
    }
    try:
        task = BENCHMARK.task_functions["build_discharge_cases"]  # its task, through its descriptor
        [log] = inspect_eval(task, task_args=task_args, model=model, **eval_args)
    except SetupError as ex:
        print(f"bedside build-cases: {ex}", file=sys.stderr)
        return 3 if type(ex).__name__ == "DataUseRefused" else 2
    if log.status != "success":
        print(f"bedside build-cases: the extraction run ended with status {log.status}: {log.error}", file=sys.stderr)
        return 1
    written = log.results.early_stopping.metadata if log.results and log.results.early_stopping else {}
    print(f"cases: {written.get('cases')} ({written.get('valid')} valid)")
    print(f"audit: {written.get('audit')}")
    if written.get("invalid"):
        print(
            f"INVALID records ({written['invalid']}), listed for manual audit in {written.get('invalid_list')}: "
            + ", ".join(cast(list[str], written.get("invalid_case_ids", [])))
        )
    summary_path = Path(str(written.get("summary", "")))
    if summary_path.is_file():
        print(format_summary(json.loads(summary_path.read_text(encoding="utf-8"))))
    print(f"log: {log.location}")
    print(f"peak memory: {peak_rss_mb():.0f} MB (RSS)")
    return 0
