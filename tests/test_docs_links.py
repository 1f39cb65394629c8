"""Every relative link of every Markdown file resolves: the file or folder it names exists in the
repository, and a ``#anchor`` names a heading of the page it points to (GitHub's heading slugs).

The Markdown files are the ones whose commands are run (:func:`tests.docs_commands.markdown_files`:
every ``*.md`` outside hidden folders, ``logs/`` and build output). Links inside fenced code blocks and
inline code are text, not links; links with a scheme (``https:``, ``mailto:``) are not checked here.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docs_commands import REPO, fenced_blocks, markdown_files

pytestmark = pytest.mark.eval

#: an inline link or image: [text](target) or [text](target "title"); the text may hold `code`
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
#: a reference definition: [label]: target
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(?P<text>.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"(?P<name>[^\"]+)\"")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered (code marks and link targets dropped),
    lower-cased, every character that is not a letter, digit, ``_``, ``-`` or space removed, each space
    a ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    fenced: set[int] = set()
    for start, _, body in fenced_blocks(text):
        fenced.update(range(start, start + body.count("\n") + 2))
    return [(number, line) for number, line in enumerate(text.splitlines(), start=1) if number not in fenced]


def anchors(path: Path) -> set[str]:
    """The anchors a page offers: its headings' slugs (repeated headings numbered as GitHub numbers
    them: ``name``, ``name-1``, ...) and explicit ``<a name=...>`` / ``<a id=...>``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        found.update(m["name"] for m in HTML_ANCHOR.finditer(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading["text"])
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link outside code."""
    found = []
    for number, line in prose_lines(text):
        line = INLINE_CODE.sub("", line)
        found += [(number, m["target"]) for m in INLINE_LINK.finditer(line)]
        reference = REFERENCE.match(line)
        if reference:
            found.append((number, reference["target"]))
    return found


def broken_links(root: Path = REPO) -> list[str]:
    """``file:line: target: why`` of every relative link under ``root`` that does not resolve."""
    root = root.resolve()
    broken = []
    for page in markdown_files(root):
        name = page.relative_to(root).as_posix()
        for number, target in links(page.read_text(encoding="utf-8")):
            if not target or SCHEME.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            where = (page.parent / unquote(path_part)).resolve() if path_part else page.resolve()
            why = None
            if not where.is_relative_to(root):
                why = "points outside the repository"
            elif not where.exists():
                why = "no such file or folder"
            elif anchor and (where.is_dir() or where.suffix.lower() != ".md"):
                why = "an anchor into something that is not a Markdown page"
            elif anchor and unquote(anchor) not in anchors(where):
                why = f"no heading with the anchor #{anchor} in {where.relative_to(root).as_posix()}"
            if why:
                broken.append(f"{name}:{number}: {target}: {why}")
    return broken


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Pointing a role at a server", "pointing-a-role-at-a-server"),
        ("The local engine (llama.cpp)", "the-local-engine-llamacpp"),
        ("Reading the numbers: intervals, summary and health", "reading-the-numbers-intervals-summary-and-health"),
        (
            "Reports, judge–human agreement and the regression gate",
            "reports-judgehuman-agreement-and-the-regression-gate",
        ),
        (
            "Replaying released outputs (`bedside/replay`, `bedside replay-check`)",
            "replaying-released-outputs-bedsidereplay-bedside-replay-check",
        ),
        ("Data (paper Sections 2.1.1, 4, 5.4)", "data-paper-sections-211-4-54"),
        ("Safety of the educator's advice (beyond the paper)", "safety-of-the-educators-advice-beyond-the-paper"),
        ("The `bedside` command", "the-bedside-command"),
        ("A – B", "a--b"),
    ],
)
def test_headings_get_githubs_anchors(heading, anchor):
    assert slug(heading) == anchor


def test_a_broken_link_is_reported_with_file_line_and_why(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text('# Page\n\n## Two words\n\n## Two words\n\n<a id="here"></a>\n')
    (tmp_path / "README.md").write_text(
        "\n".join(
            [
                "# Top",
                "[ok](docs/page.md) [ok](docs/page.md#two-words) [ok](docs/page.md#two-words-1) [ok](docs/)",
                "[ok](#top) [ok](docs/page.md#here) [ok](https://example.org/x#y) [`ok`](docs/page.md 'title')",
                '[gone](docs/missing.md "title")',
                "[gone](docs/missing.md)",
                "[no anchor](docs/page.md#three-words) [not a page](docs#x)",
                "`[in code](nowhere.md)` and ![an image](img.png)",
                "```bash",
                "[in a fence](nowhere.md)",
                "```",
                "[outside](../elsewhere.md) [self](#nowhere)",
                "[ref]: docs/gone.md",
            ]
        )
    )
    assert broken_links(tmp_path) == [
        "README.md:4: docs/missing.md: no such file or folder",
        "README.md:5: docs/missing.md: no such file or folder",
        "README.md:6: docs/page.md#three-words: no heading with the anchor #three-words in docs/page.md",
        "README.md:6: docs#x: an anchor into something that is not a Markdown page",
        "README.md:7: img.png: no such file or folder",
        "README.md:11: ../elsewhere.md: points outside the repository",
        "README.md:11: #nowhere: no heading with the anchor #nowhere in README.md",
        "README.md:12: docs/gone.md: no such file or folder",
    ]


def test_every_relative_link_in_the_docs_resolves():
    pages = [p.relative_to(REPO).as_posix() for p in markdown_files()]
    assert {"README.md", "docs/results.md", "bedside/discharge/README.md"} <= set(pages)
    assert broken_links() == []
