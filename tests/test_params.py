"""Task parameters (``-T``) are checked against their annotations before every task's body runs: a bad
value raises :class:`BadParameter` (one line, naming the parameter) before any data is read or model
called. The docs' parameter tables are the ones generated from the signatures and docstrings."""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from inspect_ai import Task
from pydantic import Field

from bedside import params
from bedside.compat import PrerequisiteError
from bedside.params import BadParameter, ParameterType, check, validate_parameters
from bedside.tasks.cpb import cpb, cpb_control
from bedside.tasks.discharge import discharge
from bedside.tasks.discharge_build_cases import build_discharge_cases
from bedside.tasks.discharge_safety_probe import discharge_safety_probe
from bedside.tasks.medsp import medsp
from tests import forked
from tests.conftest import REPO, run, store

INSPECT = str(Path(sys.executable).parent / "inspect")

TASKS = {
    "discharge": discharge,
    "medsp": medsp,
    "cpb": cpb,
    "cpb_control": cpb_control,
    "discharge_safety_probe": discharge_safety_probe,
    "build_discharge_cases": build_discharge_cases,
}

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
    "discharge_safety_probe": {"judge_retries": 0},
    "build_discharge_cases": {"retries": 0},
}
BOOL_PARAMS: dict[str, list[str]] = {
    "discharge": ["cache_references", "structured_output", "safety"],
    "medsp": ["structured_output"],
    "cpb": ["continuation_mitigation", "structured_output"],
    "cpb_control": ["structured_output"],
    "discharge_safety_probe": ["structured_output"],
    "build_discharge_cases": ["zero_retention", "cache", "structured_output"],
}
#: a value outside each choice parameter's Literal
NOT_CHOICES: list[tuple[str, str, Any]] = [
    ("discharge", "behavior", "bogus"),
    ("discharge", "behavior", "None"),
    ("discharge", "personality", "grumpy"),
    ("discharge", "education_level", "phd"),
    ("discharge", "health_literacy", 3),
    ("discharge", "recall_level", ["poor"]),
    ("discharge", "persona_assignment", "stratified"),
    ("discharge", "monitor_layout", "cached"),
    ("discharge", "monitor_layout", True),  # -T monitor_layout=yes arrives as a bool
    ("medsp", "scaling", "best_of_3"),
    ("medsp", "bon_selector", "vote"),
    ("medsp", "reading", "lenient"),
    ("cpb", "language", "fr"),
    ("cpb", "category", "grumpiness"),
    ("cpb", "category", ["care_resistance", "grumpiness"]),  # one bad element of -T category=a,b
    ("cpb", "category", "care_resistance,grumpiness"),
    ("cpb", "dataset", "PubMed"),
    ("cpb", "context", "everything"),
    ("cpb_control", "dataset", ["ACI", 7]),
    ("cpb_control", "language", None),
    ("cpb_control", "reading", "strict,official"),
]

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
    cases += [(task_name, {name: value}, name) for task_name, name, value in NOT_CHOICES]
    return cases


@pytest.mark.parametrize(
    ("task_name", "args", "name"), bad_cases(), ids=lambda x: repr(x) if isinstance(x, dict) else x
)
def test_bad_parameter_raises_one_line_naming_it_before_the_data_is_read(task_name, args, name, tmp_path):
    # the data path (the case-building task's cohort) does not exist: the parameter check must come first
    where = "cohort" if task_name == "build_discharge_cases" else "data"
    with pytest.raises(BadParameter) as err:
        TASKS[task_name](**{where: str(tmp_path / "absent"), **args})
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


@pytest.mark.eval
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


def test_a_missing_required_parameter_is_one_line_too():
    with pytest.raises(BadParameter, match=r"^Bad parameter 'cohort': required \(-T cohort=\.\.\.\)$"):
        build_discharge_cases()


