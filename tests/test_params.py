"""Task parameters (``-T``) are checked first thing in every task: a bad value raises
:class:`BadParameter` (one line, naming the parameter) before any data is read or model called."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import Task

from bedside.compat import PrerequisiteError
from bedside.params import BadParameter, bool_param, check, int_param
from bedside.tasks.cpb import cpb, cpb_control
from bedside.tasks.discharge import discharge
from bedside.tasks.medsp import medsp
from tests.conftest import REPO, run, store

INSPECT = str(Path(sys.executable).parent / "inspect")

TASKS = {"discharge": discharge, "medsp": medsp, "cpb": cpb, "cpb_control": cpb_control}

#: Integer parameters of each task and their smallest allowed value.
INT_PARAMS: dict[str, dict[str, int]] = {
    "discharge": {"min_turns": 0, "max_turns": 1, "max_retries": 0, "parse_retries": 0, "judge_retries": 0},
    "medsp": {
        "max_turns": 1,
        "n": 1,
        "panel_size": 1,
        "parse_retries": 0,
        "judge_retries": 0,
        "judge_batch_size": 1,
        "panel_rounds": 0,
    },
    "cpb": {"turns": 0, "parse_retries": 0, "judge_retries": 0},
    "cpb_control": {"parse_retries": 0, "judge_retries": 0},
}
BOOL_PARAMS: dict[str, list[str]] = {
    "discharge": ["cache_references", "structured_output"],
    "medsp": ["structured_output"],
    "cpb": ["continuation_mitigation"],
}

#: How ``-T name=<text>`` arrives after Inspect's YAML parsing: 'abc' and '' stay strings,
#: 3.5 is a float, true a bool, null None.
NOT_INTS: list[Any] = ["abc", "", "3.5", 3.5, True, False, None, [1], "1e3"]
NOT_BOOLS: list[Any] = ["maybe", "", 2, -1, 0.5, None, "truee", [True]]


def bad_cases() -> list[tuple[str, dict[str, Any], str]]:
    cases = []
    for task_name, params in INT_PARAMS.items():
        for name, minimum in params.items():
            cases.append((task_name, {name: minimum - 1}, name))
            cases.append((task_name, {name: str(minimum - 1)}, name))
            # judge_batch_size=None (the default) means the whole rubric in one evaluator call
            cases += [
                (task_name, {name: value}, name)
                for value in NOT_INTS
                if not (name == "judge_batch_size" and value is None)
            ]
    for task_name, names in BOOL_PARAMS.items():
        for name in names:
            # structured_output=None (the default) is "auto": structured output only where the official code uses it
            cases += [
                (task_name, {name: value}, name)
                for value in NOT_BOOLS
                if not (name == "structured_output" and value is None)
            ]
    cases += [
        ("discharge", {"max_turns": -5}, "max_turns"),
        ("discharge", {"min_turns": 20, "max_turns": 5}, "min_turns"),
        ("discharge", {"min_turns": "101"}, "min_turns"),  # above the default max_turns=100
        ("cpb", {"turns": 11}, "turns"),
        ("cpb", {"turns": "99"}, "turns"),
        ("discharge", {"persona_assignment": "stratified"}, "persona_assignment"),
        ("discharge", {"reading": "lenient"}, "reading"),
        ("discharge", {"reading": "strict"}, "reading"),  # no DischargeBench protocol has a strict reader
        ("cpb", {"reading": "loose"}, "reading"),
        ("medsp", {"reading": ""}, "reading"),
        ("discharge", {"monitor_layout": "cached"}, "monitor_layout"),
        ("discharge", {"monitor_policy": "figure6"}, "monitor_policy"),
        ("cpb", {"mitigation": "bogus"}, "mitigation"),
        ("cpb_control", {"mitigation": "bogus"}, "mitigation"),
        ("cpb_control", {"mitigation": 3}, "mitigation"),
    ]
    # the persona seed is declared int: anything that is not a whole number is refused
    cases += [("discharge", {"seed": value}, "seed") for value in NOT_INTS if value is not None]
    return cases


@pytest.mark.parametrize(
    ("task_name", "args", "name"), bad_cases(), ids=lambda x: repr(x) if isinstance(x, dict) else x
)
def test_bad_parameter_raises_one_line_naming_it_before_the_data_is_read(task_name, args, name, tmp_path):
    # the data path does not exist: the parameter check must come first
    with pytest.raises(BadParameter) as err:
        TASKS[task_name](data=str(tmp_path / "absent"), **args)
    msg = str(err.value)
    assert msg.startswith(f"Bad parameter '{name}': ") and f"got {name}=" in msg and "\n" not in msg, msg
    assert err.value.name == name
    assert isinstance(err.value, PrerequisiteError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("task_name", ["cpb", "cpb_control"])
def test_cpb_bad_parameter_reported_without_data(task_name):
    with pytest.raises(BadParameter, match="'parse_retries'"):
        TASKS[task_name](parse_retries=-1)


def test_discharge_good_values_pass(tmp_path):
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


def test_discharge_string_values_reach_the_run_as_ints(tmp_path):
    """``-T max_turns=4`` may arrive as a string: the converted int is what the encounter uses."""
    log = run(discharge(min_turns="1", max_turns="4", cache_references="no"), log_dir=tmp_path, limit=1)
    [sample] = log.samples
    assert store(sample)["end_reason"] == "max_turns" and len(store(sample)["history"]) == 4


def test_medsp_good_values_pass():
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


def test_cpb_good_values_pass(tmp_path):
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb-bench_data"))
    assert isinstance(cpb(data=data, turns="2", parse_retries="0", judge_retries=1), Task)
    assert isinstance(cpb(data=data, turns=0), Task)
    assert isinstance(cpb(data=data, turns=10), Task)
    assert isinstance(cpb_control(data=data, parse_retries=0, judge_retries="5"), Task)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, 5), ("5", 5), (" -2 ", -2), ("+3", 3), (7.0, 7), (0, 0)],
)
def test_int_param_accepts(value, expected):
    assert int_param("x", value) == expected


@pytest.mark.parametrize("value", NOT_INTS + ["٣", "1_000", "0x10"])
def test_int_param_rejects(value):
    with pytest.raises(BadParameter, match="'x': expected a whole number"):
        int_param("x", value)


def test_int_param_bounds():
    assert int_param("x", 3, minimum=3, maximum=3) == 3
    with pytest.raises(BadParameter, match="'x': must be at least 3, got x=2"):
        int_param("x", 2, minimum=3)
    with pytest.raises(BadParameter, match="'x': must be at most 3, got x=4"):
        int_param("x", "4", maximum=3)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("TRUE", True),
        ("Yes", True),
        ("1", True),
        (1, True),
        ("false", False),
        ("No", False),
        (" 0 ", False),
        (0, False),
    ],
)
def test_bool_param_accepts(value, expected):
    assert bool_param("b", value) is expected


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_bool_param_rejects(value):
    with pytest.raises(BadParameter, match="'b': expected true/false"):
        bool_param("b", value)


def test_check_and_long_values_stay_on_one_line():
    check(True, "x", "never raised")
    with pytest.raises(BadParameter, match="^Bad parameter 'x': broken$"):
        check(False, "x", "broken")
    with pytest.raises(BadParameter) as err:
        int_param("x", "a\nb" * 100)
    assert "\n" not in str(err.value) and len(str(err.value)) < 120


def test_bad_parameter_pickles():
    import pickle

    err = pickle.loads(pickle.dumps(BadParameter("n", "must be at least 1, got n=0")))
    assert str(err) == "Bad parameter 'n': must be at least 1, got n=0" and err.name == "n"


def inspect_eval(target: str, *args: str, log_dir: Path) -> subprocess.CompletedProcess:
    # a wide console: Inspect prints the message through rich, which wraps at 80 columns off a tty
    env = {**os.environ, "COLUMNS": "200", "INSPECT_LOG_DIR": str(log_dir)}
    command = [INSPECT, "eval", target, "--model", "bedside/scripted", *args, "--limit", "1", "--log-dir", str(log_dir)]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


@pytest.mark.parametrize(
    ("target", "arg", "name"),
    [
        ("tasks/discharge.py", "max_turns=0", "max_turns"),
        ("tasks/discharge.py", "max_turns=abc", "max_turns"),
        ("tasks/discharge.py", "cache_references=maybe", "cache_references"),
        ("tasks/medsp.py", "n=0", "n"),
        ("tasks/cpb.py@cpb", "turns=true", "turns"),  # and no -T data: the parameter is reported first
        ("tasks/cpb.py@cpb_control", "judge_retries=-1", "judge_retries"),
        ("tasks/discharge.py", "seed=abc", "seed"),
        ("tasks/cpb.py@cpb_control", "mitigation=bogus", "mitigation"),
        ("tasks/cpb.py@cpb", "mitigation=bogus", "mitigation"),
    ],
)
def test_cli_prints_one_line_without_traceback(target, arg, name, tmp_path):
    log_dir = tmp_path / "logs"
    proc = inspect_eval(target, "-T", arg, log_dir=log_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-2000:]
    assert "Traceback" not in output, output[-2000:]
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines == [line for line in lines if "Bad parameter" in line], output[-2000:]
    [line] = lines
    assert line.startswith(f"Bad parameter '{name}':") and f"got {name}=" in line
    assert not list(log_dir.glob("*.eval"))  # no eval ran, so no model was called
