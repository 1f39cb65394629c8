"""Task parameters (``-T``) are checked against their annotations before every task's body runs: a bad
value raises :class:`BadParameter` (one line, naming the parameter) before any data is read or model
called. The docs' parameter tables are the ones generated from the signatures and docstrings."""

from __future__ import annotations

import importlib
import inspect
import subprocess
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from bedside import params
from bedside.params import BadParameter, ParameterType, check, validate_parameters
from tests.conftest import REPO
from tests.task_parameters import NOT_BOOLS, NOT_INTS, assert_refused

#: every registered benchmark's tasks (each benchmark's own cases: tests/<b>/test_params.py)
TASKS = params.task_functions()


def bad_cases() -> list[tuple[str, dict[str, Any], str]]:
    """(task, arguments, the parameter named) for every parameter of every registered task, from its annotation:
    an integer below its minimum or above its maximum (as a number and as text) or no whole number, a boolean
    that is none, a value outside its choices (a list with one such element, for a list of choices); ``None``
    only where the parameter is not optional."""
    cases = []
    for task_name, function in TASKS.items():
        for name, kind in params.parameter_types(function).items():
            if kind.kind == "integer":
                bounds = [kind.minimum - 1] if kind.minimum is not None else []
                bounds += [kind.maximum + 1] if kind.maximum is not None else []
                cases += [(task_name, {name: v}, name) for b in bounds for v in (b, str(b))]
                values = NOT_INTS
            elif kind.kind == "boolean":
                values = NOT_BOOLS
            elif kind.kind == "choice":
                values = ["not-a-choice"]
            elif kind.kind == "choices":
                values = ["not-a-choice", [str(kind.choices[0]), "not-a-choice"]]
            else:
                continue
            cases += [(task_name, {name: v}, name) for v in values if not (v is None and kind.optional)]
    return cases


@pytest.mark.parametrize(
    ("task_name", "args", "name"), bad_cases(), ids=lambda x: repr(x) if isinstance(x, dict) else x
)
def test_bad_parameter_raises_one_line_naming_it_before_the_data_is_read(task_name, args, name):
    # every required parameter and ``data`` name no readable file: the parameter check must come first
    assert_refused(TASKS[task_name], args, name)


def test_the_derived_cases_cover_every_kind_of_parameter():
    """The cases above are read from the annotations (so a new benchmark's tasks are checked too): each kind
    is there, and a bound of an Annotated int is read."""
    kinds = {params.parameter_types(TASKS[t])[n].kind for t, args, n in bad_cases()}
    assert kinds == {"integer", "boolean", "choice", "choices"}
    assert all(params.parameter_types(f) for f in TASKS.values())
    bounded = [(t, n, k) for t, f in TASKS.items() for n, k in params.parameter_types(f).items() if k.maximum]
    assert bounded and all((t, {n: k.maximum + 1}, n) in bad_cases() for t, n, k in bounded)


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


# --- the parameter tables of the docs ------------------------------------------------------------
def test_the_registry_finds_every_task():
    """Every task of every registered benchmark, and every task function of the task modules."""
    from bedside import benchmarks

    assert set(TASKS) == {t for b in benchmarks.all_benchmarks() for t in b.task_functions}
    assert {t for b in benchmarks.all_benchmarks() for t in b.tasks} <= set(TASKS)


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
        "simulator_check": params.SimulatorCheck,
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


def test_the_docs_tables_are_the_generated_ones():
    """Every ``<!-- parameters: TASK -->`` table of the tracked Markdown is the one the code generates,
    and every task with parameters has one (fix: ``python -m bedside.params --write``)."""
    assert params.problems(REPO) == []


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


#: MedSP's solver takes every argument from its task (none has a default of its own): valid values of all of them
MEDSP_SOLVER = dict(
    max_turns=12,
    scaling="none",
    n=5,
    panel_size=5,
    panel_rounds=1,
    bon_selector="self_critic",
    parse_retries=2,
    prompts=None,
)


@pytest.mark.eval
@pytest.mark.parametrize(
    ("make", "args", "name"),
    [
        ("bedside.solvers.medsp:medsp_encounter", {**MEDSP_SOLVER, "scaling": "best_of_3"}, "scaling"),
        ("bedside.solvers.medsp:medsp_encounter", {**MEDSP_SOLVER, "n": 0}, "n"),
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
