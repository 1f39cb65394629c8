"""Shared test helpers: scripted models, running a task offline, reading what a sample produced."""

from __future__ import annotations

import contextlib
import functools
import io
import locale
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task, eval
from inspect_ai.hooks import Hooks, RunStart, hooks
from inspect_ai.log import EvalLog, EvalSample, read_eval_log
from inspect_ai.model import Model, get_model

from tests import forked

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

pytest_plugins = ["pytester"]  # pytest sessions inside a test (tests/test_tiers.py)


def pytest_configure(config: pytest.Config) -> None:
    # the tests read and write UTF-8 files (the data, prompts, README, reports) in the locale's
    # encoding and read the CLIs' output the same way: under a non-UTF-8 locale they would fail by
    # the dozen with UnicodeDecodeError, so say so once (`make test` sets PYTHONUTF8=1)
    if not sys.flags.utf8_mode and locale.getpreferredencoding(False).lower().replace("-", "") != "utf8":
        raise pytest.UsageError(
            f"the locale's encoding is {locale.getpreferredencoding(False)}, not UTF-8: run the tests in Python's "
            "UTF-8 mode (PYTHONUTF8=1, as `make test` does) or under a UTF-8 locale"
        )


# --- the two tiers: `make test` runs everything, `make test-fast` the tests not marked `eval` ------
# A test that runs an Inspect eval, or a command in a process of its own, is marked so:
# @pytest.mark.eval on the test, or `pytestmark = pytest.mark.eval` in a module whose every test does
# (docs/testing.md). The marks are checked as the tests run: a test that started an eval or a command
# (counted from the start of its set-up to the end of its call) and is not marked fails and says so,
# so the unit tier cannot silently grow slow.
class Started:
    """What this test process has started so far: Inspect evals, and commands in processes of their own."""

    evals = 0
    commands = 0


@hooks(name="bedside_test_eval_counter", description="counts the Inspect evals started in this test process")
class EvalCounter(Hooks):
    async def on_run_start(self, data: RunStart) -> None:
        Started.evals += 1


def is_command(args: Any) -> bool:
    """Whether a process of ``args`` is a command of this venv: a console script of its ``bin/``
    (``inspect``, ``bedside``), or its Python running a module or a file (``python -m ...``); not
    ``python -c`` (a probe of a few lines) nor another program (``git``)."""
    argv = [str(a) for a in ([args] if isinstance(args, (str, bytes, os.PathLike)) else args)]
    if not argv:
        return False
    program = Path(shutil.which(argv[0]) or argv[0]).absolute()
    if program.resolve() == Path(sys.executable).resolve():
        return argv[1:2] != ["-c"]
    return program.parent == Path(sys.executable).absolute().parent


