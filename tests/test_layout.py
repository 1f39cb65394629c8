"""The package layout's rules, read from the source with ``ast`` (no import is executed):

- the library (``bedside/``, each benchmark's ``bedside/<b>/`` too) imports nothing of ``tasks/``, ``solvers/`` or
  ``scorers/``, not even inside a function;
- an import of a bedside module inside a function is one of :data:`FUNCTION_IMPORTS`, each with the start-up
  cost it spares (every other import stands at the top of its module, where a reader sees it);
- no solver imports a scorer and no scorer imports a solver, directly or through another bedside module
  (what both need, store models and records, lives in ``bedside/`` and ``bedside/<benchmark>/``);
- a benchmark's code imports nothing of another benchmark and reads none of its prompts or data;
- the orchestrator and the generic agent know no benchmark: they import nothing of a registered
  benchmark's folders (``bedside/<b>/``, ``solvers/<b>/``, ``scorers/<b>/``, ``tasks/<b>*.py``);
- every package folder is a package of the wheel (setup.py finds them: nothing to list by hand);
- the product imports no test code (the loopback server and its channel, the test helpers).
"""

from __future__ import annotations

import ast
import re
import runpy
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from bedside import benchmarks
from bedside.parts import parts_of
from tests.conftest import REPO

#: setup.py's installed package -> repository folder (tasks/, solvers/, scorers/ are subpackages of ``bedside``)
PACKAGE_DIR: dict[str, str] = runpy.run_path(str(REPO / "setup.py"), run_name="setup")["PACKAGE_DIR"]
#: the top-level folders that are subpackages of ``bedside`` (folder -> installed name)
MAPPED = {folder: package for package, folder in PACKAGE_DIR.items() if package.count(".") == 1 and "._" not in package}


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


def import_statements(tree: ast.AST, in_function: bool = False) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of ``tree``, with whether it stands inside a function (a method, a lambda)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, in_function))
        found += import_statements(node, in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))
    return found


