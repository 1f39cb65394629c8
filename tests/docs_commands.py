"""The commands the documentation tells a user to copy, found by content, and how the tests run each.

**Where they are found.** Every Markdown file of the repository (``README.md``, ``docs/**/*.md``, any
``*/README.md``; hidden folders, ``logs/`` and build output skipped): each fenced block tagged
``bash``, ``sh``, ``shell``, ``zsh`` or ``console`` is a script, run line by line as a shell would read
it (``\\`` continuations joined, ``#`` comments dropped, ``NAME=value`` lines and ``export`` setting
variables for the lines after them, ``NAME=value`` before a command setting its environment,
``$NAME`` expanded outside single quotes, ``&&`` and ``;`` separating commands; in ``console`` blocks
only lines starting with ``$ `` are commands). The ``--help`` texts of the ``bedside`` command (the
description and epilogue of every sub-command) are scripts too: each paragraph indented by four
spaces whose first word is a command. A command that sits outside such a block (an untagged fence,
an indented Markdown code block) fails :func:`stray_commands`: fence it as ``bash`` so that it is run.

A command is identified by its text (continuations joined, runs of spaces collapsed), never by file
or line: a block may move between files and keep its classification.

**How each runs** (:func:`classify`; the runner is :mod:`tests.docs_worker`):

- ``inspect eval`` / ``inspect eval-set``: *run* against loopback servers (one per address the
  command names; native API models such as ``openai/...`` are first checked as written, with a
  placeholder key, up to the model call (``--limit 0``), then run as ``openai-api/<provider>/...``
  against a loopback server standing in for the provider's API), with ``--limit 1`` (and
  ``--display none``) added when the command sets no limit; the test then checks, per log, that
  every call of every role (the model under test included) reached the address the command gave it;
- ``bedside ...`` / ``python -m bedside ...``: *run* in the block's folder, where the inputs the
  command names and no earlier command of its block wrote are stand-ins (:mod:`tests.docs_worker`);
- anything that cannot run here is listed in :data:`NOT_RUN` with the reason and how far it is
  checked instead; a command that can neither run nor is listed fails the test, and so does an entry
  of :data:`NOT_RUN` that matches no documented command.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: fence languages whose blocks are commands to copy
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "zsh", "console"})
#: first words of a command (what makes a line outside a shell block a stray command)
PROGRAMS = ("inspect", "bedside", "python", "python3", "make", "vllm", "pip", ".venv/bin/")
#: folders never searched for Markdown (hidden ones are skipped too)
SKIPPED_DIRS = frozenset({"logs", "build", "dist", "node_modules", "__pycache__"})

#: providers whose models run in the eval's own process (no address)
IN_PROCESS = frozenset({"bedside", "mockllm", "none", "hf"})
#: providers that talk to a server whose address the command (or the environment) gives
SERVED = frozenset({"openai-api", "vllm"})


# --- where commands are written ----------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """One script: a shell block of a Markdown file, or a ``--help`` paragraph of ``bedside``."""

    source: str  # "README.md:39" or "bedside rescore --help" (for messages only)
    text: str
    console: bool = False


def markdown_files(root: Path = REPO) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS and not d.endswith(".egg-info")
        )
        found += [Path(folder, f) for f in sorted(files) if f.lower().endswith(".md")]
    return found


FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[^\s`]*)")


def fenced_blocks(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number of the opening fence, language, body) of every fenced code block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening["fence"], opening["lang"].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence[0] * len(fence)):
            body.append(lines[j][len(opening["indent"]) :] if lines[j].startswith(opening["indent"]) else lines[j])
            j += 1
        yield i + 1, lang, "\n".join(body)
        i = j + 1


def markdown_blocks(root: Path = REPO) -> list[Block]:
    blocks = []
    for path in markdown_files(root):
        name = path.relative_to(root).as_posix()
        for line, lang, body in fenced_blocks(path.read_text(encoding="utf-8")):
            if lang in SHELL_LANGUAGES:
                blocks.append(Block(f"{name}:{line}", body, console=lang == "console"))
    return blocks


def help_texts() -> list[tuple[str, str]]:
    """(``bedside <command> --help``, its description and epilogue) of the command and every sub-command."""
    import argparse

    from bedside.cli import parser

    found = []

    def walk(p: argparse.ArgumentParser) -> None:
        found.append((f"{p.prog} --help", "\n\n".join(t for t in (p.description, p.epilog) if t)))
        for action in p._actions:  # argparse has no public accessor for sub-parsers
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                    walk(sub)

    walk(parser())
    return found


def help_blocks() -> list[Block]:
    """Each paragraph of a ``--help`` text that is indented by four or more spaces and starts with a
    command (the way the docstrings show commands), dedented."""
    blocks = []
    for name, text in help_texts():
        paragraph: list[str] = []
        for line in [*text.splitlines(), ""]:
            if line.startswith("    ") and (paragraph or _starts_with_program(line.strip())):
                paragraph.append(line[4:])
                continue
            if paragraph:
                blocks.append(Block(name, "\n".join(paragraph)))
                paragraph = []
    unique: dict[str, Block] = {}
    for block in blocks:  # sub-commands that share a docstring show it twice
        unique.setdefault(block.text, block)
    return list(unique.values())


def _starts_with_program(line: str) -> bool:
    while ASSIGNMENT.match(line) and " " in line:  # VLLM_BASE_URL=... inspect eval ...
        line = line.split(" ", 1)[1].lstrip()
    return any(line == p or line.startswith(p if p.endswith("/") else p + " ") for p in PROGRAMS)


def stray_commands(root: Path = REPO) -> list[str]:
    """Commands written outside a shell block (an untagged fence, an indented Markdown code block):
    ``file:line: text``. The docs must fence them as ``bash`` (then they are run) or, for a listing that
    is not to be copied, tag the fence with its own language (``text``)."""
    found = []
    for path in markdown_files(root):
        name = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        inside = set()
        for line, lang, body in fenced_blocks(text):
            inside.update(range(line, line + body.count("\n") + 2))
            if lang == "":
                found += [
                    f"{name}:{line + 1 + i}: {b.strip()}"
                    for i, b in enumerate(body.splitlines())
                    if _starts_with_program(b.strip())
                ]
        for number, raw in enumerate(text.splitlines(), start=1):
            if number not in inside and raw.startswith("    ") and _starts_with_program(raw.strip()):
                found.append(f"{name}:{number}: {raw.strip()}")
    return found


# --- reading a block as a shell would -----------------------------------------------------------
@dataclass
class Command:
    """One documented command: its words after the block's variables are expanded, the environment
    the block and its prefix give it, and where it was written."""

    source: str
    text: str  # as written, continuations joined and spaces collapsed: its identity
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # exported by the block or given as a prefix
    block: int = 0  # index of its block in documented_commands()' order
    position: int = 0  # its place in the block

    @property
    def program(self) -> str:
        """``inspect eval``, ``bedside report``, ``make``, ``vllm serve``, ... (``.venv/bin/`` dropped)."""
        words = [w.removeprefix(".venv/bin/") for w in self.argv[:2]]
        if words[:1] in (["python"], ["python3"]) and self.argv[1:3] == ["-m", "bedside"]:
            return "bedside " + (self.argv[3] if len(self.argv) > 3 else "")
        return " ".join(words)


class BlockError(ValueError):
    """A block the shell reader cannot follow (an operator it does not support, an unset variable)."""


ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
VARIABLE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<name>[A-Za-z_][A-Za-z0-9_]*))")
UNSUPPORTED = ("|", ">", "<", ">>", "&", "||", "(", ")", "`", "$(")


def logical_lines(text: str, console: bool = False) -> list[str]:
    """The block's lines with ``\\`` continuations joined; comment lines and (``console``) output dropped."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if console and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if not pending and line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return [line for line in lines if line.strip()]


