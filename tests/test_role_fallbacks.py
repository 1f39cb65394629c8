"""Role fallbacks are counted the same way in every task, the judge (grader) included."""

from __future__ import annotations

import pytest
from inspect_ai.model import get_model

from bedside.roles import UnknownRole, check_roles
from bedside.tasks.cpb import cpb, cpb_control
from bedside.tasks.discharge import discharge
from bedside.tasks.medsp import medsp
from tests.conftest import run


def fallbacks(log):
    found = []
    for sample in log.samples:
        for score in sample.scores.values():
            if isinstance(score.value, dict) and "role_fallbacks" in score.value:
                found.append((score.value["role_fallbacks"], sorted(score.metadata["role_fallbacks"])))
    return found


@pytest.mark.eval
def test_every_task_counts_unbound_roles_including_the_grader(tmp_path):
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb"))
    cases = [
        (discharge(), ["grader", "monitor", "patient"]),
        (medsp(), ["environment", "grader", "patient"]),
        (cpb(data=data), ["grader"]),
        (cpb(data=data, turns=2), ["grader", "patient"]),
        (cpb_control(data=data), ["grader"]),
    ]
    for i, (task, roles) in enumerate(cases):
        log = run(task, roles={}, log_dir=tmp_path / str(i), limit=1)
        found = fallbacks(log)
        assert found, task.name
        assert all(count == len(roles) and names == roles for count, names in found), (task.name, found)


# --- role names the task does not have --------------------------------------------------------------
@pytest.mark.parametrize(
    ("bound", "message"),
    [
        (
            "judge",
            "Unknown model role for task discharge (its roles are patient, monitor, grader): "
            "'judge' is not one of them; use --model-role grader=bedside/scripted.",
        ),
        ("patiant", "'patiant' is not one of them; use --model-role patient=bedside/scripted."),
        ("educator", "'educator' is the educator, the model under test: pass it as --model bedside/scripted."),
        (
            "critic",
            "'critic' is not one of them; bind one of them (e.g. --model-role patient=bedside/scripted) or drop it.",
        ),
    ],
)
def test_a_role_the_task_does_not_have_is_refused_in_one_line(bound, message, monkeypatch):
    from bedside import compat, roles

    monkeypatch.setattr(compat, "resolving_eval_tasks", lambda: True)  # as while Inspect builds the task
    monkeypatch.setattr(roles, "model_roles", lambda: {bound: get_model("bedside/scripted")})
    with pytest.raises(UnknownRole) as raised:
        check_roles("discharge", ("patient", "monitor", "grader"), "educator")
    assert str(raised.value).endswith(message) and "\n" not in str(raised.value)
    monkeypatch.setattr(roles, "model_roles", lambda: {"grader": get_model("bedside/scripted")})
    check_roles("discharge", ("patient", "monitor", "grader"), "educator")  # a role it has: no error


def test_roles_of_other_benchmarks_pass_and_a_task_without_roles_refuses_the_others(monkeypatch):
    from bedside import compat, roles

    monkeypatch.setattr(compat, "resolving_eval_tasks", lambda: True)
    scripted = get_model("bedside/scripted")
    monkeypatch.setattr(roles, "model_roles", lambda: {"monitor": scripted, "environment": scripted})
    check_roles("cpb", ("patient", "grader"), "doctor")  # an eval-set of several tasks binds them all
    check_roles("build_discharge_cases", ())
    monkeypatch.setattr(roles, "model_roles", lambda: {"extractor": scripted})
    with pytest.raises(UnknownRole, match=r"build_discharge_cases \(it has no model roles\): 'extractor' is not used"):
        check_roles("build_discharge_cases", ())


def test_roles_left_in_the_context_by_an_earlier_eval_are_not_checked(monkeypatch):
    """Inspect leaves the last eval's (or score()'s) roles set: a task built by hand afterwards is not
    checked against them (only a task Inspect builds for an eval is)."""
    from bedside import roles

    monkeypatch.setattr(roles, "model_roles", lambda: {"judge": get_model("bedside/scripted")})
    check_roles("discharge", ("patient", "monitor", "grader"), "educator")


@pytest.mark.eval
@pytest.mark.parametrize(
    ("task", "args", "roles"),
    [
        ("bedside/discharge", {}, "patient, monitor, grader"),
        ("bedside/discharge_safety_probe", {}, "patient, monitor, grader"),
        ("bedside/medsp", {}, "patient, environment, grader"),
        ("bedside/cpb", {"data": "unread"}, "patient, grader"),
        ("bedside/cpb_control", {"data": "unread"}, "patient, grader"),
    ],
)
def test_every_task_refuses_an_unknown_role_before_any_model_call(task, args, roles, tmp_path):
    from inspect_ai import eval

    scripted = get_model("bedside/scripted", memoize=False)
    with pytest.raises(UnknownRole, match=rf"task {task.split('/')[1]} \(its roles are {roles}\): 'judge'"):
        eval(
            task, task_args=args, model=scripted, model_roles={"judge": scripted}, log_dir=str(tmp_path), display="none"
        )
    assert not list(tmp_path.glob("*.eval"))  # no eval ran


@pytest.mark.eval
def test_the_cli_prints_the_unknown_role_in_one_line_without_traceback(tmp_path):
    from tests.test_params import inspect_eval

    proc = inspect_eval("tasks/discharge.py", "--model-role", "judge=bedside/scripted", log_dir=tmp_path / "logs")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in output, output[-2000:]
    [line] = [line for line in output.splitlines() if line.strip()]
    assert line.startswith("Unknown model role for task discharge") and "--model-role grader=bedside/scripted" in line
