"""The data-use guard of a DischargeBench run on MIMIC-derived cases: before any model call, every
role the run binds (the educator under test, patient, monitor, grader, whose calls include the safety
judge; the safety probe: its grader only, the one role it calls) is checked like the extraction's
model (:func:`bedside.discharge.mimic.data_use.endpoint_problem`).
A role that is not local is refused in one line naming the role and its model, unless the user declares
``-T zero_retention=true`` (recorded in the log's task arguments and metadata, and per sample).

Cases carry their provenance (``DischargeCase.provenance``; ``bedside build-cases`` writes
:data:`~bedside.discharge.mimic.data_use.MIMIC_PROVENANCE`); the synthetic demo cases (``"synthetic": true``)
run anywhere. Case files written before cases carried a provenance have none, but their ids are
``mimic-<hadm_id>`` (:data:`MIMIC_ID`): a case without provenance, not synthetic, with such an id is
treated as MIMIC-derived, and the refusal says so (:func:`mimic_reason`). A case of unknown origin (no
provenance, not synthetic, another id) runs, with a warning in the log and in its sample's transcript.

Who may read a case is recorded in its sample's store (:data:`APPROVED`: each endpoint, whether zero retention was
declared, and by which command): the run's set-up records every role it let through. Re-judging a log sends
its cases to a grader again, live or in a batch upload: ``bedside rescore`` checks its new grader the same way
before any call (:func:`check_rescore`, its tools' ``rescore_guard``; ``--zero-retention``) and records it;
``inspect score`` has no such step, so each DischargeBench judge is checked in its scorer before its first call
(:func:`checked_grader`): a judge that is neither local nor recorded is refused, in one line, before anything
is sent or uploaded (``inspect score`` cannot declare zero retention; ``bedside rescore`` can).

Checked twice: while Inspect builds the task (``inspect eval``, ``eval()`` of the task by name: the models
are known, nothing is read past the case file), and per sample in the set-up (:func:`data_use_check`), so a
``Task`` built in Python before ``eval()`` refuses too, before its first model call.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from inspect_ai.log import EvalSample, transcript
from inspect_ai.model import Model, get_model, model_roles
from inspect_ai.solver import Generate, TaskState, solver

from bedside import compat
from bedside.calls import grader
from bedside.discharge.mimic.data_use import (
    DECLARE,
    MIMIC_PROVENANCE,
    DataUseRefused,
    endpoint_problem,
    model_identity,
)
from bedside.panel import Panel

logger = logging.getLogger(__name__)

#: the sample store's record of the endpoints let read its case: [{"model", "base_url", "zero_retention", "by"}]
APPROVED = "data_use_approved"
#: how a re-judging declares zero retention (the end of its refusal)
RESCORE_DECLARE = "bedside rescore LOG --grader MODEL --zero-retention (inspect score cannot declare it)"

#: the case ids ``bedside build-cases`` writes (``mimic-<hadm_id>``, :func:`bedside.discharge.mimic.cohort`)
MIMIC_ID = re.compile(r"mimic-\d+")


def mimic_reason(case: dict[str, Any]) -> str | None:
    """Why a case (a ``DischargeCase`` as a dict) is treated as MIMIC-derived, in a few words (None: it is not)."""
    case_id, provenance = case.get("case_id"), case.get("provenance")
    if provenance == MIMIC_PROVENANCE:
        return f"case {case_id} has provenance {MIMIC_PROVENANCE}"
    if provenance is None and not case.get("synthetic") and MIMIC_ID.fullmatch(str(case_id)):
        return f"case {case_id} has no provenance but a MIMIC-style id (mimic-<hadm_id>, as build-cases names cases)"
    return None


def unknown_origin(case: dict[str, Any]) -> bool:
    """A case with no provenance, not synthetic, and not treated as MIMIC-derived."""
    return case.get("provenance") is None and not case.get("synthetic") and mimic_reason(case) is None


def restricted(cases: Iterable[dict[str, Any]]) -> str | None:
    """Why the cases come from data under the PhysioNet data-use agreement (the first restricted case's
    :func:`mimic_reason`; None: none does)."""
    return next((reason for reason in map(mimic_reason, cases) if reason), None)


def role_models(subject: str | None, roles: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Model]:
    """The model every role of the run will call: the bound one, else the model under test; ``subject``:
    what the model under test is called (None: a task that never calls it, e.g. the safety probe, whose
    transcripts are replayed: only its ``roles`` are checked, an unbound one as the model under test);
    ``optional``: roles called only when bound (the simulated patient's checker), checked when bound."""
    under_test = get_model()
    bound = model_roles()
    models = {subject: under_test} if subject else {}
    for role in [*roles, *(r for r in optional if r in bound)]:
        model = bound.get(role, under_test)
        if isinstance(model, list):  # a judge panel: every judge is checked
            models.update({role if i == 0 else f"{role} (judge {i + 1})": m for i, m in enumerate(model)})
        else:
            models[role] = model
    return models


def check_role_models(
    models: dict[str, Model], zero_retention: bool, reason: str | None = None, declare: str = DECLARE
) -> None:
    """Raise :class:`DataUseRefused` (one line: role, model, the fix, and ``reason``, why the cases were
    treated as MIMIC-derived) for the first role that is not local; ``declare``: how the user declares
    zero retention where the refusal is met."""
    for role, model in models.items():
        name, base_url = model_identity(model)
        problem = endpoint_problem(name, base_url, zero_retention, declare)
        if problem:
            why = f" Treated as MIMIC-derived: {reason}." if reason else ""
            raise DataUseRefused(f"Model role {role}: {problem}{why}")


def check_before_eval(
    subject: str | None, roles: Sequence[str], optional: Sequence[str], zero_retention: bool, reason: str | None = None
) -> None:
    """The check while Inspect builds the task (the eval's model and roles are known then)."""
    if compat.resolving_eval_tasks() and compat.active_model() is not None:
        check_role_models(role_models(subject, roles, optional), zero_retention, reason)


def case_of(state_or_sample: Any) -> dict[str, Any]:
    return (state_or_sample.metadata or {}).get("case") or {}


@solver
def data_use_check(
    subject: str | None,
    roles: Sequence[str],
    zero_retention: bool = False,
    reason: str | None = None,
    optional: Sequence[str] = (),
):
    """Per-sample set-up on MIMIC-derived cases: refuses before the sample's first model call (``reason``:
    why the run's cases were treated as MIMIC-derived; the sample's own case's reason comes first;
    ``optional``: roles checked when bound, :func:`role_models`)."""
    roles, optional = tuple(roles), tuple(optional)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        models = role_models(subject, roles, optional)
        why = mimic_reason(case_of(state)) or reason
        check_role_models(models, zero_retention, why)  # raises: the sample fails, nothing sent
        state.store.set(APPROVED, approval(state.store.get(APPROVED), models.values(), zero_retention, "inspect eval"))
        transcript().info(
            {
                "data_use": "allowed",
                "provenance": case_of(state).get("provenance"),
                "treated_as_mimic": why,
                "zero_retention": zero_retention,
                "roles": {role: dict(zip(("model", "base_url"), model_identity(m))) for role, m in models.items()},
            },
            source="data_use",
        )
        return state

    return solve


#: what a case of unknown origin means for the run (the warning's second half)
UNKNOWN_ORIGIN = (
    "(no provenance, not marked synthetic, no MIMIC-style id): bedside cannot tell whether it is patient data, "
    "so every role runs as bound; if it comes from credentialed data, bind only local models (or rebuild the "
    "case file with bedside build-cases, which records the provenance)"
)


@solver
def origin_warning():
    """Per-sample set-up on case files holding cases of unknown origin: a warning in the sample's transcript."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        case = case_of(state)
        if unknown_origin(case):
            transcript().info(
                {
                    "data_use": "unknown origin",
                    "case_id": case.get("case_id"),
                    "warning": f"case {case.get('case_id')} is of unknown origin {UNKNOWN_ORIGIN}",
                },
                source="data_use",
            )
        return state

    return solve


def approval(recorded: list[dict[str, Any]] | None, models: Iterable[Model], zero_retention: bool, by: str) -> list:
    """A sample's :data:`APPROVED` record with ``models`` added: let read its case, under this declaration, by
    this command."""
    added = [
        {"model": name, "base_url": base_url, "zero_retention": zero_retention, "by": by}
        for name, base_url in map(model_identity, models)
    ]
    return [*(recorded or []), *added]


def check_rescore(
    samples: Iterable[Any], role: str, model: Model, zero_retention: bool
) -> Callable[[EvalSample], None] | None:
    """``bedside rescore`` of a run whose ``samples`` hold MIMIC-derived cases (:func:`mimic_reason`): the new
    ``model`` in ``role`` (the grader, the simulator checker) reads their notes, so it must be local unless
    ``zero_retention`` is declared (:class:`DataUseRefused`, one line naming the role and model, before any
    call). Let through, it is recorded in each such sample's store (:func:`approval`), where the scorers'
    check finds it: the returned function records it in a sample read to be judged."""
    reason = restricted(case_of(s) for s in samples)
    if not reason:
        return None
    check_role_models({role: model}, zero_retention, reason, declare="--zero-retention")

    def approve(sample: EvalSample) -> None:
        if mimic_reason(case_of(sample)):
            sample.store[APPROVED] = approval(sample.store.get(APPROVED), [model], zero_retention, "bedside rescore")

    return approve


def checked_grader(state: TaskState) -> tuple[Model | Panel, bool]:
    """:func:`bedside.calls.grader` for a DischargeBench judge, checked first on a MIMIC-derived case: each
    judge must be local or an endpoint its sample's store records as let read the case (:data:`APPROVED`;
    the run's set-up, ``bedside rescore``), else :class:`DataUseRefused` (one line) before the judge's first
    call, so before any batch upload. This is the check when ``inspect score`` re-judges a log."""
    judge, fallback = grader()
    reason = mimic_reason(case_of(state))
    if reason:
        approved = {(a["model"], a["base_url"]) for a in state.store.get(APPROVED) or []}
        judges = judge.judges if isinstance(judge, Panel) else (judge,)
        named = {"grader" if i == 0 else f"grader (judge {i + 1})": m for i, m in enumerate(judges)}
        unapproved = {role: m for role, m in named.items() if model_identity(m) not in approved}
        check_role_models(unapproved, zero_retention=False, reason=reason, declare=RESCORE_DECLARE)
    return judge, fallback


def guard(
    dataset: Iterable, subject: str | None, roles: Sequence[str], zero_retention: bool, optional: Sequence[str] = ()
) -> list:
    """The set-up solvers a DischargeBench run needs for its ``dataset``: none for synthetic cases and
    cases of another declared provenance; for MIMIC-derived ones (:func:`mimic_reason`) the run is checked
    now (when the models are known) and per sample, every role and each ``optional`` role that is bound;
    cases of unknown origin run with a warning (one log line now, one transcript entry per sample)."""
    cases = [case_of(s) for s in dataset]
    reason = restricted(cases)
    if reason:
        check_before_eval(subject, roles, optional, zero_retention, reason)
        return [data_use_check(subject, roles, zero_retention, reason, optional)]
    unknown = [str(c.get("case_id")) for c in cases if unknown_origin(c)]
    if not unknown:
        return []
    shown = ", ".join(unknown[:3]) + (", ..." if len(unknown) > 3 else "")
    logger.warning(f"{len(unknown)} of {len(cases)} cases ({shown}) are of unknown origin {UNKNOWN_ORIGIN}")
    return [origin_warning()]
