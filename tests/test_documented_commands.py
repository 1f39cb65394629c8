"""Every command the documentation tells a user to copy runs, or is listed with the reason it cannot.

The commands are found by content in every Markdown file and in the ``--help`` texts of ``bedside``
(:mod:`tests.docs_commands`) and run in one worker process (:mod:`tests.docs_worker`); a command added
to the docs later is picked up without touching this file. ``test_every_documented_command_runs`` also
runs a few wrong commands, to show that the runner fails them for the right reason.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from tests import forked
from tests.conftest import REPO
from tests.docs_commands import (
    NOT_RUN,
    Block,
    BlockError,
    classify,
    documented_commands,
    markdown_files,
    read_block,
    stray_commands,
    unreadable_blocks,
)


def commands_of(text: str, console: bool = False):
    return read_block(Block("test", textwrap.dedent(text), console=console))


# --- reading the blocks ---------------------------------------------------------------------------
def test_continuations_comments_prefixes_and_variables_are_read_as_a_shell_would():
    [first, second, third] = commands_of(
        """
        # a comment line, and a variable for the lines below
        NOTHINK='extra_body: {thinking: {type: disabled}}'
        export KEY=abc
        VLLM_BASE_URL=http://gpu-host:8001/v1 inspect eval tasks/discharge.py --model openai/gpt-5.5 \\
            --model-role "patient={model: openai-api/x/y, $NOTHINK}"   # a trailing comment
        .venv/bin/bedside report logs/ --out 'my report/' && bedside audit logs/run.eval
        """
    )
    assert first.argv == [
        "inspect",
        "eval",
        "tasks/discharge.py",
        "--model",
        "openai/gpt-5.5",
        "--model-role",
        "patient={model: openai-api/x/y, extra_body: {thinking: {type: disabled}}}",
    ]
    assert first.env == {"KEY": "abc", "VLLM_BASE_URL": "http://gpu-host:8001/v1"}
    assert first.program == "inspect eval" and first.text.startswith("VLLM_BASE_URL=http://gpu-host:8001/v1 inspect")
    assert second.argv[-2:] == ["--out", "my report/"] and second.program == "bedside report"
    assert third.argv == ["bedside", "audit", "logs/run.eval"] and third.env == {"KEY": "abc"}
    assert [c.position for c in (first, second, third)] == [0, 1, 2]


def test_console_blocks_keep_only_the_prompted_lines():
    [command] = commands_of("$ bedside strata logs/run.eval\nsome output\n$ # a comment\n", console=True)
    assert command.argv == ["bedside", "strata", "logs/run.eval"]


def test_python_m_bedside_is_the_bedside_command():
    [command] = commands_of("python -m bedside report logs/ --out report/")
    assert command.program == "bedside report"


@pytest.mark.parametrize("line", ["inspect eval x | tee out.txt", "bedside report logs/ > out", "echo $UNSET"])
def test_what_the_reader_cannot_follow_is_an_error(line):
    with pytest.raises(BlockError):
        commands_of(line)


def test_markdown_files_are_found_everywhere_but_hidden_folders_and_logs(tmp_path):
    for name in ("README.md", "docs/guide/run.md", "bedside/medsp/README.md", ".venv/x.md", "logs/y.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("```bash\nbedside audit logs/run.eval\n```\n")
    found = [p.relative_to(tmp_path).as_posix() for p in markdown_files(tmp_path)]
    assert sorted(found) == ["README.md", "bedside/medsp/README.md", "docs/guide/run.md"]
    assert [c.source for c in documented_commands(tmp_path)] == [
        "README.md:1",
        "bedside/medsp/README.md:1",
        "docs/guide/run.md:1",
    ]


def test_a_command_outside_a_shell_block_is_reported(tmp_path):
    (tmp_path / "README.md").write_text(
        "Run it:\n\n    inspect eval tasks/cpb.py@cpb --model M\n\n```\nbedside audit LOG\n```\n\n"
        "```text\nbedside/   the package\n```\n"
    )
    assert stray_commands(tmp_path) == [
        "README.md:6: bedside audit LOG",
        "README.md:3: inspect eval tasks/cpb.py@cpb --model M",
    ]


# --- the repository's docs ------------------------------------------------------------------------
@pytest.mark.eval
def test_every_documented_command_is_found_and_classified():
    commands = documented_commands()
    per_file = Counter(c.source.split(":")[0] for c in commands)
    assert len(commands) >= 40 and per_file["README.md"] >= 1, per_file  # wherever the pages put them
    assert {"bedside rescore --help", "bedside build-cases --help", "bedside annotate --help"} <= set(per_file)
    assert unreadable_blocks() == []
    assert stray_commands() == []
    unlisted = [f"{c.source}: {c.text}: {how}" for c in commands if (how := classify(c)).startswith("unlisted")]
    assert unlisted == [], "commands that cannot run here must be listed in NOT_RUN:\n" + "\n".join(unlisted)


def test_every_not_run_entry_matches_a_documented_command():
    commands = documented_commands()
    stale = [entry.pattern for entry in NOT_RUN if not any(entry.matches(c) for c in commands)]
    assert stale == []


@pytest.mark.eval
def test_a_command_that_cannot_run_and_is_not_listed_fails_classification():
    [command] = commands_of(
        "inspect eval tasks/cpb.py@cpb --model vllm/Qwen/Qwen3.5-9B -T data=/path/to/cpb-bench_data"
    )
    assert classify(command).startswith("unlisted: vllm/Qwen/Qwen3.5-9B has no server address")
    [command] = commands_of("docker run bedside")
    assert classify(command) == "unlisted: the test does not know how to run `docker run`"


# --- running them ---------------------------------------------------------------------------------
#: commands the runner must fail, each with (a part of) the reason
WRONG = {
    "Unknown GenerateConfig field(s): base_url": """
        export QWEN_API_KEY=none
        inspect eval tasks/cpb.py@cpb --model openai/gpt-5.5 -T data=/path/to/cpb-bench_data \\
            --model-role 'grader={model: openai-api/qwen/Qwen3.5-9B, base_url: http://gpu-host:8002/v1}'
        """,
    "Unknown model role for task cpb": """
        inspect eval tasks/cpb.py@cpb --model openai/gpt-5.5 --model-role judge=openai/gpt-4o \
            -T data=/path/to/cpb-bench_data
        """,
    # both roles name one vllm/ model: Inspect sends both to the server it resolved first
    "server gpu-host:80": """
        inspect eval tasks/cpb.py@cpb --model openai/gpt-5.5 -T data=/path/to/cpb-bench_data -T turns=2 \\
            --model-role 'grader={model: vllm/Qwen/Qwen3.5-9B, model_args: {base_url: http://gpu-host:8002/v1}}' \\
            --model-role 'patient={model: vllm/Qwen/Qwen3.5-9B, model_args: {base_url: http://gpu-host:8012/v1}}'
        """,
    "No QWEN_API_KEY defined in the environment": """
        QWEN_BASE_URL=http://gpu-host:8002/v1 inspect eval tasks/cpb.py@cpb --model openai-api/qwen/Qwen3.5-9B \\
            --model-role grader=openai/gpt-4o -T data=/path/to/cpb-bench_data
        """,
    "no stand-in for /path/to/cases.jsonl": """
        inspect eval tasks/discharge.py --model bedside/scripted -T data=/path/to/cases.jsonl
        """,
    "is not listed in NOT_RUN": """
        inspect eval tasks/cpb.py@cpb --model vllm/Qwen/Qwen3.5-9B -T data=/path/to/cpb-bench_data
        """,
}


#: the documented commands run in this many worker processes side by side (one test each)
SHARDS = 2


@pytest.mark.eval
@pytest.mark.long
@pytest.mark.parametrize("k", range(SHARDS))
def test_every_documented_command_runs(tmp_path, k):
    """Share ``k`` of the documented commands (whole blocks, :func:`tests.docs_worker.shard`); the first
    share also runs the wrong commands, which the runner must fail for the stated reason."""
    from tests.docs_worker import shard

    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "README.md").write_text(
        "".join(f"```bash\n# {reason}\n{textwrap.dedent(block).strip()}\n```\n\n" for reason, block in WRONG.items())
    )
    out = tmp_path / "results.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "COLUMNS": "200"}
    command = [sys.executable, "-m", "tests.docs_worker", "--out", str(out), "--docs", str(REPO)]
    command += ["--shard", f"{k}/{SHARDS}"] + (["--extra", str(wrong)] if k == 0 else [])
    done = forked.run(command, cwd=REPO, env=env, timeout=900)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    docs = [r for r in results if Path(r["docs"]) == REPO]
    mine = [r for r in results if Path(r["docs"]) == wrong.resolve()]

    failed = [f"{r['source']}: {r['text']}\n    {r['detail']}\n    {r['checks']}" for r in docs if not r["ok"]]
    assert failed == [], "documented commands that do not run:\n" + "\n".join(failed)
    assert [r["source"] for r in docs] == [c.source for c in shard(documented_commands(), k, SHARDS)]
    assert docs, "a share with no command: lower SHARDS"

    assert len(mine) == (len(WRONG) if k == 0 else 0)
    for (reason, _), result in zip(WRONG.items(), mine):
        assert not result["ok"] and reason in result["detail"], (reason, result)


@pytest.mark.eval
def test_the_shares_together_are_every_documented_command():
    from tests.docs_worker import shard

    commands = documented_commands()
    shares = [shard(commands, k, SHARDS) for k in range(SHARDS)]
    assert sorted(c.source for share in shares for c in share) == sorted(c.source for c in commands)
    assert {"run", "parsed", "target", "none"} <= {classify(c).split(" ")[0] for c in commands}  # every way
    blocks = Counter(c.block for c in commands)
    assert all(
        {c.block for c in share} & {c.block for c in other} == set()
        for share in shares
        for other in shares
        if other is not share
    )
    sizes = [len(share) for share in shares]
    assert min(sizes) > 0 and max(sizes) - min(sizes) <= max(blocks.values())  # balanced up to one block