@cache
def named_imports(module: str, in_functions: bool = False) -> frozenset[str]:
    """The bedside modules ``module`` names in its imports (anywhere in it, a function's too; with
    ``in_functions`` only those inside a function), without the packages above them (that a package's
    submodule imports a sibling is no loop)."""
    path = FILES[module]
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node, in_function in import_statements(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if in_functions and not in_function:
            continue
        if isinstance(node, ast.Import):
            found.update(m for alias in node.names for m in resolve(alias.name)[-1:])
        else:
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            submodules = [f"{canonical(base)}.{a.name}" for a in node.names if f"{canonical(base)}.{a.name}" in FILES]
            found.update(submodules or resolve(base)[-1:])
    found.discard(module)
    return frozenset(found)


def import_loops(modules: set[str], imports: Callable[[str], frozenset[str]] = named_imports) -> list[list[str]]:
    """The loops of imports among ``modules``: for each module on one, the shortest chain back to it (one chain
    per set of modules on a loop)."""
    loops: dict[frozenset[str], list[str]] = {}
    for start in sorted(modules):
        chains = {start: [start]}
        queue = [start]
        while queue:  # breadth first: the shortest way back to ``start``
            current = queue.pop(0)
            for nxt in sorted(imports(current) & modules):
                if nxt == start:
                    chain = [*chains[current], start]
                    loops.setdefault(frozenset(chain), chain)
                    queue = []
                    break
                if nxt not in chains:
                    chains[nxt] = [*chains[current], nxt]
                    queue.append(nxt)
    return list(loops.values())


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
    assert "bedside.medsp.store" in reachable("bedside.scorers.medsp.rubric")
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


#: the layers above the library: ``bedside/`` (its shared modules and each benchmark's ``bedside/<b>/``) imports
#: none of them, not even inside a function; they reach a benchmark's tasks, solvers and scorers through its
#: descriptor (:meth:`bedside.benchmark.Benchmark.code`), Inspect's entry point too
ABOVE_THE_LIBRARY = ("bedside.tasks", "bedside.solvers", "bedside.scorers")


def test_the_scan_sees_imports_inside_functions():
    tree = ast.parse("import a\ndef f():\n    import b\n    class C:\n        def g(self):\n            from c import d\n")
    found = [(getattr(node, "module", None) or node.names[0].name, inside) for node, inside in import_statements(tree)]
    assert found == [("a", False), ("b", True), ("c", True)]


def test_the_library_imports_no_task_solver_or_scorer():
    library = [m for m in FILES if not m.startswith(ABOVE_THE_LIBRARY)]
    assert "bedside.cpb.scripted" in library and "bedside.providers.human" in library
    upward = {m: sorted(i for i in named_imports(m) if i.startswith(ABOVE_THE_LIBRARY)) for m in library}
    assert {m: found for m, found in upward.items() if found} == {}


#: Every import of a bedside module made inside a function rather than at the top of its module, the one list
#: of them, each with what it spares. Start-up: ``bedside --help`` loads every command's module (the parser),
#: Inspect's entry point (``import bedside._registry``: every ``inspect eval``) every task's; the figures are the
#: modules (and ms) the import would add there, measured by importing it after that start-up in a fresh process
#: (2-core shared machine, 2026-12-07). Everything else is imported at the top of its module.
FUNCTION_IMPORTS: dict[tuple[str, str], str] = {
    ("bedside._registry", "bedside.providers.api"): "the model provider's code loads only when a bedside/ model is "
    "used: +9 modules (http.server) at every inspect eval",
    ("bedside.calls", "bedside.batch"): "openai's client, only for --batch: +632 modules (~2 s) at start-up",
    ("bedside.benchmark", "bedside.score_keys"): "numpy, only when a descriptor's score keys are read: reading "
    "the facts (the registry, 95 modules) would take +102 modules (~0.3 s)",
    ("bedside.benchmarks", "bedside.score_keys"): "numpy, only when the score keys are read: reading the facts "
    "(the registry, 95 modules) would take +102 modules (~0.3 s)",
    ("bedside.reporting.rescore", "bedside._registry"): "every benchmark's tasks, only when rescore runs: +62 "
    "modules at bedside --help",
    ("bedside.reporting.rescore", "bedside.providers.human"): "the person's page (http.server), only for a person "
    "re-judging: +8 modules at bedside --help",
    ("bedside.tasks.discharge_build_cases", "bedside.discharge.mimic.cohort"): "pandas, only when the task runs: "
    "+342 modules (~1.3 s) at every inspect eval",
    ("bedside.discharge.mimic.extract", "bedside.discharge.mimic.cohort"): "pandas, only for the extraction's "
    "summary: +342 modules (~1.3 s) at every inspect eval",
    ("bedside.discharge.report", "bedside.reporting.figures"): "matplotlib, only when a report draws: +153 modules "
    "(~1.4 s) at bedside --help",
    ("bedside.providers.api", "bedside.providers.human"): "the person's page (http.server), only for bedside/human: "
    "+4 modules",
    ("bedside.solvers.discharge.monitor", "bedside.providers.human"): "the person's page (http.server), only when a "
    "person plays a role: +9 modules at every inspect eval",
    ("bedside.solvers.medsp.session", "bedside.providers.human"): "the person's page (http.server), only when a "
    "person plays a role: +9 modules at every inspect eval",
}


def test_every_function_level_import_is_listed_with_its_reason():
    """A reader sees a module's dependencies at its top: an import inside a function is there only for a
    measured start-up cost (or an optional heavy dependency), and listed in :data:`FUNCTION_IMPORTS`; a listed
    one that is gone is unlisted."""
    found = {(m, i) for m in FILES for i in named_imports(m, in_functions=True)}
    assert ("bedside.calls", "bedside.batch") in found  # the scan sees imports inside functions
    assert found == set(FUNCTION_IMPORTS), {
        "unlisted": sorted(found - set(FUNCTION_IMPORTS)),
        "listed but gone": sorted(set(FUNCTION_IMPORTS) - found),
    }
    assert all(len(reason) > 20 for reason in FUNCTION_IMPORTS.values())


#: what exists only for the tests and the benchmarks (the loopback server and its channel, the fork
#: server, the test helpers): the product (every module of the wheel) imports none of it
NOT_PRODUCT = ("tests", "loopback_channel", "bench")


def imported_names(source: str) -> set[str]:
    """The top-level names of every module ``source`` imports (absolute imports, at any depth)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.partition(".")[0])
    return found


def test_the_product_imports_no_test_code():
    assert imported_names("import tests.x\ndef f():\n    from loopback_channel import y\n") == {
        "tests",
        "loopback_channel",
    }
    bad = {
        module: sorted(imported_names(path.read_text(encoding="utf-8")) & set(NOT_PRODUCT))
        for module, path in FILES.items()
    }
    assert "bedside._registry" in bad and {m: names for m, names in bad.items() if names} == {}


def test_the_product_registers_no_inspect_hook():
    """Inspect runs a registered hook in every eval of the environment (and lists it in each eval's
    banner): bedside adds none at import; only bedside/human registers its page's hooks, when a process
    builds a person's model (never by a decorator at import), so an eval without a person never runs them;
    the loopback test channel's hook is a plugin of the test environment (tests/loopback/channel/)."""
    hooks = [m for m, path in FILES.items() if "inspect_ai.hooks" in path.read_text(encoding="utf-8")]
    assert hooks == ["bedside.providers.human"]
    assert "@hooks(" not in FILES["bedside.providers.human"].read_text(encoding="utf-8")
    assert "inspect_ai.hooks" in (REPO / "tests" / "loopback" / "channel" / "loopback_channel.py").read_text()


def benchmark_modules(name: str) -> set[str]:
    """The modules of benchmark ``name``'s folders: ``bedside/<b>/``, ``solvers/<b>/``, ``scorers/<b>/`` and
    ``tasks/<b>*.py``."""
    folders = (f"bedside.{name}", f"bedside.solvers.{name}", f"bedside.scorers.{name}")
    return {
        m
        for m in FILES
        if m in folders or m.startswith(tuple(f"{f}." for f in folders)) or m.startswith(f"bedside.tasks.{name}")
    }


def test_every_registered_benchmark_has_its_folders():
    for benchmark in benchmarks.all_benchmarks():
        found = benchmark_modules(benchmark.name)
        assert f"bedside.{benchmark.name}" in found, f"{benchmark.name}: no bedside/{benchmark.name}/"
        assert any(m.startswith(f"bedside.tasks.{benchmark.name}") for m in found), f"{benchmark.name}: no task module"
        code = (*benchmark.task_modules, f"bedside.scorers.{benchmark.name}", f"bedside.{benchmark.name}.parts")
        for module in (*code, *(m.__name__ for m in parts_of(benchmark).scripts)):
            assert module in found, f"{benchmark.name}: {module} is not in its own folders"


@pytest.mark.parametrize("benchmark", [b.name for b in benchmarks.all_benchmarks()])
def test_a_benchmark_reaches_no_other_benchmarks_code_or_texts(benchmark):
    """A benchmark's modules import nothing of another benchmark's folders, directly or not, and name no other
    benchmark's prompts or data (a string ``"<other>/..."``, as ``render`` and ``load_yaml`` take them): a text
    two benchmarks share lives in a shared place."""
    own = benchmark_modules(benchmark)
    others = {b.name: benchmark_modules(b.name) for b in benchmarks.all_benchmarks() if b.name != benchmark}
    for module in sorted(own):
        for name, theirs in others.items():
            bad = [chain for m, chain in reachable(module).items() if m in theirs]
            assert not bad, f"{module} imports {name}'s code: {' -> '.join(bad[0])}"
            tree = ast.parse(FILES[module].read_text(encoding="utf-8"))
            texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            named = [t for t in texts if t.startswith(f"{name}/")]
            assert not named, f"{module} reads {name}'s texts: {named}"


@pytest.mark.parametrize("module", ["bedside.solvers.orchestrator", "bedside.solvers.agent"])
def test_the_orchestrator_knows_no_benchmark(module):
    specific = set().union(*(benchmark_modules(b.name) for b in benchmarks.all_benchmarks()))
    bad = {m: chain for m, chain in reachable(module).items() if m in specific}
    assert not bad, f"{module} imports a benchmark's module: {' -> '.join(next(iter(bad.values())))}"


def test_the_orchestrator_names_no_role():
    """The loop knows its supervisor and agents only through their protocols: no string of its code
    (docstrings aside) names a registered benchmark's model role or model under test (a supervisor's
    events take the supervisor's own ``role``)."""
    roles = {r for b in benchmarks.all_benchmarks() for r in (*b.roles, b.subject_role)}
    tree = ast.parse(FILES["bedside.solvers.orchestrator"].read_text(encoding="utf-8"))
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, documented) and node.body and isinstance(node.body[0], ast.Expr)
    }
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]
    named = {role for role in roles for text in strings if re.search(rf"\b{re.escape(role)}\b", text)}
    assert "monitor" in roles and "encounter" in strings  # the scan sees the roles and the code's strings
    assert named == set(), f"the orchestrator names roles: {sorted(named)}"


