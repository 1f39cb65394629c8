"""The benchmark descriptors (:mod:`bedside.benchmarks`): what they declare, and that a benchmark registered
in one place (WardBench, of this test only) flows through the loader, ``strata``, ``compare`` and ``report``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from inspect_ai.log import read_eval_log
from inspect_ai.scorer import Score

from bedside import benchmarks
from bedside.benchmarks import Benchmark
from bedside.cli import Tools, main
from bedside.end_reasons import EndReason
from bedside.intervals import BINARY, UNIT
from bedside.parts import Parts, parts_of
from bedside.reporting.build import build
from bedside.reporting.compare import compare
from bedside.reporting.load import load, scores_frame
from bedside.reporting.strata import strata_table
from bedside.score_keys import ScoreKey, declares
from tests.conftest import REPO
from tests.reporting.synth import event, log, sample, write


def test_the_registry_holds_its_one_line_per_benchmark_and_unites_their_rules():
    """The registry's answers are its benchmarks' (each benchmark's own directions, strata and tasks:
    tests/<b>/test_descriptor.py)."""
    registered = benchmarks.all_benchmarks()
    assert [b.name for b in registered] == list(benchmarks.NAMES) and len(set(benchmarks.NAMES)) == len(registered)
    assert benchmarks.lower_is_better() == frozenset().union(*(b.lower_is_better for b in registered))
    assert benchmarks.strata() == tuple(dict.fromkeys(s for b in registered for s in b.strata))
    assert benchmarks.pooled_keys() == frozenset().union(*(b.pooled_keys for b in registered))
    for stratum in benchmarks.strata():
        assert benchmarks.min_n(stratum) == max([b.min_n.get(stratum, 1) for b in registered])
    for benchmark in registered:
        assert all(benchmarks.of_task(f"bedside/{task}") is benchmark for task in benchmark.tasks)
        assert benchmarks.lower_is_better(benchmark.name) == benchmark.lower_is_better
    assert benchmarks.of_task("bedside/unknown_task", preparation=True) is None


@pytest.mark.eval
@pytest.mark.parametrize("benchmark", benchmarks.all_benchmarks(), ids=lambda b: b.name)
def test_every_descriptor_finds_its_parts_and_protocols(benchmark: Benchmark):
    protocols = parts_of(benchmark).protocols
    # named "<benchmark>.<role>", or after the sub-package of its folder they belong to ("mimic.extract")
    folder = REPO / "bedside" / benchmark.name
    prefixes = {benchmark.name, *(p.parent.name for p in folder.glob("*/__init__.py"))}
    assert protocols and all(p.name.split(".")[0] in prefixes for p in protocols)
    assert benchmark.end_reasons and all(isinstance(r, str) for r in benchmark.end_reasons)
    assert benchmark.headline and benchmark.strata and benchmark.subject_role not in benchmark.roles


@declares(
    (
        ScoreKey("score", UNIT, role="headline"),
        ScoreKey("harm", BINARY, role="headline", label="harm rate", lower_is_better=True),
    )
)
def wardbench_judge() -> None:
    """WardBench's scorer, as far as reporting sees it: the keys it declares."""


class WardBench(Benchmark):
    """WardBench's descriptor (a benchmark of this test only), with its code (its scorer, no parts) given here
    rather than in its folders."""

    def code(self, module: str) -> Any:
        # its scorer package (no modules below it) holds its scorer; its parts and tools
        return SimpleNamespace(
            __path__=[], wardbench_judge=wardbench_judge, PARTS=Parts(protocols=(), scripts=()), TOOLS=Tools()
        )


WARDBENCH = WardBench(
    name="wardbench",
    title="WardBench",
    tasks=("wardbench_run",),
    subject_role="clinician",
    roles=("grader",),
    end_reasons=(EndReason.CLEAN_COMPLETE, EndReason.MAX_TURNS),
    strata=("unit",),
    variant_args=("difficulty",),
)


def wardbench_log(tmp_path, name: str, harm: list[float], difficulty: str = "easy") -> str:
    wards = ["icu", "icu", "er", "er", "er", "icu"]
    samples = [
        sample(
            f"t{i}",
            {"wardbench_judge": Score(value={"score": 0.5 + 0.05 * i, "harm": h})},
            metadata={"unit": wards[i]},
            events=[event(None, "prov/m", 100, 10)],
        )
        for i, h in enumerate(harm)
    ]
    return write(
        log("bedside/wardbench_run", "prov/m", samples, task_args={"difficulty": difficulty}), tmp_path / f"{name}.eval"
    )


@pytest.mark.eval
def test_a_fourth_benchmark_registered_in_one_place_flows_through_reporting(tmp_path, capsys):
    with benchmarks.register(WARDBENCH):
        base = wardbench_log(tmp_path, "base", [0, 0, 0, 0, 0, 0])
        worse = wardbench_log(tmp_path, "worse", [1, 1, 1, 1, 1, 0], difficulty="hard")
        # the loader: its benchmark, its variant argument in the label, its stratum as a column
        [loaded] = load([worse])
        assert loaded.benchmark == "wardbench" and loaded.label == "prov/m (difficulty=hard)"
        frame = scores_frame([loaded])
        assert set(frame["unit"]) == {"icu", "er"}
        # strata: its stratum by default
        table = strata_table(read_eval_log(worse))
        harm = table[(table["stratum"] == "unit") & (table["key"] == "harm")].set_index("group")
        assert harm.loc["er", "mean"] == 1.0 and harm.loc["icu", "n"] == 3
        # compare: its direction (more harm is a drop), by the descriptor alone
        [result] = compare(base, worse, ["harm"], 0.1, resamples=999)
        assert result.direction == "lower is better" and result.regressed
        assert main(["compare", base, worse, "--metric", "harm", "--max-drop", "0.1"]) == 1
        # report: a generic section with its headline keys per stratum, the subject's role in usage
        build([base, worse], tmp_path / "report")
        table = pd.read_csv(tmp_path / "report" / "wardbench.csv")
        assert set(table["stratum"]) == {"overall", "unit"} and set(table["key"]) == {"score", "harm"}
        assert "WardBench" in (tmp_path / "report" / "index.html").read_text()
        assert set(pd.read_csv(tmp_path / "report" / "usage_by_role.csv")["role"]) == {"clinician"}
    assert "wardbench" not in benchmarks.names() and "unit" not in benchmarks.strata()
    # unregistered, the same log is nobody's: its task name is its benchmark, its stratum is unknown
    [loaded] = load([worse])
    assert loaded.benchmark == "wardbench_run" and "unit" not in scores_frame([loaded])
    capsys.readouterr()


def test_a_descriptor_that_lists_a_task_in_the_wrong_place_is_refused_naming_it():
    with pytest.raises(ValueError, match="'toy': preparation_tasks: toy_build also in its tasks"):
        Benchmark(
            name="toy", title="Toy", tasks=("toy", "toy_build"), subject_role="x", preparation_tasks=("toy_build",)
        )
    with pytest.raises(ValueError, match="'toy': tasks_without_run_options: probe not in its tasks"):
        Benchmark(name="toy", title="Toy", tasks=("toy",), subject_role="x", tasks_without_run_options=("probe",))
