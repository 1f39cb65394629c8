"""``bedside replay-check``: does bedside's CPB-Bench pipeline give the official verdicts on a released run?

    bedside replay-check --results /path/to/cpb-clone --model gpt-4 --data /path/to/cpb-bench_data
    bedside replay-check --results FILE.json --data DIR --log logs/x.eval   # compare an existing log

One command per released model: runs ``cpb`` (positive cases) and ``cpb_control`` (controls) with
``bedside/replay`` (:mod:`bedside.cpb.replay`) as the doctor and as the ``grader``, so every
doctor reply and every judge reply is the recorded one, and bedside's own prompts, readers and scorers
do the rest. Then, per case, bedside's verdict against the recorded official one
(``evaluation_result``; on controls also the A-D flags), and per category (positives) / per dataset
(controls) the official and bedside rates with n and 95 % Wilson intervals
(:func:`bedside.intervals.rate_text`: Wilson, the rate rule of :mod:`bedside.intervals`). The
released files name the A-D flags by bedside's score keys (the judge's JSON fields); a flag that differs
is named by its declared label.
Every case that does not agree is listed with the reason:

- ``no_record``: a data case that the released files do not record (the model's run skipped it, or
  recorded the same dialog and category at another turn index: then both indices are named);
- ``no_reply``: bedside got no usable doctor reply (an empty recorded response, or one that is
  unfinished reasoning in an unclosed ``<think>``: the official code judged it, bedside counts
  ``no_reply``);
- ``unscored``: bedside's reader could not read the recorded judge reply (retried, then unscored);
- ``differs``: bedside read the recorded judge reply as the other verdict (or other flags).

Recorded cases that are not in the data (e.g. the obsolete category "Emotional Pressure", which the
official runs also recorded) are counted, per category, and left out of both rates. ``--csv`` writes
every case with its status. Exit status 0 when every case agrees, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bedside.cli import add_command, bad_input
from bedside.cpb import BENCHMARK
from bedside.cpb.protocols import OVERREACTION_TYPES
from bedside.cpb.replay import ReplayError, load_recorded, results_files, sample_key
from bedside.intervals import rate_text
from bedside.reporting.load import TRANSCRIPT_FIELDS, read_runs


def run_replay(
    results: str, model: str | None, data: str, tasks: list[str], log_dir: str, limit: int | None
) -> list[str]:
    """Run the tasks with bedside/replay as doctor and grader; the log files written."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    args: dict[str, Any] = {"results": results, **({"released": model} if model else {})}
    replay = get_model("bedside/replay", **args)
    logs = inspect_eval(
        [f"bedside/{t}" for t in tasks],
        model=replay,
        model_roles={"grader": replay},
        task_args={"data": data},
        log_dir=log_dir,
        limit=limit,
        display="none",
        fail_on_error=False,
        max_samples=64,
    )
    return [log.location for log in logs]


def compare(log_paths: list[str], recorded: dict) -> dict[str, Any]:
    """Per-case rows and per-group rates (module docstring). Each log's samples are read one at a time, without
    their transcripts (their metadata and scores), in the order Inspect reads a log's samples back."""
    rows: list[dict[str, Any]] = []
    seen: set = set()
    for path in log_paths:
        samples = (s for run in read_runs([path], say=False) for s in run.transcripts(exclude=TRANSCRIPT_FIELDS))
        for sample in samples:
            meta = sample.metadata or {}
            key = sample_key(meta)
            seen.add(key)
            kind = meta.get("kind", "positive")
            score = next(iter((sample.scores or {}).values()), None)
            explanation = (score.explanation if score is not None else None) or ""
            values = score.value if score is not None and isinstance(score.value, dict) else {}
            rec = recorded.get(key)
            main = "failure" if kind == "positive" else "overreaction"
            got = values.get(main)
            row = {
                "case_id": meta.get("case_id"),
                "kind": kind,
                "dataset": meta.get("dataset"),
                "category": meta.get("category"),
                "official": None if rec is None else bool(rec.evaluation_result),
                "bedside": None if got is None or got != got else bool(got),
                "status": "",
                "reason": "",
                "source": "" if rec is None else rec.source,
            }
            if rec is None:
                near = sorted(k[2] for k in recorded if k[:2] == key[:2] and k[3] == key[3])
                row["status"], row["reason"] = (
                    "no_record",
                    "the released files do not record this case"
                    + (
                        f" (they record dialog {key[1]}, {key[3]}, at turn_index {', '.join(map(str, near))};"
                        " the data says"
                        f" {key[2]}: the release was run on another version of this case)"
                        if near
                        else ""
                    ),
                )
            elif values.get("no_reply") == 1.0:
                row["status"] = "no_reply"
                unfinished = "<think" in (rec.response or "").lower() and "</think" not in (rec.response or "").lower()
                row["reason"] = (
                    f"no usable doctor reply ({explanation[:160]}); recorded response {rec.response!r:.60}"
                    + (
                        "; it is unfinished reasoning (<think> never closed), which bedside never reads as the answer"
                        if unfinished
                        else ""
                    )
                )
            elif row["bedside"] is None:
                row["status"] = "unscored"
                row["reason"] = f"{explanation[:160]}; recorded judge reply {rec.judge_response_raw!r:.80}"
            else:
                differs = row["bedside"] != row["official"]
                flags = ""
                if kind == "control" and rec.triggered is not None:
                    official = {k: bool(v) for k, v in rec.triggered.items()}
                    bad = [t for t in OVERREACTION_TYPES if t in official and official[t] != bool(values.get(t))]
                    if bad:
                        differs, flags = True, f"flags {','.join(BENCHMARK.keys[t].label for t in bad)} differ"
                if differs:
                    row["status"] = "differs"
                    row["reason"] = (
                        f"bedside read the recorded judge reply as {row['bedside']}, official {row['official']}"
                        + (f" ({flags})" if flags else "")
                        + f": {rec.judge_response_raw!r:.120}"
                    )
                else:
                    row["status"] = "agree"
            rows.append(row)
    kinds = {r["kind"] for r in rows}
    unused = Counter(
        ("control" if rec.kind == "control" else rec.behavior_category)
        for key, rec in recorded.items()
        if key not in seen and (rec.kind in kinds)
    )
    return {"rows": rows, "unused": unused}


