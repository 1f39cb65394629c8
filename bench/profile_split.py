"""Split a ``py-spy record -f raw`` profile into bedside's share and Inspect's share of the CPU.

    .venv/bin/python bench/profile_split.py PROFILE.txt [--top 15]

py-spy samples only stacks that are on the CPU (no ``--idle``), every thread. Each sample is charged
to exactly one bucket, from its stack:

- ``inspect: model call path`` — the innermost bedside frame called ``Model.generate`` (or there is
  no bedside frame under a ``Model.generate``): Inspect's per-call machinery, the ``openai`` client,
  HTTP, retries, event recording;
- ``bedside: <callee>`` — the innermost bedside frame (``bedside/``, ``solvers/``, ``scorers/``,
  ``tasks/``) did the work itself or through a library that is not ``Model.generate``: the callee is
  the first non-bedside frame under it (e.g. ``inspect_ai/util/_json.py json_schema``, ``jinja2``,
  ``torch``), or ``own code``;
- ``inspect: framework`` — no bedside frame: Inspect's sample scheduling, transcript and log
  writing, scoring set-up, the event loop itself.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
BEDSIDE_DIRS = ("bedside/", "solvers/", "scorers/", "tasks/")
METRIC_LIBS = (
    "torch/",
    "sentence_transformers/",
    "transformers/",
    "textstat/",
    "rouge_score/",
    "nltk/",
    "pyphen/",
    "tokenizers/",
    "numpy/",
    "sklearn/",
    "scipy/",
)


def parse_frame(text: str) -> tuple[str, str]:
    m = FRAME.match(text.strip())
    if m is None:
        return text.strip(), ""
    return m.group("func"), m.group("file") or ""


def is_bedside(file: str) -> bool:
    return file.startswith(BEDSIDE_DIRS) and "site-packages" not in file


def library(file: str) -> str:
    """A short name for the package a frame's file belongs to."""
    if not file:
        return "?"
    if "/" not in file:
        return file.removesuffix(".py")
    return file.split("/", 1)[0]


def classify(stack: list[tuple[str, str]]) -> tuple[str, str | None]:
    """(bucket, innermost bedside function or None) of one sampled stack (outermost frame first)."""
    if not any(func or file for func, file in stack):
        return "unattributed: no Python frame on the GIL-holding thread", None
    inner = max((i for i, (_, f) in enumerate(stack) if is_bedside(f)), default=None)
    if inner is None:
        return "inspect: framework", None
    below = stack[inner + 1 :]
    where = f"{stack[inner][1]} {stack[inner][0]}"
    if any(
        func.endswith("Model.generate") or func == "Model.generate"
        for func, f in below
        if f.startswith("inspect_ai/model/")
    ):
        return "inspect: model call path", where
    if not below:
        return "bedside: own code", where
    func, file = below[0]
    lib = library(file)
    if any(f.startswith(METRIC_LIBS) for _, f in below):
        return "bedside: text metrics libraries (torch, textstat, rouge)", where
    if lib == "inspect_ai":
        return f"bedside: via inspect_ai {file.split('/', 1)[1] if '/' in file else file} {func}", where
    return f"bedside: via {lib}", where


def split(path: Path) -> tuple[Counter[str], Counter[str], int]:
    buckets: Counter[str] = Counter()
    bedside_fns: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        stack = [parse_frame(part) for part in stack_text.split(";")]
        bucket, where = classify(stack)
        buckets[bucket] += count
        if where is not None and bucket != "inspect: model call path":
            bedside_fns[where] += count
        total += count
    return buckets, bedside_fns, total


def report(path: Path, top: int = 15) -> str:
    buckets, fns, total = split(path)
    lines = [f"{total} samples", "", "| bucket | share |", "|---|---|"]
    grouped: Counter[str] = Counter()
    for bucket, n in buckets.items():
        grouped[bucket.split(":", 1)[0] + " (all)"] += n
    for bucket, n in grouped.most_common():
        lines.append(f"| **{bucket}** | **{n / total:.1%}** |")
    for bucket, n in buckets.most_common(top):
        lines.append(f"| {bucket} | {n / total:.1%} |")
    lines += ["", "innermost bedside frames (outside Model.generate):", ""]
    lines += [f"- {n / total:.1%} {where}" for where, n in fns.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    print(report(args.profile, args.top))


if __name__ == "__main__":
    main()