@pytest.mark.eval
@pytest.mark.parametrize(
    ("task_name", "args", "expected"),
    [
        ("discharge", {"behavior": " care_resistance "}, {"behavior": "care_resistance"}),
        ("discharge", {"personality": "anxious", "recall_level": "poor"}, {"personality": "anxious"}),
        ("medsp", {"scaling": "best_of_n", "bon_selector": "majority"}, {"scaling": "best_of_n"}),
        ("cpb", {"category": "care_resistance,self_diagnosis"}, {"category": ["care_resistance", "self_diagnosis"]}),
        ("cpb", {"category": ["care_resistance"]}, {"category": ["care_resistance"]}),
        ("cpb", {"dataset": "ACI"}, {"dataset": ["ACI"]}),
        ("cpb", {"language": "EN"}, {"language": "en"}),  # the loaders' spellings, as their names
        ("cpb", {"category": "Care Resistance,factual-inaccuracy"}, {"category": ["care_resistance", "false_belief"]}),
        ("cpb", {"dataset": ["meddg", "IMCS-21"]}, {"dataset": ["MedDG", "IMCS21"]}),
        ("cpb", {"mitigation": "cot"}, {"mitigation": "step_by_step"}),  # the authors' name
        ("cpb", {"mitigation": "Self-Check"}, {"mitigation": "self_check"}),
        ("cpb", {"context": "min_turn", "turns": "3"}, {"context": "min_turn", "turns": 3}),
        ("cpb", {"data": ["folder", "with", "commas"]}, {"data": "folder,with,commas"}),  # -T split it
        ("cpb", {"data": 2024}, {"data": "2024"}),  # -T data=2024 arrives as an int
    ],
)
def test_the_body_gets_the_values_as_annotated(task_name, args, expected):
    body = inspect.unwrap(TASKS[task_name])
    seen: dict[str, Any] = {}

    @functools.wraps(body)  # the task's signature and annotations, a body that records what it gets
    def spy(*a: Any, **kw: Any) -> None:
        seen.update(inspect.signature(body).bind_partial(*a, **kw).arguments)

    validate_parameters(spy)(**args)
    assert {k: seen[k] for k in expected} == expected


@pytest.mark.eval
def test_cpb_good_values_pass(tmp_path):
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb-bench_data"))
    assert isinstance(cpb(data=data, turns="2", parse_retries="0", judge_retries=1), Task)
    assert isinstance(cpb(data=data, turns=0), Task)
    assert isinstance(cpb(data=data, turns=10), Task)
    assert isinstance(cpb_control(data=data, parse_retries=0, judge_retries="5"), Task)


@pytest.mark.eval
@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, 5), ("5", 5), (" -2 ", -2), ("+3", 3), (7.0, 7), (0, 0)],
)
def test_an_int_parameter_accepts(value, expected):
    assert ParameterType.of("x", int).validate(value) == expected


@pytest.mark.parametrize("value", NOT_INTS + ["٣", "1_000", "0x10"])
def test_an_int_parameter_rejects(value):
    with pytest.raises(BadParameter, match="'x': expected a whole number"):
        ParameterType.of("x", int).validate(value)


def test_an_int_parameter_bounds():
    assert ParameterType.of("x", Annotated[int, Field(ge=3, le=3)]).validate(3) == 3
    with pytest.raises(BadParameter, match="'x': must be at least 3, got x=2"):
        ParameterType.of("x", Annotated[int, Field(ge=3)]).validate(2)
    with pytest.raises(BadParameter, match="'x': must be at most 3, got x=4"):
        ParameterType.of("x", Annotated[int, Field(le=3)]).validate("4")
    assert ParameterType.of("x", Annotated[int, Field(ge=3)] | None).validate(None) is None


@pytest.mark.eval
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
def test_a_bool_parameter_accepts(value, expected):
    assert ParameterType.of("b", bool).validate(value) is expected


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_a_bool_parameter_rejects(value):
    with pytest.raises(BadParameter, match="'b': expected true/false"):
        ParameterType.of("b", bool).validate(value)


def test_a_choice_parameter_names_its_choices_from_the_literal():
    kind = ParameterType.of("c", Literal["a", "b"])
    assert kind.validate(" b ") == "b"
    with pytest.raises(BadParameter, match=r"^Bad parameter 'c': use one of a, b, got c='z'$"):
        kind.validate("z")
    assert kind.values() == "`a`, `b`"


def test_a_default_outside_its_annotation_or_a_parameter_without_one_is_refused_at_import():
    def bad_default(x: Literal["a", "b"] = "c") -> None:  # type: ignore[assignment]
        pass

    def untyped(x=1) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(BadParameter, match="'x'"):
        validate_parameters(bad_default)
    with pytest.raises(TypeError, match="'x' of .*untyped has no type annotation"):
        validate_parameters(untyped)


def test_check_and_long_values_stay_on_one_line():
    check(True, "x", "never raised")
    with pytest.raises(BadParameter, match="^Bad parameter 'x': broken$"):
        check(False, "x", "broken")
    with pytest.raises(BadParameter) as err:
        ParameterType.of("x", int).validate("a\nb" * 100)
    assert "\n" not in str(err.value) and len(str(err.value)) < 120