def _counting(init: Any, command: Callable[[Any], bool]) -> Any:
    @functools.wraps(init)
    def counted(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        Started.commands += command(args)
        init(self, args, *rest, **kwargs)

    return counted


# every command a test starts: through subprocess (run, Popen, check_output, ...), or forked from the
# warm server (tests/forked.py: each is one)
subprocess.Popen.__init__ = _counting(subprocess.Popen.__init__, is_command)  # type: ignore[method-assign]
forked.Forked.__init__ = _counting(forked.Forked.__init__, lambda server: True)  # type: ignore[method-assign]


def unmarked_starts(item: pytest.Item, evals: int, commands: int) -> str | None:
    """Why ``item`` fails although it passed: it started evals or commands and is not marked ``eval``."""
    if item.get_closest_marker("eval") is not None or not (evals or commands):
        return None
    return (
        f"{item.nodeid} started {evals} Inspect eval(s) and {commands} command(s) but is not marked `eval`, "
        "so `make test-fast` would run it: add @pytest.mark.eval (or, when every test of the module does, "
        "pytestmark = pytest.mark.eval; docs/testing.md)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the `long` tests first, then the other `eval` tests (in file order), the quick unit tests after
    # them: with pytest-xdist the workers end on quick tests, not one of them on a long eval while the
    # other waits; and the `long` tests are dealt to the workers in turn
    items.sort(key=lambda item: (item.get_closest_marker("long") is None, item.get_closest_marker("eval") is None))
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = dealt(items, workers)


def dealt(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` (sorted: the ``long`` tests first) in the order that gives each of ``workers`` pytest-xdist
    workers its share of the ``long`` tests at the start of its queue. Its scheduler (``--dist worksteal``)
    sends each worker a contiguous part of the list (the first ``len // workers`` to the first, then of the
    rest likewise), so each part here is one worker's ``long`` tests in turn, then the others in their order."""
    long = [item for item in items if item.get_closest_marker("long") is not None]
    rest = items[len(long) :]
    out: list[pytest.Item] = []
    start, left = 0, len(items)
    for worker in range(workers):
        size = left // (workers - worker)
        mine = long[worker::workers]
        others = max(0, size - len(mine))
        out += mine + rest[start : start + others]
        start += others
        left -= size
    return out + rest[start:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    item.stash[_STARTED_BEFORE] = (Started.evals, Started.commands)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    evals, commands = item.stash.get(_STARTED_BEFORE, (Started.evals, Started.commands))
    failure = unmarked_starts(item, Started.evals - evals, Started.commands - commands)
    if failure is not None:
        report.outcome = "failed"
        report.longrepr = failure


_STARTED_BEFORE = pytest.StashKey[tuple[int, int]]()


# --- what every test process shares ------------------------------------------------------------
@pytest.fixture(scope="session", autouse=True)
def _inspect_cache_of_this_session(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Inspect's model cache (DischargeBench caches its note-side judge calls) in this session's
    temporary folder, not in ``$HOME/.cache/inspect_ai``: no test reads a reply cached by an earlier
    session, another checkout or an older scripted model. Subprocesses inherit it; a test that needs
    its own cache sets ``INSPECT_CACHE_DIR`` again."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INSPECT_CACHE_DIR", str(tmp_path_factory.mktemp("inspect-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _a_quiet_console_lays_out_nothing() -> Any:
    """``display="none"`` makes Inspect's rich console quiet, yet rich still lays out every table its
    live display refreshes and then discards it (about 0.15 s CPU per eval). A quiet console's
    ``print`` writes and records nothing, so returning at once changes no output: the tests' evals
    skip the layout."""
    from rich.console import Console

    print_ = Console.print

    def print_unless_quiet(self: Console, *objects: Any, **options: Any) -> None:
        if not self.quiet:
            print_(self, *objects, **options)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Console, "print", print_unless_quiet)
        yield


@pytest.fixture(scope="session", autouse=True)
def _each_text_embedded_once() -> Any:
    """The scripted runs of many tests score the same judge answers: each distinct text given to
    :func:`bedside.scorers.discharge.text_metrics.embed` is embedded once per test process and its
    vector re-used (a vector depends on the texts padded beside it only in its last digits, ~1e-7,
    within the golden check's tolerance). The first call still loads the model and computes;
    subprocesses compute as always."""
    import numpy as np

    from bedside.scorers.discharge import text_metrics

    compute = text_metrics.embed
    done: dict[str, Any] = {}

    def embed(texts: list[str]) -> Any:
        if missing := [text for text in dict.fromkeys(texts) if text not in done]:
            done.update(zip(missing, compute(missing)))
        return np.stack([done[text] for text in texts])

    embed.__wrapped__ = compute  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text_metrics, "embed", embed)
        yield


def scripted(**options: Any) -> Model:
    """A fresh ``bedside/scripted`` model with behaviour options (not memoized across options)."""
    return get_model("bedside/scripted", memoize=False, **options)


def whole_log_reads_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inspect's ``read_eval_log`` fails when asked for a log whole, as ``inspect_ai.log`` offers it and in
    bedside's log readers (:mod:`bedside.reporting.load`, ``.run`` and ``.rescore``); a header is read as before."""
    import inspect_ai.log

    import bedside.reporting.load
    import bedside.reporting.rescore
    import bedside.reporting.run

    def header_only(read: Any) -> Any:
        def reader(location: Any, *args: Any, **kwargs: Any) -> Any:
            assert kwargs.get("header_only"), f"{location} read whole"
            return read(location, *args, **kwargs)

        return reader

    for module in (inspect_ai.log, bedside.reporting.load, bedside.reporting.rescore, bedside.reporting.run):
        monkeypatch.setattr(module, "read_eval_log", header_only(module.read_eval_log))


def run(
    task: Task,
    *,
    educator: Model | None = None,
    roles: dict[str, Model] | None = None,
    log_dir: Path,
    **eval_args: Any,
) -> EvalLog:
    """Run ``task`` with scripted models for every role unless given (``roles={}``: none bound)."""
    model_roles = {"patient": scripted(), "monitor": scripted()} if roles is None else roles
    [log] = eval(
        task,
        model=educator or scripted(),
        model_roles=model_roles or None,
        log_dir=str(log_dir),
        display="none",
        **{"log_realtime": False, **eval_args},  # no live sample buffer: the tests read the log
    )
    assert log.status == "success", log.error
    return read_eval_log(log.location, resolve_attachments=True)


@dataclass
class Command:
    """What a command run in this process gave: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def bedside_command(*args: str) -> Command:
    """``bedside ARGS`` in this process: :func:`bedside.cli.main`, which ``python -m bedside`` and the
    ``bedside`` script run (for tests whose point is the command, not a fresh process: one costs
    seconds of imports). The exit code is main's return value or its ``SystemExit`` (argparse's
    usage errors)."""
    from bedside.cli import main as bedside_main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = bedside_main(list(args))
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    return Command(code, out.getvalue(), err.getvalue())


def store(sample: EvalSample) -> dict[str, Any]:
    """The ``EncounterStore`` fields of a sample, without the class prefix."""
    prefix = "EncounterStore:"
    return {k[len(prefix) :]: v for k, v in sample.store.items() if k.startswith(prefix)}


def model_inputs(sample: EvalSample, role: str | None) -> list[list[Any]]:
    """The input messages of every model call made by ``role`` (None = the model under test)."""
    return [e.input for e in sample.events if e.event == "model" and e.role == role]


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: this test reads other projects' data from ../shared (not shipped with bedside)")
    return path


def metrics_of(log: EvalLog, name: str, scorer: str | None = None) -> dict[str, float]:
    """Inspect's summary numbers of one score key (:mod:`bedside.scorers.metrics`): ``mean``,
    ``ci_lower`` / ``ci_upper`` (NaN when the block shows no interval) and ``n`` from the key's
    headline block; or ``total`` (a count) / ``mean`` from the ``health`` block."""
    from bedside import benchmarks

    row = benchmarks.score_key(name).label
    for s in log.results.scores:
        if scorer is not None and s.scorer != scorer:
            continue
        values = {k: m.value for k, m in s.metrics.items()}
        if s.name == "health" and scorer != "health" or s.scorer == "health":
            if name in values:
                return {"total": values[name]}
            if f"{name} (mean)" in values:
                return {"mean": values[f"{name} (mean)"]}
            continue
        if row in values:
            return {
                "mean": values[row],
                "ci_lower": values.get(f"{row} lower", float("nan")),
                "ci_upper": values.get(f"{row} upper", float("nan")),
                "n": values.get(f"{row} n", values.get("n")),
            }
    raise KeyError(name)