def expand(line: str, variables: dict[str, str]) -> str:
    """``$NAME`` / ``${NAME}`` replaced outside single quotes (comments untouched)."""
    out, quote, i = [], None, 0
    while i < len(line):
        c = line[i]
        if quote != '"' and c == "'":
            quote = None if quote == "'" else "'"
        elif quote != "'" and c == '"':
            quote = None if quote == '"' else '"'
        elif quote is None and c == "#" and (i == 0 or line[i - 1].isspace()):
            out.append(line[i:])
            break
        elif quote != "'" and c == "$":
            match = VARIABLE.match(line, i)
            if match:
                name = match["braced"] or match["name"]
                if name not in variables:
                    raise BlockError(f"${name} is not set by the block")
                out.append(variables[name])
                i = match.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def split_words(line: str) -> list[list[str]]:
    """The commands of one logical line (separated by ``&&`` or ``;``), as words."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word in ("&&", ";"):
            commands.append([])
        elif word in UNSUPPORTED or word.startswith("$("):
            raise BlockError(f"shell operator {word!r} in {line!r}: write one command per line")
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def read_block(block: Block, index: int = 0) -> list[Command]:
    """The commands of ``block``, in order, with their variables and environment."""
    variables: dict[str, str] = {}
    exported: dict[str, str] = {}
    commands: list[Command] = []
    for line in logical_lines(block.text, block.console):
        for words in split_words(expand(line, variables)):
            text = shlex.join(words)
            if words[0] == "export":
                for word in words[1:]:
                    name, sep, value = word.partition("=")
                    if sep:
                        variables[name] = exported[name] = value
                    elif name in variables:
                        exported[name] = variables[name]
                continue
            prefix = {}
            while words and ASSIGNMENT.match(words[0]):
                name, _, value = words.pop(0).partition("=")
                prefix[name] = value
            if not words:  # NAME=value alone: a shell variable for the lines after it
                variables.update(prefix)
                continue
            commands.append(
                Command(
                    source=block.source,
                    text=re.sub(r"\s+", " ", text),
                    argv=words,
                    env={**exported, **prefix},
                    block=index,
                    position=len(commands),
                )
            )
    return commands


def blocks(root: Path = REPO) -> list[Block]:
    """The scripts of the Markdown files under ``root`` (and, for the repository, of ``bedside --help``)."""
    return markdown_blocks(root) + (help_blocks() if root == REPO else [])


def documented_commands(root: Path = REPO) -> list[Command]:
    """Every documented command, in order (a block the reader cannot follow: :func:`unreadable_blocks`)."""
    found = []
    for index, block in enumerate(blocks(root)):
        try:
            found += read_block(block, index)
        except BlockError:
            continue
    return found


def unreadable_blocks(root: Path = REPO) -> list[str]:
    """``source: why`` of every block :func:`read_block` cannot follow."""
    found = []
    for block in blocks(root):
        try:
            read_block(block)
        except BlockError as error:
            found.append(f"{block.source}: {error}")
    return found


# --- what cannot run here ------------------------------------------------------------------------
@dataclass(frozen=True)
class NotRun:
    """Documented commands (``pattern``: a regular expression searched in the command's text) that
    the tests do not run, why, and how far they are checked instead (``check``: ``"none"``;
    ``"target"``: the Makefile defines the target (``make -n`` would run it: a recipe line that calls
    ``$(MAKE)`` runs even then); ``"parsed"``: Inspect's own command-line parser)."""

    pattern: str
    check: str
    reason: str

    def matches(self, command: Command) -> bool:
        return re.search(self.pattern, command.text) is not None


NOT_RUN: tuple[NotRun, ...] = (
    NotRun(
        r"^vllm serve ",
        "none",
        "starts a vLLM server: needs a GPU and vLLM (not installed here); the eval commands that use "
        "such a server run against a loopback server at the same address",
    ),
    NotRun(
        r"^make (test|test-fast)$",
        "target",
        "the test suite itself (CI runs it: .ci/run)",
    ),
    NotRun(
        r"^make (demo|test-local|local)$",
        "target",
        "builds llama.cpp from source (about 6.5 min) and runs a real model; .ci/run runs make test-local, "
        "which covers the demo's model path",
    ),
    NotRun(
        r"^inspect eval .*bedside/human",
        "parsed",
        "waits for a person to type each reply in a browser; tests/human/ runs such evals with headless "
        "Chromium typing the replies; parsed by Inspect's own command-line parser",
    ),
    NotRun(
        r"^bedside rescore .*--simulator-checker bedside/human",
        "none",
        "waits for a person to rate each patient turn in a browser; tests/human/test_browser.py runs the same "
        "command with headless Chromium rating the turns",
    ),
    NotRun(
        r"^bedside agreement .*--people ",
        "none",
        "reads people's realism ratings, which only a person in the browser writes (the command above); "
        "tests/human/test_browser.py runs it on the ratings headless Chromium typed, "
        "tests/reporting/test_simulator_agreement.py on written ones",
    ),
    NotRun(
        r"^inspect eval-retry ",
        "none",
        "resumes a run a person's eval stopped in (bedside/human): tests/human/test_browser.py kills such a "
        "run and resumes it with the eval-retry command its page shows",
    ),
    NotRun(
        r"^inspect score ",
        "parsed",
        "re-judges a log the reader names (LOG.eval); tests/test_batch_judges.py runs the same step, Inspect's "
        "score() with the log's own scorers and the grader in batch mode, against the loopback Batch API; "
        "parsed by Inspect's own command-line parser",
    ),
    NotRun(
        r"^bedside scale ",
        "none",
        "runs a whole evaluation on Ray workers against real model APIs and a cluster; tests/scale runs the "
        "command against the loopback server on a local Ray instance, a two-node Ray cluster and moto's S3 server",
    ),
    NotRun(
        r"^ray start ",
        "none",
        "starts a Ray node that runs until stopped; tests/scale/test_ray.py starts a two-node Ray cluster on "
        "this machine with ray.cluster_utils",
    ),
    NotRun(
        r"^bedside report s3://",
        "none",
        "reads a bucket that needs credentials; tests/scale/test_s3.py runs bedside report on a run in moto's S3 server",
    ),
    NotRun(
        r"bench/scale_out\.py ",
        "none",
        "a benchmark of several minutes (bench/, not a test); its steps are the ones tests/scale checks",
    ),
    NotRun(
        r"^bedside study report ",
        "none",
        "reads the ratings that raters write (their templates filled in, or their journals of the rating page); "
        "tests/study/test_build.py and tests/study/test_benchmarks.py run it on templates filled in by the test, "
        "tests/study/test_page.py on the journals of raters in headless Chromium",
    ),
    NotRun(
        r"^bedside study serve ",
        "none",
        "serves the rating page until stopped, for raters in a browser; tests/study/test_page.py serves it, rates as "
        "two raters at once in headless Chromium, kills it and serves it again",
    ),
    NotRun(
        r"^bedside report .*--study ",
        "none",
        "reads a clinician study's ratings that raters write (their templates filled in); tests/study/test_report.py "
        "runs it on a study built from logs and templates filled in by the test",
    ),
    NotRun(
        r"^bedside study label-studio import ",
        "none",
        "reads Label Studio projects' JSON exports, which only Label Studio writes; tests/study/test_label_studio.py "
        "runs it on the export of a real Label Studio server the test starts",
    ),
    NotRun(
        r"^inspect view( |$)",
        "parsed",
        "starts Inspect's log viewer, a web server that runs until stopped; parsed by Inspect's own "
        "command-line parser",
    ),
)


def not_run(command: Command) -> NotRun | None:
    for entry in NOT_RUN:
        if entry.matches(command):
            return entry
    return None


# --- models and the addresses the command gives them ---------------------------------------------
def provider(model: str) -> str:
    return model.split("/", 1)[0]


def service_env(model: str, suffix: str) -> str | None:
    """``QWEN_BASE_URL`` for ``openai-api/qwen/...`` (``suffix`` ``BASE_URL`` or ``API_KEY``); the
    variable of a native provider (``OPENAI_API_KEY``) otherwise."""
    parts = model.split("/")
    if parts[0] == "openai-api" and len(parts) > 2:
        return f"{parts[1].upper().replace('-', '_')}_{suffix}"
    if parts[0] == "vllm":
        return f"VLLM_{suffix}"
    if parts[0] in IN_PROCESS:
        return None
    return f"{parts[0].upper().replace('-', '_')}_{suffix}"


def unrunnable_reason(command: Command) -> str | None:
    """Why ``command`` cannot run here (None: it can). Only programs the runner knows run; an eval's
    model that would need something absent here (Inspect starting ``vllm serve``) makes it unrunnable."""
    program = command.program
    if program.startswith("bedside"):
        return None
    if program in ("inspect eval", "inspect eval-set"):
        from tests.docs_worker import eval_models

        try:
            models = eval_models(command)
        except Exception as error:  # Inspect's parser, or YAML in a --model-role, rejects it
            return f"{type(error).__name__}: {error}"
        for model in models:
            if model.address is None and provider(model.name) == "vllm":
                return f"{model.name} has no server address (VLLM_BASE_URL or base_url): Inspect would start vllm serve"
        return None
    return f"the test does not know how to run `{program}`"


def classify(command: Command) -> str:
    """``"run"``, or the ``check`` of its :data:`NOT_RUN` entry, or ``"unlisted: <why it cannot run>"``."""
    entry = not_run(command)
    if entry is not None:
        return entry.check
    reason = unrunnable_reason(command)
    return "run" if reason is None else f"unlisted: {reason}"