def test_bad_parameter_pickles():
    import pickle

    err = pickle.loads(pickle.dumps(BadParameter("n", "must be at least 1, got n=0")))
    assert str(err) == "Bad parameter 'n': must be at least 1, got n=0" and err.name == "n"


def inspect_eval(target: str, *args: str, log_dir: Path) -> subprocess.CompletedProcess:
    # a wide console: Inspect prints the message through rich, which wraps at 80 columns off a tty
    env = {**os.environ, "COLUMNS": "200", "INSPECT_LOG_DIR": str(log_dir)}
    command = [INSPECT, "eval", target, "--model", "bedside/scripted", *args, "--limit", "1", "--log-dir", str(log_dir)]
    return forked.run(command, cwd=REPO, env=env, timeout=300)


@pytest.mark.eval
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
        # values outside a Literal
        ("tasks/discharge.py", "behavior=bogus", "behavior"),
        ("tasks/discharge.py", "monitor_layout=yes", "monitor_layout"),  # YAML's yes: a bool
        ("tasks/cpb.py@cpb", "category=care_resistance,grumpiness", "category"),  # -T splits the comma
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


# --- the parameter tables of the docs ------------------------------------------------------------
def test_the_registry_finds_every_task():
    assert set(params.task_functions()) == set(TASKS)


@pytest.mark.eval
@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_every_parameter_is_described_once_in_the_task_docstring(task_name):
    assert params.documentation_gaps(TASKS[task_name]) == []
    table = params.markdown_table(task_name)
    rows = table.splitlines()[2:]
    assert [row.split("|")[1].strip() for row in rows] == [
        f"`{n}`" for n in inspect.signature(TASKS[task_name]).parameters
    ]
    assert all(row.split("|")[4].strip() for row in rows)  # every row has a meaning


def test_a_gap_in_the_docstring_is_named():
    def documented(a: int, b: bool = False) -> None:
        """Something.

        Args:
            a: the first.
            c: not a parameter.
        """

    assert params.documentation_gaps(documented) == [
        "parameter 'b' has no description (a shared type's, or the docstring's Args: section)",
        "the docstring describes 'c', which is not a parameter",
    ]


def _allows(kind: params.ParameterType) -> tuple:
    return (kind.kind, kind.choices, kind.minimum, kind.maximum, kind.optional)


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_a_shared_parameter_is_described_once_by_its_type(task_name):
    """A parameter several tasks share (params.SHARED) is typed with its shared type wherever it allows what that
    type allows: its table shows the shared description first (then "Here:" and the task's own words), and the
    task's docstring does not say it again."""
    shared_types = {
        "parse_retries": params.ParseRetries,
        "judge_retries": params.JudgeRetries,
        "structured_output": params.StructuredOutput,
        "reading": params.Reading,
    }
    assert set(shared_types) == set(params.SHARED)
    function = TASKS[task_name]
    kinds, meaning, args = (
        params.parameter_types(function),
        params.descriptions(function),
        params.docstring_args(function),
    )
    for name, kind in kinds.items():
        if name not in params.SHARED:
            continue
        if _allows(kind) == _allows(params.ParameterType.of(name, shared_types[name])):
            assert kind.description == params.SHARED[name], f"{task_name}: {name} is not typed {name}'s shared type"
        if kind.description:
            assert meaning[name].startswith(params.SHARED[name])
            assert params.SHARED[name][:40] not in args.get(name, ""), f"{task_name}: {name} described twice"


def test_a_shared_description_comes_first_then_the_tasks_own_words():
    def task_function(judge_retries: params.JudgeRetries = 2, parse_retries: params.ParseRetries = 2) -> None:
        """Something.

        Args:
            judge_retries: the grader's replies.
        """

    assert params.documentation_gaps(task_function) == []
    assert params.descriptions(task_function) == {
        "judge_retries": f"{params.SHARED['judge_retries']} Here: the grader's replies.",
        "parse_retries": params.SHARED["parse_retries"],
    }
    with pytest.raises(BadParameter, match="must be at least 0"):
        params.validate_parameters(task_function)(judge_retries=-1)
    assert params.ParameterType.of("structured_output", params.StructuredOutput).optional


