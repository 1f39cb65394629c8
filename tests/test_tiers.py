"""The two tiers' marks (tests/conftest.py): a test that starts an Inspect eval or a command (``inspect``,
``bedside``, ``python -m``, in a process of its own) and is not marked ``eval`` fails, saying how to mark
it; a marked one, or one that starts neither, passes; a tier that selects no test fails. Each case runs
in a pytest session of its own (pytester, in this process) whose conftest is the suite's tier hooks."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.eval  # the sessions below start evals and commands

CONFTEST = """
from tests.conftest import pytest_collection_modifyitems, pytest_runtest_makereport, pytest_runtest_protocol
"""

TESTS = """
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample


def test_quiet():
    assert sum([1, 2]) == 3


def test_unmarked_command():
    subprocess.run([sys.executable, "-m", "this"], check=True, capture_output=True)


@pytest.mark.eval
def test_marked_command():
    subprocess.run([sys.executable, "-m", "this"], check=True, capture_output=True)


def test_unmarked_probe_and_other_program():
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # a few lines of Python, not a command
    subprocess.run(["git", "--version"], check=True, capture_output=True)


def test_unmarked_eval(tmp_path):
    [log] = eval(Task(dataset=[Sample(input="hello")]), model="bedside/scripted", log_dir=str(tmp_path), display="none")
    assert log.status == "success"


@pytest.fixture
def a_command():
    subprocess.run([str(Path(sys.executable).with_name("inspect")), "--version"], check=True, capture_output=True)


def test_unmarked_with_a_fixture_that_starts_a_command(a_command):
    pass


def test_unmarked_that_fails_anyway():
    subprocess.run([sys.executable, "-m", "this"], check=True, capture_output=True)
    assert False, "its own failure"
"""


@pytest.fixture
def session(pytester):
    pytester.makeini("[pytest]\nmarkers =\n    eval: runs an Inspect eval or starts a process\n")
    pytester.makeconftest(CONFTEST)
    return pytester


def test_an_unmarked_test_that_starts_an_eval_or_a_command_fails_and_says_to_mark_it(session):
    session.makepyfile(test_cases=TESTS)
    result = session.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    outcomes = {
        r.nodeid.split("::")[1]: r.outcome
        for r in result.reprec.getreports("pytest_runtest_logreport")
        if r.when == "call"
    }
    assert outcomes == {
        "test_quiet": "passed",
        "test_unmarked_command": "failed",
        "test_marked_command": "passed",
        "test_unmarked_probe_and_other_program": "passed",
        "test_unmarked_eval": "failed",
        "test_unmarked_with_a_fixture_that_starts_a_command": "failed",
        "test_unmarked_that_fails_anyway": "failed",
    }
    text = result.stdout.str()
    assert "test_unmarked_command started 0 Inspect eval(s) and 1 command(s) but is not marked `eval`" in text
    assert "test_unmarked_eval started 1 Inspect eval(s) and 0 command(s)" in text
    assert "add @pytest.mark.eval" in text and "pytestmark = pytest.mark.eval" in text
    assert "its own failure" in text  # a test that failed on its own keeps its own report


def test_a_module_mark_marks_every_test_of_the_module(session):
    session.makepyfile(
        test_cases="import pytest\n\npytestmark = pytest.mark.eval\n" + TESTS.replace("import pytest\n", "")
    )
    result = session.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=6, failed=1)  # all but the one that fails on its own
    assert "not marked" not in result.stdout.str()


def test_the_eval_tests_run_first(session):
    session.makepyfile(
        test_order="import pytest\n\ndef test_a():\n    pass\n\n@pytest.mark.eval\ndef test_b():\n    pass\n"
    )
    result = session.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "--collect-only", "-q")
    assert [line for line in result.stdout.lines if "::" in line] == ["test_order.py::test_b", "test_order.py::test_a"]


def test_the_long_tests_run_before_the_other_eval_tests(session):
    session.makepyfile(
        test_order="import pytest\n\ndef test_a():\n    pass\n\n@pytest.mark.eval\ndef test_b():\n    pass\n\n"
        "@pytest.mark.eval\n@pytest.mark.long\ndef test_c():\n    pass\n"
    )
    result = session.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "--collect-only", "-q")
    assert [line.split("::")[1] for line in result.stdout.lines if "::" in line] == ["test_c", "test_b", "test_a"]


class Item:
    """A collected test as :func:`tests.conftest.dealt` sees it: its name and marks."""

    def __init__(self, name: str, *marks: str) -> None:
        self.name, self.marks = name, marks

    def get_closest_marker(self, mark: str) -> object:
        return mark if mark in self.marks else None

    def __repr__(self) -> str:
        return self.name


def test_the_long_tests_are_dealt_to_the_workers_in_turn():
    from tests.conftest import dealt

    items = [Item(f"L{i}", "eval", "long") for i in range(3)] + [Item(f"E{i}", "eval") for i in range(3)]
    items += [Item(f"U{i}") for i in range(5)]
    # pytest-xdist's worksteal scheduler sends the first 11 // 2 = 5 to one worker, the other 6 to the other
    order = [i.name for i in dealt(items, 2)]
    assert (order[:5], order[5:]) == (["L0", "L2", "E0", "E1", "E2"], ["L1", "U0", "U1", "U2", "U3", "U4"])
    order = [i.name for i in dealt(items, 3)]  # parts of 3, 4, 4
    assert (order[:3], order[3:7], order[7:]) == (["L0", "E0", "E1"], ["L1", "E2", "U0", "U1"], ["L2", "U2", "U3", "U4"])
    assert dealt(items, 1) == items


def test_a_tier_that_selects_no_test_fails(session):
    session.makepyfile(test_all_eval="import pytest\n\npytestmark = pytest.mark.eval\n\ndef test_a():\n    pass\n")
    result = session.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-m", "not eval")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED  # make test-fast exits non-zero
