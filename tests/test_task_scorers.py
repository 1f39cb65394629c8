"""A task's scorers are built from its benchmark's declared scorers (:func:`bedside.scorers.metrics.task_scorers`):
those that declare the task and whose condition holds for the run's arguments, in the benchmark's order, each made
with the task's arguments of its parameters' names."""

from __future__ import annotations

import inspect

import pytest

from bedside import benchmarks
from bedside.scorers.metrics import scorer_name, task_scorers


def defaults(task: str) -> dict:
    function = benchmarks.task_functions()[task]
    return {name: p.default for name, p in inspect.signature(function).parameters.items()}


def built(benchmark: str, task: str, **arguments) -> list[str]:
    return [scorer_name(s) for s in task_scorers(benchmarks.get(benchmark), task, {**defaults(task), **arguments})]


@pytest.mark.parametrize(
    ("benchmark", "task", "arguments", "names"),
    [
        ("discharge", "discharge", {}, ["conversation_quality", "topic_checklist", "comprehension"]),
        ("discharge", "discharge", {}, ["factual_consistency", "encounter_outcome"]),
        ("discharge", "discharge", {"safety": True}, ["advice_safety"]),
        ("discharge", "discharge", {"simulator_check": True}, ["simulator_check"]),
        ("discharge", "discharge_safety_probe", {}, ["advice_safety", "safety_probe_check"]),
        ("medsp", "medsp", {}, ["medsp_rubric"]),
        ("medsp", "medsp", {"simulator_check": True}, ["medsp_rubric", "simulator_check"]),
        ("cpb", "cpb", {}, ["cpb_failure"]),
        ("cpb", "cpb", {"turns": 3}, ["cpb_failure", "cpb_persistence"]),
        ("cpb", "cpb", {"turns": 3, "simulator_check": True}, ["cpb_failure", "cpb_persistence", "simulator_check"]),
        ("cpb", "cpb_control", {}, ["cpb_overreaction"]),
    ],
)
def test_each_task_gets_the_scorers_that_declare_it_and_apply(benchmark, task, arguments, names):
    got = built(benchmark, task, **arguments)
    assert [n for n in got if n in names] == names, got


def test_the_switches_leave_their_scorers_out_and_the_order_is_the_benchmarks():
    plain = built("discharge", "discharge")
    assert plain[:5] == [
        "conversation_quality",
        "topic_checklist",
        "comprehension",
        "factual_consistency",
        "encounter_outcome",
    ]
    assert not {"advice_safety", "safety_probe_check", "simulator_check"} & set(plain)
    switched = built("discharge", "discharge", safety=True, simulator_check=True)
    assert switched.index("encounter_outcome") < switched.index("advice_safety") < switched.index("simulator_check")
    assert "cpb_persistence" not in built("cpb", "cpb") and "simulator_check" not in built("medsp", "medsp")


def made(benchmark: str, task: str, **arguments) -> dict[str, dict]:
    """Scorer name -> the arguments it was made with (as Inspect records them in the log's plan)."""
    scorers = task_scorers(benchmarks.get(benchmark), task, {**defaults(task), **arguments})
    return {scorer_name(s): s.__registry_params__ for s in scorers}  # type: ignore[attr-defined]


def test_a_scorer_is_made_with_the_tasks_arguments_of_its_parameters_names():
    params = made("discharge", "discharge", checklist_applicability="all", comprehension_divisor="all_six")
    assert params["topic_checklist"] == {"judge_retries": 2, "checklist_applicability": "all"}
    assert params["comprehension"] == {"judge_retries": 2, "cache_references": True, "comprehension_divisor": "all_six"}
    assert params["encounter_outcome"] == {}
    assert made("cpb", "cpb", turns=2, context="min_turn", judge_retries=1)["cpb_failure"] == {
        "judge_retries": 1,
        "context": "min_turn",
        "turns": 2,
    }
    assert made("medsp", "medsp", simulator_check=True, judge_retries=3)["simulator_check"] == {
        "benchmark": "medsp",
        "judge_retries": 3,
    }