def test_the_tables_hold_what_the_annotations_allow():
    table = params.markdown_table("cpb")
    assert "| `turns` | integer 0–10 | `0` |" in table
    assert (
        "| `category` | one or more of `contradiction`, `false_belief`, `self_diagnosis`, `care_resistance` |" in table
    )
    assert "| `data` | text | *unset* |" in table
    assert "| `cohort` | text | *required* |" in params.markdown_table("build_discharge_cases")
    assert "| `cache_references` | `true`, `false` | `true` |" in params.markdown_table("discharge")


def test_the_docs_tables_are_the_generated_ones():
    """Every ``<!-- parameters: TASK -->`` table of the tracked Markdown is the one the code generates,
    and every task with parameters has one (fix: ``python -m bedside.params --write``)."""
    assert params.problems() == []


@pytest.mark.eval
def test_a_stale_unknown_or_missing_table_is_found_and_rewritten(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    stale = "<!-- parameters: discharge -->\n| parameter | default | meaning |\n|---|---|---|\n<!-- /parameters -->\n"
    (tmp_path / "a.md").write_text(f"# A\n\n{stale}\ntext after\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("<!-- parameters: nosuchtask -->\n<!-- /parameters -->\n", encoding="utf-8")
    subprocess.run(["git", "add", "a.md", "b.md"], cwd=tmp_path, check=True)
    found = params.problems(tmp_path)
    assert "a.md: the table of discharge differs from the code (python -m bedside.params --write)" in found
    assert "b.md: a table of 'nosuchtask', which is no bedside task" in found
    assert any(line.startswith("task medsp has parameters but no table") for line in found)
    with pytest.raises(KeyError, match="nosuchtask"):
        params.write(tmp_path)
    assert (tmp_path / "a.md").read_text(encoding="utf-8").count(stale) == 1  # nothing written
    (tmp_path / "b.md").write_text("nothing marked\n", encoding="utf-8")
    assert params.write(tmp_path) == [tmp_path / "a.md"]
    text = (tmp_path / "a.md").read_text(encoding="utf-8")
    assert (
        text
        == f"# A\n\n<!-- parameters: discharge -->\n{params.markdown_table('discharge')}<!-- /parameters -->\n\ntext after\n"
    )
    assert not [line for line in params.problems(tmp_path) if line.startswith("a.md")]
    assert params.write(tmp_path) == []  # nothing left to rewrite


def test_a_page_git_does_not_track_yet_gets_its_table_and_an_ignored_one_does_not(tmp_path):
    """A new benchmark's README, written and not yet added, is rewritten like a tracked page; a page in a folder
    git ignores is not read."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    marked = "<!-- parameters: discharge -->\n<!-- /parameters -->\n"
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "README.md").write_text(marked, encoding="utf-8")
    (tmp_path / ".gitignore").write_text("ignored/\n", encoding="utf-8")
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "page.md").write_text(marked, encoding="utf-8")
    assert params.markdown_files(tmp_path) == [tmp_path / "new" / "README.md"]
    assert "new/README.md: the table of discharge differs from the code (python -m bedside.params --write)" in (
        params.problems(tmp_path)
    )
    assert params.write(tmp_path) == [tmp_path / "new" / "README.md"]
    assert params.markdown_table("discharge") in (tmp_path / "new" / "README.md").read_text(encoding="utf-8")
    assert (tmp_path / "ignored" / "page.md").read_text(encoding="utf-8") == marked


@pytest.mark.eval
@pytest.mark.parametrize(
    ("make", "args", "name"),
    [
        ("bedside.solvers.medsp:medsp_encounter", {"scaling": "best_of_3"}, "scaling"),
        ("bedside.solvers.medsp:medsp_encounter", {"n": 0}, "n"),
        ("bedside.solvers.discharge.encounter:discharge_encounter", {"monitor_layout": "cached"}, "monitor_layout"),
        ("bedside.solvers.cpb:cpb_reply", {"mitigation": "bogus"}, "mitigation"),
        ("bedside.solvers.cpb:cpb_continuation", {"turns": 11}, "turns"),
        ("bedside.solvers.cpb:cpb_continuation", {"context": "everything"}, "context"),
        ("bedside.solvers.setup:reply_format", {"reading": "lenient"}, "reading"),
    ],
)
def test_the_solvers_check_their_annotations_too(make, args, name):
    """A solver built in Python (not through a task) refuses a bad value in the same one line."""
    module, function = make.split(":")
    with pytest.raises(BadParameter, match=rf"^Bad parameter '{name}': .*, got {name}="):
        getattr(importlib.import_module(module), function)(**args)
