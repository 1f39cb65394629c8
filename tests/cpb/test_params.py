"""CPB-Bench's task parameters: the values its tasks refuse and accept beyond what every task's annotations
give (tests/test_params.py), what their bodies get, and their command line's one-line refusals."""

from __future__ import annotations

from typing import Any

import pytest
from inspect_ai import Task

from bedside import params
from bedside.params import BadParameter
from bedside.tasks.cpb import cpb, cpb_control
from tests.task_parameters import assert_cli_refuses, assert_refused, received

#: (task, arguments, the parameter named)
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("cpb", {"language": "fr"}, "language"),
    ("cpb", {"category": "grumpiness"}, "category"),
    ("cpb", {"category": ["care_resistance", "grumpiness"]}, "category"),  # one bad element of -T category=a,b
    ("cpb", {"category": "care_resistance,grumpiness"}, "category"),
    ("cpb", {"dataset": "PubMed"}, "dataset"),
    ("cpb", {"context": "everything"}, "context"),
    ("cpb", {"turns": 11}, "turns"),
    ("cpb", {"turns": "99"}, "turns"),
    ("cpb", {"reading": "loose"}, "reading"),
    ("cpb", {"mitigation": "bogus"}, "mitigation"),
    ("cpb_control", {"dataset": ["ACI", 7]}, "dataset"),
    ("cpb_control", {"language": None}, "language"),
    ("cpb_control", {"reading": "strict,official"}, "reading"),
    ("cpb_control", {"mitigation": "bogus"}, "mitigation"),
    ("cpb_control", {"mitigation": 3}, "mitigation"),
]


@pytest.mark.parametrize(("task_name", "args", "name"), BAD, ids=lambda x: repr(x) if isinstance(x, dict) else x)
def test_a_bad_value_is_refused_in_one_line_naming_it(task_name, args, name):
    assert_refused(params.task_functions()[task_name], args, name)


@pytest.mark.parametrize("task_function", [cpb, cpb_control])
def test_a_bad_parameter_is_reported_without_data(task_function):
    with pytest.raises(BadParameter, match="'parse_retries'"):
        task_function(parse_retries=-1)


@pytest.mark.eval
def test_good_values_pass(tmp_path):
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb-bench_data"))
    assert isinstance(cpb(data=data, turns="2", parse_retries="0", judge_retries=1), Task)
    assert isinstance(cpb(data=data, turns=0), Task)
    assert isinstance(cpb(data=data, turns=10), Task)
    assert isinstance(cpb_control(data=data, parse_retries=0, judge_retries="5"), Task)


@pytest.mark.eval
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"category": "care_resistance,self_diagnosis"}, {"category": ["care_resistance", "self_diagnosis"]}),
        ({"category": ["care_resistance"]}, {"category": ["care_resistance"]}),
        ({"dataset": "ACI"}, {"dataset": ["ACI"]}),
        ({"language": "EN"}, {"language": "en"}),  # the loaders' spellings, as their names
        ({"category": "Care Resistance,factual-inaccuracy"}, {"category": ["care_resistance", "false_belief"]}),
        ({"dataset": ["meddg", "IMCS-21"]}, {"dataset": ["MedDG", "IMCS21"]}),
        ({"mitigation": "cot"}, {"mitigation": "step_by_step"}),  # the authors' name
        ({"mitigation": "Self-Check"}, {"mitigation": "self_check"}),
        ({"context": "min_turn", "turns": "3"}, {"context": "min_turn", "turns": 3}),
        ({"data": ["folder", "with", "commas"]}, {"data": "folder,with,commas"}),  # -T split it
        ({"data": 2024}, {"data": "2024"}),  # -T data=2024 arrives as an int
    ],
)
def test_the_body_gets_the_values_as_annotated(args, expected):
    seen = received(cpb, args)
    assert {k: seen[k] for k in expected} == expected


def test_its_tables_hold_what_the_annotations_allow():
    table = params.markdown_table("cpb")
    assert "| `turns` | integer 0–10 | `0` |" in table
    assert (
        "| `category` | one or more of `contradiction`, `false_belief`, `self_diagnosis`, `care_resistance` |" in table
    )
    assert "| `data` | text | *unset* |" in table


@pytest.mark.eval  # inspect eval, in a process
@pytest.mark.parametrize(
    ("target", "arg", "name"),
    [
        ("tasks/cpb.py@cpb", "turns=true", "turns"),  # and no -T data: the parameter is reported first
        ("tasks/cpb.py@cpb_control", "judge_retries=-1", "judge_retries"),
        ("tasks/cpb.py@cpb_control", "mitigation=bogus", "mitigation"),
        ("tasks/cpb.py@cpb", "mitigation=bogus", "mitigation"),
        ("tasks/cpb.py@cpb", "category=care_resistance,grumpiness", "category"),  # -T splits the comma
    ],
)
def test_the_cli_prints_one_line_without_traceback(target, arg, name, tmp_path):
    assert_cli_refuses(target, arg, name, tmp_path)
