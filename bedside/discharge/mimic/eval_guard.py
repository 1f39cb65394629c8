"""The data-use guard of a DischargeBench run on MIMIC-derived cases: before any model call, every
role the run binds (the educator under test, patient, monitor, grader, whose calls include the safety
judge) is checked like the extraction's model (:func:`bedside.discharge.mimic.data_use.endpoint_problem`).
A role that is not local is refused in one line naming the role and its model, unless the user declares
``-T zero_retention=true`` (recorded in the log's task arguments and metadata, and per sample).

Cases carry their provenance (``DischargeCase.provenance``; ``bedside build-cases`` writes
:data:`~bedside.discharge.mimic.data_use.MIMIC_PROVENANCE`); the synthetic demo cases have none and run
anywhere.

Checked twice: while Inspect builds the task (``inspect eval``, ``eval()`` of the task by name: the models
are known, nothing is read past the case file), and per sample in the set-up (:func:`data_use_check`), so a
``Task`` built in Python before ``eval()`` refuses too, before its first model call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from inspect_ai.log import transcript
from inspect_ai.model import Model, get_model, model_roles
from inspect_ai.solver import Generate, TaskState, solver

from bedside.discharge.mimic.data_use import MIMIC_PROVENANCE, DataUseRefused, endpoint_problem, model_identity


def restricted(provenances: Iterable[str | None]) -> bool:
    """Whether any case comes from data under the PhysioNet data-use agreement."""
    return any(p == MIMIC_PROVENANCE for p in provenances)


def role_models(subject: str, roles: Sequence[str]) -> dict[str, Model]:
    """The model every role of the run will call: the bound one, else the model under test."""
    under_test = get_model()
    bound = model_roles()
    models = {subject: under_test}
    for role in roles:
        model = bound.get(role, under_test)
        models[role] = model[0] if isinstance(model, list) else model
    return models


def check_role_models(models: dict[str, Model], zero_retention: bool) -> None:
    """Raise :class:`DataUseRefused` (one line: role, model, the fix) for the first role that is not local."""
    for role, model in models.items():
        name, base_url = model_identity(model)
        problem = endpoint_problem(name, base_url, zero_retention)
        if problem:
            raise DataUseRefused(f"Model role {role}: {problem}")


def check_before_eval(subject: str, roles: Sequence[str], zero_retention: bool) -> None:
    """The check while Inspect builds the task (the eval's model and roles are known then)."""
    from bedside.compat import active_model, resolving_eval_tasks

    if resolving_eval_tasks() and active_model() is not None:
        check_role_models(role_models(subject, roles), zero_retention)


@solver
def data_use_check(subject: str, roles: Sequence[str], zero_retention: bool = False):
    """Per-sample set-up on MIMIC-derived cases: refuses before the sample's first model call."""
    roles = tuple(roles)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        models = role_models(subject, roles)
        check_role_models(models, zero_retention)  # raises: the sample fails, nothing sent
        transcript().info(
            {
                "data_use": "allowed",
                "provenance": MIMIC_PROVENANCE,
                "zero_retention": zero_retention,
                "roles": {role: dict(zip(("model", "base_url"), model_identity(m))) for role, m in models.items()},
            },
            source="data_use",
        )
        return state

    return solve


def guard(dataset: Iterable, subject: str, roles: Sequence[str], zero_retention: bool) -> list:
    """The set-up solvers a DischargeBench run needs for its ``dataset``: none for cases without a
    restricted provenance; else the run is checked now (when the models are known) and per sample."""
    if not restricted(((s.metadata or {}).get("case") or {}).get("provenance") for s in dataset):
        return []
    check_before_eval(subject, roles, zero_retention)
    return [data_use_check(subject, roles, zero_retention)]
