"""The benchmark descriptors against what the code does: every end reason the encounters can produce
is declared by a benchmark, the scripted runs end only with their benchmark's declared reasons, and the
test doubles answer every protocol a descriptor declares (adding a benchmark without its scripted roles
fails here)."""

from __future__ import annotations

import json

import pytest

from bedside import benchmarks
from bedside.end_reasons import EndReason
from bedside.testing.scripted import ScriptedEngine
from tests.golden import make_golden

#: the scorers whose answer is the sample's end reason
END_REASON_ANSWERS = ("encounter_outcome", "medsp_rubric")


def test_every_end_reason_is_declared_by_a_benchmark():
    declared = {reason for b in benchmarks.all_benchmarks() for reason in b.end_reasons}
    assert declared == set(EndReason), f"declared by no benchmark: {sorted(set(EndReason) - declared)}"


@pytest.mark.parametrize("run", sorted(make_golden._declared()))
def test_scripted_runs_end_with_their_benchmarks_declared_reasons(run):
    benchmark = benchmarks.get(make_golden._declared()[run][0])
    path = make_golden.path_of(run)
    seen = {
        answer
        for sample in json.loads(path.read_text()).values()
        for scorer, answer in sample["answer"].items()
        if scorer in END_REASON_ANSWERS
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
