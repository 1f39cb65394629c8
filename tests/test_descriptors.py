"""The benchmark descriptors against what the code does: every shared end reason is declared by a
benchmark, a benchmark's own end reasons are its (no two benchmarks spell one end reason differently, none
shadows a shared one), the scripted runs end only with their benchmark's declared reasons, and the test
doubles answer every protocol a descriptor declares (adding a benchmark without its scripted roles fails
here)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bedside import benchmarks
from bedside.cli import Tools, tools_of
from bedside.end_reasons import EndReason
from bedside.parts import Parts, parts_of, protocols_of
from bedside.providers.scripted import ScriptedEngine
from bedside.score_keys import ScoreKey
from tests.golden import make_golden


@pytest.mark.eval
def test_every_shared_end_reason_is_declared_by_a_benchmark():
    declared = {reason for b in benchmarks.all_benchmarks() for reason in b.end_reasons}
    assert set(EndReason) <= declared, f"declared by no benchmark: {sorted(set(EndReason) - declared)}"


@pytest.mark.eval
def test_a_benchmarks_own_end_reasons_are_its_own():
    """An end reason is a shared member or declared by one benchmark only (one meaning per string)."""
    owners: dict[str, set[str]] = {}
    for benchmark in benchmarks.all_benchmarks():
        for reason in benchmark.end_reasons:
            assert isinstance(reason, str) and reason == reason.strip().lower(), (benchmark.name, reason)
            if reason not in set(EndReason):
                owners.setdefault(str(reason), set()).add(benchmark.name)
    assert {r: o for r, o in owners.items() if len(o) > 1} == {}


@pytest.mark.eval
@pytest.mark.parametrize("run", sorted(make_golden._declared()))
def test_scripted_runs_end_with_their_benchmarks_declared_reasons(run):
    benchmark = benchmarks.get(make_golden._declared()[run][0])
    path = make_golden.path_of(run)
    seen = {
        answer
        for sample in json.loads(path.read_text()).values()
        for scorer, answer in sample["answer"].items()
        if scorer == benchmark.end_reason_scorer
    }
    assert seen <= set(benchmark.end_reasons), (
        f"{path.stem}: undeclared end reasons {seen - set(benchmark.end_reasons)}"
    )


@pytest.mark.parametrize("benchmark", benchmarks.all_benchmarks(), ids=lambda b: b.name)
def test_the_scripted_model_answers_every_declared_protocol(benchmark):
    protocols = {p.name for p in protocols_of(benchmark)}
    assert protocols, f"{benchmark.name} declares no protocols"
    missing = protocols - set(ScriptedEngine().handlers)
    assert not missing, f"{benchmark.name}: no scripted handler for {sorted(missing)}"


# --- the score keys the scorers declare (bedside.score_keys) --------------------------------------


def _declarations() -> list[tuple[str, str, ScoreKey]]:
    """(benchmark, scorer, key) for every key every registered benchmark's scorers declare."""
    return [
        (b.name, scorer, key)
        for b in benchmarks.all_benchmarks()
        for scorer, keys in b.scorer_keys.items()
        for key in keys
    ]


def test_a_key_written_by_several_scorers_is_declared_alike():
    """One name, one meaning: scale, label and direction agree wherever a key is declared."""
    seen: dict[str, tuple[str, ScoreKey]] = {}
    for benchmark, scorer, key in _declarations():
        first = seen.setdefault(key.name, (f"{benchmark}/{scorer}", key))
        assert (key.scale, key.label, key.lower_is_better) == (
            first[1].scale,
            first[1].label,
            first[1].lower_is_better,
        ), f"{key.name!r}: {benchmark}/{scorer} declares it unlike {first[0]}"


def test_one_spelling_per_label():
    """A label names one key and a key has one label (so e.g. comprehension is labelled alike in
    Inspect's block, Table 1 and every report)."""
    names_of: dict[str, set[str]] = {}
    labels_of: dict[str, set[str]] = {}
    for _, _, key in _declarations():
        names_of.setdefault(key.label, set()).add(key.name)
        labels_of.setdefault(key.name, set()).add(key.label)
    assert {label: names for label, names in names_of.items() if len(names) > 1} == {}
    assert {name: labels for name, labels in labels_of.items() if len(labels) > 1} == {}
    # a label is no key's name but its own key's (a row would name two numbers)
    assert {label: names for label, names in names_of.items() if label in labels_of and names != {label}} == {}


def test_health_names_mean_one_thing():
    """A health-block name comes from keys of one kind and one way of combining them."""
    rules: dict[str, set[tuple[str | None, str]]] = {}
    for _, _, key in _declarations():
        if key.role == "health":
            rules.setdefault(key.health_name, set()).add((key.health, key.combine))
    assert {name: r for name, r in rules.items() if len(r) > 1} == {}


