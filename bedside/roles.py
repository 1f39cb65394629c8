"""Model roles (``--model-role patient=... monitor=... grader=...``) with visible fallback.

Inspect silently gives the model under test when a role is not bound. Results of such a run are
not comparable across models (the educator would also play the patient, or grade itself), so
:func:`role_model` records the fallback: a warning in the console and the eval log (once per role
and process), and an ``INFO`` event in the sample transcript. Callers also keep the list in the
sample store so that scorers and reports can flag it.
"""

from __future__ import annotations

import logging

from inspect_ai.log import transcript
from inspect_ai.model import GenerateConfig, Model, get_model, model_roles

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
    from bedside.compat import active_generate_config

    bound = role_is_bound(role)
    model = get_model(role=role)
    eval_config = active_generate_config()
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


def fallback_roles(roles: tuple[str, ...] | list[str]) -> list[str]:
    """Which of a task's ``roles`` are not bound (and so fall back to the model under test).

    Every task reports this the same way, judges included: a score key ``role_fallbacks`` (the
    count) with the names in the score's metadata (``role_fallbacks``). Scorers call it for all the
    roles their task uses, so a grader left unbound is counted even though it is only resolved
    while scoring."""
    return [r for r in roles if not role_is_bound(r)]
