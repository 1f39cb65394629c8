"""The registered benchmarks as the docs list them, generated from the registry (:mod:`bedside.benchmarks`).

A Markdown page lists them between ``<!-- benchmarks: KIND -->`` and ``<!-- /benchmarks -->``, one of:

- ``table``: each benchmark's title (a link to its page, ``bedside/<b>/README.md``), what it is (the first
  paragraph of its package's docstring, ``bedside/<b>/__init__.py``) and its Inspect tasks (README.md);
- ``pages``: each benchmark's page and what it covers (its headings; README.md, "Documentation");
- ``scripts``: each benchmark's scripted roles for ``bedside/scripted``, the modules its parts name in
  ``Parts.scripts`` (docs/providers.md).

So a new benchmark appears in them by its registry line: ``python -m bedside.listing --write`` rewrites every
block (a contributor runs it with the other generators: docs/development.md, "Adding a benchmark"), and
``--check`` (and ``tests/test_listing.py``) fails on a stale one. A link is relative to the page's folder.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from bedside import benchmarks
from bedside.params import REPO, generated_options, markdown_files, rewrite_markdown, write_or_check
from bedside.parts import parts_of

MARKED = re.compile(
    r"(?P<open><!-- benchmarks: (?P<kind>\w+) -->\n)(?P<block>.*?)(?P<close><!-- /benchmarks -->)", re.S
)


def _link(page: Path, target: str, root: Path) -> str:
    """``target`` (a path in the repository) as a link from ``page``."""
    return Path(os.path.relpath(root / target, page.parent)).as_posix()


def _one_line(text: str) -> str:
    return re.sub(r"``(.+?)``", r"`\1`", " ".join(text.split())).replace("|", "\\|")


def _summary(benchmark: benchmarks.Benchmark) -> str:
    """The first paragraph of its package's docstring (``bedside/<b>/__init__.py``)."""
    doc = inspect.getdoc(benchmark.code(f"bedside.{benchmark.name}")) or benchmark.title
    return _one_line(doc.split("\n\n")[0])


def _headings(page: Path) -> str:
    """What a benchmark's page covers: its ``##`` headings, each followed by its ``###`` sections in parentheses,
    without their parenthesised sources or what follows a colon, a plain first word lower-cased."""
    found: list[tuple[str, list[str]]] = []
    text = page.read_text(encoding="utf-8") if page.is_file() else ""
    for level, heading in re.findall(r"^(##|###) (.+)$", text, re.M):
        heading = re.sub(r"\s*\(.*?\)", "", heading).split(":")[0].strip()
        heading = heading[:1].lower() + heading[1:] if heading[1:2].islower() else heading
        if level == "##":
            found.append((heading, []))
        elif found:
            found[-1][1].append(heading)
    return ", ".join(f"{h} ({', '.join(sections)})" if sections else h for h, sections in found)


def table(page: Path, root: Path) -> str:
    rows = ["| benchmark | what it is | tasks (`inspect eval bedside/<task>`) |", "|---|---|---|"]
    for b in benchmarks.all_benchmarks():
        tasks = ", ".join(f"`{t}`" for t in b.tasks)
        rows.append(
            f"| [**{b.title}**]({_link(page, f'bedside/{b.name}/README.md', root)}) | {_summary(b)} | {tasks} |"
        )
    return "\n".join(rows) + "\n"


def pages(page: Path, root: Path) -> str:
    rows = ["| benchmark page | what it covers |", "|---|---|"]
    for b in benchmarks.all_benchmarks():
        readme = f"bedside/{b.name}/README.md"
        rows.append(f"| [{b.title}]({_link(page, readme, root)}) | {_one_line(_headings(root / readme))} |")
    return "\n".join(rows) + "\n"


def scripts(page: Path, root: Path) -> str:
    lines = []
    for b in benchmarks.all_benchmarks():
        modules = [m.__name__.replace(".", "/") + ".py" for m in parts_of(b).scripts]
        lines.append(f"- {b.title}: " + ", ".join(f"[`{m}`]({_link(page, m, root)})" for m in modules))
    return "\n".join(lines) + "\n"


KINDS: dict[str, Callable[[Path, Path], str]] = {"table": table, "pages": pages, "scripts": scripts}


def regenerated(page: Path, text: str, root: Path) -> str:
    """``text`` of ``page`` with every marked block generated anew."""

    def block(found: re.Match[str]) -> str:
        if found["kind"] not in KINDS:
            raise KeyError(f"{page}: a block of {found['kind']!r}, which is none of {sorted(KINDS)}")
        return found["open"] + KINDS[found["kind"]](page, root) + found["close"]

    return MARKED.sub(block, text)


def _marked(root: Path) -> dict[Path, str]:
    texts = {path: path.read_text(encoding="utf-8") for path in markdown_files(root)}
    return {path: text for path, text in texts.items() if MARKED.search(text)}


def problems(root: Path = REPO) -> list[str]:
    """The pages whose blocks differ from the registry."""
    return [
        f"{path.relative_to(root).as_posix()}: the list of benchmarks is stale (python -m bedside.listing --write)"
        for path, text in _marked(root).items()
        if regenerated(path, text, root) != text
    ]


def write(root: Path = REPO) -> list[Path]:
    """Rewrite every marked block; the pages that changed."""
    return rewrite_markdown(lambda path, text: regenerated(path, text, root), markdown_files(root))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bedside.listing", description="The docs' lists of the registered benchmarks, from the registry."
    )
    generated_options(parser, "lists of the registered benchmarks")
    args = parser.parse_args(argv)
    return write_or_check(args.write, write, problems, "every list of the registered benchmarks matches the registry")


if __name__ == "__main__":
    sys.exit(main())
