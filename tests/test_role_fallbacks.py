"""Role fallbacks are counted the same way in every task, the judge (grader) included."""

from __future__ import annotations

import pytest
from inspect_ai.model import get_model

from bedside import benchmarks, params
from bedside.roles import UnknownRole, check_roles
from tests.benchmarks import tiny_runs, unread_args
from tests.conftest import run


def fallbacks(log):
    found = []
    for sample in log.samples:
        for score in sample.scores.values():
            if isinstance(score.value, dict) and "role_fallbacks" in score.value:
                found.append((score.value["role_fallbacks"], sorted(score.metadata["role_fallbacks"])))
    return found


@pytest.mark.eval
@pytest.mark.parametrize("task_name", sorted(tiny_runs()))
def test_every_task_counts_unbound_roles_including_the_grader(task_name, tmp_path):
    """Each task's tiny run (tests/<b>/tiny.py) with no role bound: every scorer that counts fallbacks counts
    the roles the run declares, the grader included; a run that declares none has no scorer counting any."""
    tiny = tiny_runs()[task_name](tmp_path)
    log = run(params.task_functions()[task_name](**tiny.args), roles={}, log_dir=tmp_path / "logs", limit=1)
    found = fallbacks(log)
    expected = sorted(tiny.roles)
    assert bool(found) == bool(expected), (task_name, found)
    assert all(count == len(expected) and names == expected for count, names in found), (task_name, found)


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
@pytest.mark.parametrize("task_name", sorted(params.task_functions()))
def test_every_task_refuses_an_unknown_role_before_any_model_call(task_name, tmp_path):
    """A benchmark's task names the benchmark's roles; a task that prepares its data has none."""
    from inspect_ai import eval

    benchmark = benchmarks.of_task(task_name, preparation=True)
    roles = f"its roles are {', '.join(benchmark.roles)}" if benchmark.owns(task_name) else "it has no model roles"
    args = unread_args(params.task_functions()[task_name])
    scripted = get_model("bedside/scripted", memoize=False)
    with pytest.raises(UnknownRole, match=rf"task {task_name} \({roles}\): 'judge'"):
        eval(
            f"bedside/{task_name}",
            task_args=args,
            model=scripted,
            model_roles={"judge": scripted},
            log_dir=str(tmp_path),
            display="none",
        )
    assert not list(tmp_path.glob("*.eval"))  # no eval ran
