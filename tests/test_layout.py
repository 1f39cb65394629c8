"""The package layout's import rules, read from the source with ``ast`` (no import is executed):

- no solver imports a scorer and no scorer imports a solver, directly or through another bedside module
  (what both need, store models and shared records, lives in ``bedside/records/``);
- the orchestrator and the generic agent know no benchmark: they import nothing of ``bedside.protocols.<benchmark>``,
  ``bedside.solvers.<benchmark>`` or ``bedside.records.<benchmark>``.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import REPO

#: top-level folders of the design card that are subpackages of ``bedside`` (pyproject ``package-dir``)
MAPPED = {"solvers": "bedside.solvers", "scorers": "bedside.scorers", "tasks": "bedside.tasks"}
BENCHMARKS = ("discharge", "medsp", "cpb")


def module_files() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for root, package in (("bedside", "bedside"), *MAPPED.items()):
        for path in sorted((REPO / root).rglob("*.py")):
            parts = list(path.relative_to(REPO / root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join([package, *parts])] = path
    return files


FILES = module_files()


def canonical(name: str) -> str:
    head, _, rest = name.partition(".")
    return f"{MAPPED[head]}.{rest}" if head in MAPPED and rest else MAPPED.get(name, name)


def resolve(name: str) -> list[str]:
    """The bedside modules an import of ``name`` executes: the module (or the longest known prefix, for a
    name imported from a module) and every package above it."""
    name = canonical(name)
    while name and name not in FILES:
        name = name.rpartition(".")[0]
    if not name:
        return []
    parts = name.split(".")
    return [m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in FILES]


@cache
def direct_imports(module: str) -> frozenset[str]:
    path = FILES[module]
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.update(resolve(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            found.update(resolve(base))
            for alias in node.names:  # ``from package import submodule``
                if f"{canonical(base)}.{alias.name}" in FILES:
                    found.update(resolve(f"{base}.{alias.name}"))
    found.discard(module)
    return frozenset(found)


def reachable(module: str) -> dict[str, list[str]]:
    """Every bedside module ``module`` imports, directly or not, with one import chain to it."""
    chains: dict[str, list[str]] = {module: [module]}
    queue = [module]
    while queue:
        current = queue.pop()
        for nxt in direct_imports(current):
            if nxt not in chains:
                chains[nxt] = [*chains[current], nxt]
                queue.append(nxt)
    return chains


def test_the_scan_sees_the_imports():
    """The scanner itself: it finds known edges, so that the rules below cannot pass vacuously."""
    assert "bedside.solvers.orchestrator" in direct_imports("bedside.solvers.medsp.solver")
    assert "bedside.records.medsp.store" in reachable("bedside.scorers.medsp")
    assert "bedside.solvers.agent" in reachable("bedside.tasks.discharge")
    assert any(m.startswith("bedside.solvers.") for m in FILES) and any(m.startswith("bedside.scorers.") for m in FILES)


@pytest.mark.parametrize("module", sorted(m for m in FILES if m.startswith("bedside.solvers")))
def test_no_solver_imports_a_scorer(module):
    bad = {m: chain for m, chain in reachable(module).items() if m.startswith("bedside.scorers")}
    assert not bad, f"{module} imports scorers: {' -> '.join(next(iter(bad.values())))}"


@pytest.mark.parametrize("module", sorted(m for m in FILES if m.startswith("bedside.scorers")))
def test_no_scorer_imports_a_solver(module):
    bad = {m: chain for m, chain in reachable(module).items() if m.startswith("bedside.solvers")}
    assert not bad, f"{module} imports solvers: {' -> '.join(next(iter(bad.values())))}"


@pytest.mark.parametrize("module", ["bedside.solvers.orchestrator", "bedside.solvers.agent"])
def test_the_orchestrator_knows_no_benchmark(module):
    specific = tuple(f"bedside.{kind}.{b}" for kind in ("protocols", "solvers", "records") for b in BENCHMARKS)
    bad = {m: chain for m, chain in reachable(module).items() if m.startswith(specific)}
    assert not bad, f"{module} imports a benchmark's module: {' -> '.join(next(iter(bad.values())))}"


def test_every_package_folder_is_listed_for_the_wheel():
    """pyproject lists the packages explicitly (tasks/, solvers/ and scorers/ are remapped into bedside):
    a new sub-package missing from the list works in the editable install and is absent from a wheel."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, remap = set(setuptools["packages"]), setuptools["package-dir"]
    folders = {"bedside": root / "bedside", **{name: root / path for name, path in remap.items()}}
    found = {
        ".".join([name, *init.parent.relative_to(folder).parts])
        for name, folder in folders.items()
        for init in folder.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set(), (
        f"package folders missing from pyproject's [tool.setuptools] packages: {sorted(found - listed)}"
    )
