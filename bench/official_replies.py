"""Read the official CPB-Bench repository's recorded judge replies with bedside's readers and compare with
the verdicts the official code recorded for them. Nothing from the repository is copied: point
the script at a clone (or a bare mirror, read with ``git show``).

    .venv/bin/python bench/official_replies.py /path/to/cpb-bench-challenging-patient-behaviors [--git]

For every recorded reply: the official reading (``-T reading=official``) and the strict one, counted as
agree (same verdict as recorded), differ, or unreadable (bedside would retry, then leave it unscored).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from bedside.cpb.protocols import FAILURE_JUDGE, OVERREACTION_JUDGE

SINGLE = "evaluators_single/output_single_turn/"
NEGATIVE = "Negative_cases/negative_generate/evaluator/output/"


def _files(root: Path, git: bool, prefix: str) -> list[str]:
    if git:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-tree", "-r", "--name-only", "HEAD", prefix],
            capture_output=True,
            text=True,
            check=True,
        )
        return [f for f in out.stdout.splitlines() if f.endswith("_results.json")]
    return [str(p.relative_to(root)) for p in (root / prefix).glob("*_results.json")]


def _load(root: Path, git: bool, name: str) -> Any:
    """The file's JSON, or [] when the snapshot lists it without its content (large files)."""
    if git:
        done = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{name}"], capture_output=True, text=True)
        return json.loads(done.stdout) if done.returncode == 0 else []
    path = root / name
    return json.loads(path.read_text()) if path.exists() else []


def _records(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        return [r for v in data.values() if isinstance(v, list) for r in v]
    return [r for r in data if isinstance(r, dict)]


def _compare(records: list[dict[str, Any]], proto, value) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for rule in ("official", "strict"):
        c: Counter = Counter()
        for r in records:
            raw = r.get("judge_response_raw")
            if not isinstance(raw, str):
                continue
            try:
                got = value(proto.read(raw, rule)[0])
            except ValueError:
                c["unreadable"] += 1
                continue
            c["agree" if got == bool(r.get("evaluation_result")) else "differ"] += 1
        out[rule] = c
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--git", action="store_true", help="read a bare mirror with git show")
    args = parser.parse_args()
    failure = [r for f in _files(args.root, args.git, SINGLE) for r in _records(_load(args.root, args.git, f))]
    over = [r for f in _files(args.root, args.git, NEGATIVE) for r in _records(_load(args.root, args.git, f))]
    for name, records, proto, value in (
        ("failure judge", failure, FAILURE_JUDGE, lambda v: v.failure),
        ("overreaction judge", over, OVERREACTION_JUDGE, lambda v: v.overreacted),
    ):
        judges = Counter(r.get("judge_model", "?") for r in records)
        print(f"{name}: {len(records)} recorded replies (judges: {dict(judges)})")
        for rule, c in _compare(records, proto, value).items():
            print(f"  {rule:8s} agree {c['agree']}, differ {c['differ']}, unreadable {c['unreadable']}")


if __name__ == "__main__":
    main()
