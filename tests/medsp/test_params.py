"""MedSP1000's task parameters: the values its task refuses and accepts beyond what every task's annotations
give (tests/test_params.py), what its body gets, and its command line's one-line refusal."""

from __future__ import annotations

from typing import Any

import pytest
from inspect_ai import Task

from bedside.tasks.medsp import medsp
from tests.task_parameters import assert_cli_refuses, assert_refused, received

BAD: list[tuple[dict[str, Any], str]] = [
    ({"scaling": "best_of_3"}, "scaling"),
    ({"bon_selector": "vote"}, "bon_selector"),
    ({"reading": "lenient"}, "reading"),
    ({"reading": ""}, "reading"),
]


@pytest.mark.parametrize(("args", "name"), BAD, ids=repr)
def test_a_bad_value_is_refused_in_one_line_naming_it(args, name):
    assert_refused(medsp, args, name)


def test_good_values_pass():
    args = {
        "max_turns": "3",
        "n": "2",
        "panel_size": 2.0,
        "parse_retries": "0",
        "judge_retries": 0,
        "judge_batch_size": "10",
        "structured_output": "no",
    }
    assert isinstance(medsp(**args), Task)
    assert isinstance(medsp(scaling="best_of_n", n=1, panel_size=1, judge_batch_size=None, max_turns=1), Task)


@pytest.mark.eval
def test_the_body_gets_the_values_as_annotated():
    assert received(medsp, {"scaling": "best_of_n", "bon_selector": "majority"})["scaling"] == "best_of_n"


@pytest.mark.eval  # inspect eval, in a process
def test_the_cli_prints_one_line_without_traceback(tmp_path):
    assert_cli_refuses("tasks/medsp.py", "n=0", "n", tmp_path)
