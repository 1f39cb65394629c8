"""The benchmark descriptors against what the code does: every shared end reason is declared by a
benchmark, a benchmark's own end reasons are its (no two benchmarks spell one end reason differently, none
shadows a shared one), the scripted runs end only with their benchmark's declared reasons, and the test
doubles answer every protocol a descriptor declares (adding a benchmark without its scripted roles fails
here)."""

from __future__ import annotations

import json

import pytest

from bedside import benchmarks
from bedside.end_reasons import EndReason
from bedside.testing.scripted import ScriptedEngine
from tests.golden import make_golden


def test_every_shared_end_reason_is_declared_by_a_benchmark():
    declared = {reason for b in benchmarks.all_benchmarks() for reason in b.end_reasons}
    assert set(EndReason) <= declared, f"declared by no benchmark: {sorted(set(EndReason) - declared)}"


def test_a_benchmarks_own_end_reasons_are_its_own():
    """An end reason is a shared member or declared by one benchmark only (one meaning per string)."""
    owners: dict[str, set[str]] = {}
    for benchmark in benchmarks.all_benchmarks():
        for reason in benchmark.end_reasons:
            assert isinstance(reason, str) and reason == reason.strip().lower(), (benchmark.name, reason)
            if reason not in set(EndReason):
                owners.setdefault(str(reason), set()).add(benchmark.name)
    assert {r: o for r, o in owners.items() if len(o) > 1} == {}


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
    protocols = {p.name for p in benchmark.protocols()}
    assert protocols, f"{benchmark.name} declares no protocols"
    missing = protocols - set(ScriptedEngine().handlers)
    assert not missing, f"{benchmark.name}: no scripted handler for {sorted(missing)}"
