"""Inspect's private modules (``inspect_ai.*._*``) are imported in one place per side: ``bedside/compat.py``
for bedside, ``tests/compat.py`` for what only the tests use."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from tests.conftest import REPO

COMPAT = "bedside/compat.py"
TESTS_COMPAT = "tests/compat.py"


def private_inspect_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a private Inspect module in ``source``: any dotted part
    after ``inspect_ai`` that starts with an underscore, at module level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            first, *rest = module.split(".")
            if first == "inspect_ai" and any(part.startswith("_") for part in rest):
                found.append((node.lineno, module))
    return found


def python_files() -> list[str]:
    """Every Python file of the repository, skipping hidden folders (.venv, .git), caches and the
    git-ignored outputs (logs/, build/, dist/, *.egg-info)."""
    skip = {"__pycache__", "logs", "build", "dist"}
    found = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in skip and not d.endswith(".egg-info")]
        found += [Path(root, f).relative_to(REPO).as_posix() for f in files if f.endswith(".py")]
    return sorted(found)


def test_the_scan_finds_private_imports_in_every_form():
    source = (
        "import inspect_ai.model._cache\n"
        "from inspect_ai._util.error import PrerequisiteError\n"
        "def f():\n"
        "    from inspect_ai.solver._task_state import sample_state\n"
        "from inspect_ai.model import get_model\n"  # public: not reported
        "from inspect_ai import eval\n"
        "from . import _private\n"  # relative: not Inspect
    )
    assert private_inspect_imports(source) == [
        (1, "inspect_ai.model._cache"),
        (2, "inspect_ai._util.error"),
        (4, "inspect_ai.solver._task_state"),
    ]


def test_private_inspect_imports_live_only_in_the_compat_modules():
    files = python_files()
    assert COMPAT in files and TESTS_COMPAT in files and len(files) > 100
    offenders = [
        f"{path}:{line}: {module}"
        for path in files
        if path not in (COMPAT, TESTS_COMPAT)
        for line, module in private_inspect_imports(Path(REPO, path).read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "import these through bedside.compat (or, for what only the tests use, tests.compat), adding the name "
        "there with who uses it and why:\n" + "\n".join(offenders)
    )
    for path in (COMPAT, TESTS_COMPAT):
        assert private_inspect_imports(Path(REPO, path).read_text(encoding="utf-8")), f"{path} imports nothing private"


def test_bedside_compat_holds_no_name_that_only_the_tests_use():
    """A name of ``bedside.compat`` is for bedside: the product uses each one (what only the tests need
    belongs in ``tests/compat.py``, which the product never imports)."""
    import bedside.compat

    product = [p for p in python_files() if not p.startswith(("tests/", "bench/")) and p != COMPAT]
    sources = "\n".join(Path(REPO, p).read_text(encoding="utf-8") for p in product)
    unused = [name for name in bedside.compat.__all__ if not re.search(rf"\b{name}\b", sources)]
    assert not unused, f"bedside.compat names that no bedside module uses: {unused} (move them to tests/compat.py)"