def test_no_import_loops():
    """No two modules of the product import each other, directly or through others (a loop makes the import
    order matter and hides which concept depends on which). The scanner sees a loop where there is one."""
    toy = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a", "d"}), "d": frozenset()}
    assert import_loops(set(toy), toy.__getitem__) == [["a", "b", "c", "a"]]
    assert "bedside.discharge.ratings" in named_imports("bedside.discharge.calibrated")
    assert import_loops(set(FILES)) == []


#: the longest a module of the product may be: past it, a module holds more than one concept to split by
MAX_LINES = 600


def test_no_module_is_longer_than_the_rule():
    lines = {m: len(path.read_text(encoding="utf-8").splitlines()) for m, path in FILES.items()}
    assert lines["bedside.solvers.orchestrator"] > 100  # the scan reads the modules
    assert {m: n for m, n in lines.items() if n > MAX_LINES} == {}


def test_every_package_folder_is_a_package_of_the_wheel():
    """setup.py finds the packages (tasks/, solvers/ and scorers/ are remapped into bedside): every folder of
    Python files under its roots must be one of them, or it would work in the editable install and be absent
    from a wheel (a folder without ``__init__.py`` is not found)."""
    packages = set(runpy.run_path(str(REPO / "setup.py"), run_name="setup")["packages"]())
    data = {p for p in PACKAGE_DIR if "._" in p}  # prompts/, datasets/: package data, not code
    folders = {
        ".".join([package, *path.parent.relative_to(REPO / folder).parts])
        for package, folder in PACKAGE_DIR.items()
        if package not in data
        for path in (REPO / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert folders - packages == set(), (
        f"folders of Python files that are no package of the wheel: {sorted(folders - packages)}"
    )
    assert {
        "bedside.discharge.mimic",
        "bedside.solvers.discharge",
        "bedside.scorers.cpb",
        "bedside.tasks",
    } <= packages
    assert data <= packages


def test_shared_code_names_no_benchmark():
    """Shared modules (everything outside the benchmarks' folders) name no registered benchmark, nor a
    sub-package of one, not even in a docstring: they reach a benchmark through the registry (whose
    one list of names, ``bedside/benchmarks.py``, is the exception)."""
    own = set().union(*(benchmark_modules(b.name) for b in benchmarks.all_benchmarks()))
    words = {b.name for b in benchmarks.all_benchmarks()}
    words |= {
        m.split(".")[2]
        for m in own
        if m.startswith("bedside.") and m.count(".") >= 2 and FILES[m].name == "__init__.py"
    }
    words -= {"tasks", "solvers", "scorers"}
    pattern = re.compile("|".join(sorted(words)), re.IGNORECASE)
    shared = sorted(set(FILES) - own - {"bedside.benchmarks"})
    assert "bedside.calls" in shared and "bedside.solvers.orchestrator" in shared
    found = {
        m: sorted({w.group(0).lower() for w in pattern.finditer(FILES[m].read_text(encoding="utf-8"))}) for m in shared
    }
    assert {m: w for m, w in found.items() if w} == {}, "shared modules that name a benchmark"