@pytest.mark.eval
@pytest.mark.parametrize("run", sorted(make_golden._declared()))
def test_the_scorers_of_the_scripted_runs_write_exactly_their_declared_keys(run):
    """Every key a scorer writes in a golden run is one it declares, and it writes every key it declares;
    the health block holds only declared health names."""
    samples = json.loads(make_golden.path_of(run).read_text()).values()
    written: dict[str, set[str]] = {}
    for sample in samples:
        for scorer, value in sample["scores"].items():
            if isinstance(value, dict):
                written.setdefault(scorer, set()).update(value)
    health = written.pop("health", set())
    assert health <= set(benchmarks.health_keys()), sorted(health - set(benchmarks.health_keys()))
    for scorer, keys in written.items():
        declared = {k.name for k in benchmarks.scorer_keys(scorer)}
        assert keys == declared, (
            f"{scorer}: written but undeclared {sorted(keys - declared)}, "
            f"declared but never written {sorted(declared - keys)}"
        )


# --- a benchmark's code: three places, each imported only when asked for (bedside.benchmark) ------------


@pytest.mark.parametrize("benchmark", benchmarks.all_benchmarks(), ids=lambda b: b.name)
def test_every_benchmark_has_its_code_at_its_places(benchmark):
    """Its scorers (the declared scorers of ``scorers/<b>/``, each declaring keys), its task modules (each task one
    of its tasks or preparation tasks), ``PARTS`` (protocols and scripted roles at least) and ``TOOLS`` (when it has
    ``tools.py``)."""
    assert benchmark.scorers and all(benchmark.scorer_keys.values())
    assert benchmark.end_reason_scorer in (None, *benchmark.scorer_keys)
    tasks = benchmark.task_functions
    assert tasks and set(tasks) <= {*benchmark.tasks, *benchmark.preparation_tasks}, sorted(tasks)
    assert set(benchmark.tasks) <= set(tasks), f"{benchmark.name}: tasks without a task function"
    parts = parts_of(benchmark)
    assert isinstance(parts, Parts) and parts.protocols and parts.scripts
    assert isinstance(tools_of(benchmark), Tools)


#: what a process does: (its code, the modules it needs, the modules it must not import). Reading the facts
#: imports no code of a benchmark and not Inspect; reading a log's numbers (the loader, every benchmark's score
#: keys) its scorers but no solver, task, part, tool or model library; Inspect's entry point (every task) and the
#: scripted model (every benchmark's parts) no tool and neither pandas nor scipy. "parts" / "tools": every
#: registered benchmark's bedside/<b>/parts.py / tools.py.
IMPORT_PATHS = {
    "facts": (
        "from bedside import benchmarks\n[(b.strata, b.roles, b.run_options) for b in benchmarks.all_benchmarks()]",
        ("bedside.benchmarks",),
        ("inspect_ai", "bedside.scorers", "bedside.tasks", "bedside.solvers", "parts", "tools"),
    ),
    "numbers": (
        "from bedside import benchmarks\nfrom bedside.reporting.load import load, scores_frame\n"
        "[(b.headline, b.lower_is_better) for b in benchmarks.all_benchmarks()]\nbenchmarks.health_keys()",
        ("bedside.scorers",),
        ("bedside.tasks", "bedside.solvers", "parts", "tools", "torch", "sentence_transformers", "openai", "anthropic"),
    ),
    "entry point": ("import bedside._registry", ("bedside.tasks",), ("parts", "tools", "pandas", "scipy")),
    "scripted model": (
        "import bedside._registry\nfrom inspect_ai.model import get_model\nget_model('bedside/scripted')",
        ("parts",),
        ("tools", "pandas", "scipy"),
    ),
}


def _modules(names: tuple[str, ...]) -> set[str]:
    own = {f"bedside.{b.name}.{n}" for b in benchmarks.all_benchmarks() for n in names if n in ("parts", "tools")}
    return own | {n for n in names if n not in ("parts", "tools")}


@pytest.mark.eval  # a fresh process: what it imports
@pytest.mark.parametrize("path", IMPORT_PATHS)
def test_each_path_imports_only_the_code_it_needs(path):
    code, needed, forbidden = IMPORT_PATHS[path]
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    imported = set(json.loads(done.stdout.splitlines()[-1]))
    assert _modules(needed) <= imported, sorted(_modules(needed) - imported)
    bad = [m for m in sorted(imported) if any(m == f or m.startswith(f"{f}.") for f in _modules(forbidden))]
    assert not bad, f"{path}: imports {bad}"
