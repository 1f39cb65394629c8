"""The two tiers of ``make test`` (tests/conftest.py): a test is marked ``eval`` when it, a fixture it
requests or a function of tests/ it calls mentions a runner; ``make test-fast`` runs the rest."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from tests.conftest import REPO, eval_functions


def autouse_fixtures_of_conftests() -> list[str]:
    """The autouse fixtures of every conftest.py under tests/: each test of their folders requests them."""
    found = []
    for path in (REPO / "tests").rglob("conftest.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call)
                and any(k.arg == "autouse" and getattr(k.value, "value", None) is True for k in d.keywords)
                for d in node.decorator_list
            ):
                found.append(node.name)
    return found


def test_no_autouse_fixture_of_a_conftest_counts_as_an_eval():
    """One would mark every test of its folders `eval` and leave `make test-fast` with nothing to run."""
    fixtures = autouse_fixtures_of_conftests()
    assert "_each_embedding_batch_once" in fixtures  # the finder sees them
    assert [f for f in fixtures if f in eval_functions()] == []


def test_a_variable_named_like_an_eval_helper_is_not_that_helper(tmp_path):
    (tmp_path / "helpers.py").write_text(
        textwrap.dedent(
            """
            def key(page):
                return page.run_eval_in_browser(eval("1"))


            def helper_by_attribute(forked):
                return forked.subprocess
            """
        )
    )
    (tmp_path / "test_x.py").write_text(
        textwrap.dedent(
            """
            def test_a_local_key():
                key = ("a", "b")
                return {key: 1}[key]


            def test_calls_key(page):
                return key(page)


            def test_requests_a_fixture_named_key(key):
                return key
            """
        )
    )
    found = eval_functions(Path(tmp_path))
    assert "key" in found and "helper_by_attribute" in found
    assert "test_calls_key" in found and "test_requests_a_fixture_named_key" in found
    assert "test_a_local_key" not in found
