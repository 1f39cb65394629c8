"""Model roles (``--model-role patient=... monitor=... grader=...``) with visible fallback, and
role names the task does not have refused.

Inspect silently gives the model under test when a role is not bound. Results of such a run are
not comparable across models (the educator would also play the patient, or grade itself), so
:func:`role_model` records the fallback: a warning in the console and the eval log (once per role
and process), and an ``INFO`` event in the sample transcript. Callers also keep the list in the
sample store so that scorers and reports can flag it.

Inspect equally ignores, silently, a ``--model-role`` whose name no solver or scorer asks for
(``--model-role judge=...`` where the judge is ``grader``): the role it was meant for then falls back
to the model under test. :func:`check_roles` refuses a name that is none of bedside's roles when the
task is built, before any model call, in one line that names it and the fix.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Sequence
from copy import copy

from inspect_ai.log import transcript
from inspect_ai.model import GenerateConfig, Model, get_model, model_roles

from bedside import compat
from bedside.benchmarks import all_benchmarks
from bedside.params import SetupError

logger = logging.getLogger(__name__)

_warned: set[str] = set()


def role_is_bound(role: str) -> bool:
    return role in model_roles()


#: per-attempt limits Inspect gives only to the model under test; a role model that sets none of its
#: own inherits the eval's (``--attempt-timeout``), so a stalled patient, monitor or judge call is cut
#: off like the educator's instead of waiting for the provider's own timeout
INHERITED = ("attempt_timeout",)


def role_model(role: str, config: GenerateConfig | None = None) -> tuple[Model, bool]:
    """The model bound to ``role`` and whether it fell back to the model under test."""
    bound = role_is_bound(role)
    model = get_model(role=role)
    several = model_roles().get(role)
    if isinstance(several, list) and f"list:{role}" not in _warned:
        _warned.add(f"list:{role}")
        logger.warning(
            f"model role '{role}' is bound to {len(several)} models: only the grader role takes a panel; "
            f"the first, {model}, plays it."
        )
    eval_config = compat.active_generate_config()
    inherit = {
        k: getattr(eval_config, k)
        for k in INHERITED
        if getattr(eval_config, k) is not None and getattr(model.config, k) is None
    }
    if inherit:
        config = GenerateConfig(**inherit).merge(config) if config is not None else GenerateConfig(**inherit)
    if config is not None:
        model = get_model(role=role, config=config)
    if not bound:
        message = (
            f"model role '{role}' is not bound: falling back to the model under test "
            f"({model}). Results are not comparable across models; bind it with "
            f"--model-role {role}=<provider/model>."
        )
        if role not in _warned:
            _warned.add(role)
            logger.warning(message)
        transcript().info({"role_fallback": role, "model": str(model)}, source="roles")
    return model, not bound


def role_models(role: str, config: GenerateConfig | None = None) -> tuple[list[Model], bool]:
    """Every model bound to ``role`` (several when the role is bound to a list, ``--model-role grader=a,b,c``;
    :func:`inspect_ai.model.get_model` gives only the first) and whether it fell back to the model under test.
    Each is configured as :func:`role_model` configures one model (``config`` under the model's own, the
    eval's per-attempt limits inherited)."""
    bound = model_roles().get(role)
    if not isinstance(bound, list):
        model, fallback = role_model(role, config)
        return [model], fallback
    eval_config = compat.active_generate_config()
    models: list[Model] = []
    for member in bound:
        inherit = {
            k: getattr(eval_config, k)
            for k in INHERITED
            if getattr(eval_config, k) is not None and getattr(member.config, k) is None
        }
        wanted = GenerateConfig(**inherit).merge(config) if config is not None else GenerateConfig(**inherit)
        model = copy(member)
        model.config = wanted.merge(member.config)  # as get_model(role=, config=): the model's own config wins
        model._set_role(role)
        models.append(model)
    return models, False


def fallback_roles(roles: tuple[str, ...] | list[str]) -> list[str]:
    """Which of a task's ``roles`` are not bound (and so fall back to the model under test).

    Every task reports this the same way, judges included: a score key ``role_fallbacks`` (the
    count) with the names in the score's metadata (``role_fallbacks``). Scorers call it for all the
    roles their task uses, so a grader left unbound is counted even though it is only resolved
    while scoring."""
    return [r for r in roles if not role_is_bound(r)]


class UnknownRole(SetupError):
    """A ``--model-role`` name the task does not have (one line: the name, the task's roles, the fix)."""


#: role names people reach for, and bedside's name of that role
SYNONYMS = {
    "judge": "grader",
    "evaluator": "grader",
    "scorer": "grader",
    "rater": "grader",
    "sp": "patient",
    "actor": "patient",
    "virtual_patient": "patient",
    "user": "patient",
    "supervisor": "monitor",
    "education_monitor": "monitor",
    "env": "environment",
    "controller": "environment",
    "environment_controller": "environment",
}
#: names of the model under test (which is passed with --model, not as a role)
SUBJECTS = frozenset({"model", "target", "educator", "examinee", "doctor", "clinician"})


def check_roles(task: str, roles: Sequence[str], subject: str = "model under test") -> None:
    """Refuse, with one line, a bound role that is none of bedside's roles (``task``'s own are ``roles``;
    its model under test is called ``subject``). A role of another bedside benchmark passes (one
    ``inspect eval-set`` of several tasks binds one set of roles for all of them), unused.

    Checked while Inspect builds the tasks of an eval (``inspect eval``, ``eval()`` of a task by name),
    when the eval's roles are bound; a ``Task`` built by hand before ``eval()`` is not checked."""
    if not compat.resolving_eval_tasks():
        return
    known = {role for benchmark in all_benchmarks() for role in (*benchmark.roles, *benchmark.optional_roles)}
    known |= set(roles)
    bound = model_roles()
    unknown = [name for name in bound if name not in known]
    if not unknown:
        return
    fixes = [_fix(name, bound[name], roles, subject) for name in unknown]
    have = f"its roles are {', '.join(roles)}" if roles else "it has no model roles"
    raise UnknownRole(f"Unknown model role for task {task} ({have}): {'; '.join(fixes)}.")


def _fix(name: str, model: Model | list[Model], roles: Sequence[str], subject: str) -> str:
    value = ",".join(str(m) for m in model) if isinstance(model, list) else str(model)
    key = name.lower().replace("-", "_")
    if key in SUBJECTS or key == subject:
        return f"'{name}' is the {subject}, the model under test: pass it as --model {value}"
    meant = SYNONYMS.get(key) if SYNONYMS.get(key) in roles else None
    close = difflib.get_close_matches(key, list(roles), n=1, cutoff=0.6)
    meant = meant or (close[0] if close else None)
    if meant is not None:
        return f"'{name}' is not one of them; use --model-role {meant}={value}"
    if roles:
        return f"'{name}' is not one of them; bind one of them (e.g. --model-role {roles[0]}={value}) or drop it"
    return f"'{name}' is not used by it; drop it (the model under test is --model)"
