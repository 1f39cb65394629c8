"""DischargeBench's task parameters: the values its tasks refuse and accept beyond what every task's
annotations give (tests/test_params.py), what its body gets, and its command line's one-line refusals."""

from __future__ import annotations

from typing import Any

import pytest
from inspect_ai import Task

from bedside import params
from bedside.tasks.discharge import discharge
from bedside.tasks.discharge_build_cases import build_discharge_cases
from tests.conftest import run, store
from tests.task_parameters import NOT_INTS, assert_cli_refuses, assert_refused, received

#: (task, arguments, the parameter named): values outside a choice, a rule across parameters, bounds given as text
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("discharge", {"behavior": "bogus"}, "behavior"),
    ("discharge", {"behavior": "None"}, "behavior"),
    ("discharge", {"personality": "grumpy"}, "personality"),
    ("discharge", {"education_level": "phd"}, "education_level"),
    ("discharge", {"health_literacy": 3}, "health_literacy"),
    ("discharge", {"recall_level": ["poor"]}, "recall_level"),
    ("discharge", {"persona_assignment": "stratified"}, "persona_assignment"),
    ("discharge", {"monitor_layout": "cached"}, "monitor_layout"),
    ("discharge", {"monitor_layout": True}, "monitor_layout"),  # -T monitor_layout=yes arrives as a bool
    ("discharge", {"max_turns": -5}, "max_turns"),
    ("discharge", {"min_turns": 20, "max_turns": 5}, "min_turns"),
    ("discharge", {"min_turns": "101"}, "min_turns"),  # above the default max_turns=100
    ("discharge", {"persona_assignment": "stratified"}, "persona_assignment"),
    ("discharge", {"reading": "lenient"}, "reading"),
    ("discharge", {"reading": "strict"}, "reading"),  # no DischargeBench protocol has a strict reader
    ("discharge", {"monitor_layout": "cached"}, "monitor_layout"),
    ("discharge", {"monitor_policy": "figure6"}, "monitor_policy"),
    # the persona seed is declared int: anything that is not a whole number is refused
    *(("discharge", {"seed": value}, "seed") for value in NOT_INTS if value is not None),
]


@pytest.mark.parametrize(("task_name", "args", "name"), BAD, ids=lambda x: repr(x) if isinstance(x, dict) else x)
def test_a_bad_value_is_refused_in_one_line_naming_it(task_name, args, name):
    assert_refused(params.task_functions()[task_name], args, name)


def test_good_values_pass():
    for args in [
        {},
        {"min_turns": "2", "max_turns": " 4 ", "max_retries": "0", "parse_retries": 0, "judge_retries": "3"},
        {"min_turns": 5, "max_turns": 5, "cache_references": "YES"},
        {"min_turns": 0, "max_turns": 1.0, "cache_references": "no"},
        {"cache_references": "False"},
        {"cache_references": 1},
        {"cache_references": "0"},
        {"cache_references": False},
    ]:
        assert isinstance(discharge(**args), Task), args


@pytest.mark.eval  # a scripted run
def test_string_values_reach_the_run_as_ints(tmp_path):
    """``-T max_turns=4`` may arrive as a string: the converted int is what the encounter uses."""
    log = run(discharge(min_turns="1", max_turns="4", cache_references="no"), log_dir=tmp_path, limit=1)
    [sample] = log.samples
    assert store(sample)["end_reason"] == "max_turns" and len(store(sample)["history"]) == 4


def test_a_missing_required_parameter_is_one_line_too():
    with pytest.raises(params.BadParameter, match=r"^Bad parameter 'cohort': required \(-T cohort=\.\.\.\)$"):
        build_discharge_cases()


@pytest.mark.eval
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"behavior": " care_resistance "}, {"behavior": "care_resistance"}),
        ({"personality": "anxious", "recall_level": "poor"}, {"personality": "anxious"}),
    ],
)
def test_the_body_gets_the_values_as_annotated(args, expected):
    seen = received(discharge, args)
    assert {k: seen[k] for k in expected} == expected


def test_its_tables_hold_what_the_annotations_allow():
    assert "| `cohort` | text | *required* |" in params.markdown_table("build_discharge_cases")
    assert "| `cache_references` | `true`, `false` | `true` |" in params.markdown_table("discharge")


@pytest.mark.eval  # inspect eval, in a process
@pytest.mark.parametrize(
    ("arg", "name"),
    [
        ("max_turns=0", "max_turns"),
        ("max_turns=abc", "max_turns"),
        ("cache_references=maybe", "cache_references"),
        ("seed=abc", "seed"),
        ("behavior=bogus", "behavior"),  # a value outside a Literal
        ("monitor_layout=yes", "monitor_layout"),  # YAML's yes: a bool
    ],
)
def test_the_cli_prints_one_line_without_traceback(arg, name, tmp_path):
    assert_cli_refuses("tasks/discharge.py", arg, name, tmp_path)