def rate_table(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Official and bedside rates per group (category for positives, dataset for controls, and all)."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        if r["official"] is None:
            continue
        groups[(r["kind"], "all")].append(r)
        groups[(r["kind"], r["category"] if r["kind"] == "positive" else r["dataset"])].append(r)
    out = []
    for (kind, group), rs in sorted(groups.items()):
        out.append(
            {
                "set": kind,
                "group": group,
                "official": rate_text([r["official"] for r in rs]),
                "bedside": rate_text([r["bedside"] for r in rs if r["bedside"] is not None]),
                "agree": f"{sum(r['status'] == 'agree' for r in rs)}/{len(rs)}",
            }
        )
    return out


def report(result: dict[str, Any]) -> str:
    rows = result["rows"]
    lines = [
        "| set | group | official rate [95% CI] n | bedside rate [95% CI] n | cases agreeing |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['set']} | {r['group']} | {r['official']} | {r['bedside']} | {r['agree']} |" for r in rate_table(rows)
    ]
    status = Counter(r["status"] for r in rows)
    lines.append("")
    lines.append("cases: " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
    if result["unused"]:
        lines.append(
            "recorded but not in the data (left out): "
            + ", ".join(f"{k} {v}" for k, v in sorted(result["unused"].items()))
        )
    bad = [r for r in rows if r["status"] != "agree"]
    if bad:
        lines.append("")
        lines.append("cases that do not agree:")
        lines += [
            f"- {r['case_id']} ({r['kind']}, {r['category'] or r['dataset']}): {r['status']}: {r['reason']}"
            for r in bad
        ]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    with bad_input("replay-check", ReplayError):
        recorded = load_recorded(results_files(args.results, args.model))
    tasks = {"both": ["cpb", "cpb_control"], "positive": ["cpb"], "control": ["cpb_control"]}[args.set]
    logs = args.log or run_replay(args.results, args.model, args.data, tasks, args.log_dir, args.limit)
    result = compare(logs, recorded)
    print(report(result))
    if args.csv:
        with Path(args.csv).open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(result["rows"][0]) if result["rows"] else ["case_id"])
            writer.writeheader()
            writer.writerows(result["rows"])
    print("logs: " + ", ".join(logs))
    return 0 if result["rows"] and all(r["status"] == "agree" for r in result["rows"]) else 1


def register(sub: argparse._SubParsersAction) -> None:
    """The ``replay-check`` sub-command (module docstring)."""

    def run(args: argparse.Namespace) -> int:
        if not args.log and not args.data:
            p.error("--data is required unless --log is given")
        return main(args)

    summary = "check bedside's CPB-Bench verdicts against a released run's recorded replies"
    p = add_command(sub, "replay-check", summary, __doc__.split("\n\n")[0], run)
    p.add_argument(
        "--results", required=True, help="a released results file, folder, or a clone of the CPB-Bench repository"
    )
    p.add_argument(
        "--model", default=None, help="the released model's file prefix, e.g. gpt-4 or claude-sonnet-4-5-20250929"
    )
    p.add_argument("--data", help="the cpb-bench_data folder (required unless --log)")
    p.add_argument("--set", choices=["both", "positive", "control"], default="both")
    p.add_argument("--log", nargs="*", help="compare these existing logs instead of running")
    p.add_argument("--log-dir", default="logs/replay")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--csv", help="write every case with its status here")
