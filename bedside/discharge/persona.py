"""Virtual Patient persona: the four trait axes of DischargeBench (paper Appendix A.2) plus the
optional stress-behaviour axis, and their deterministic per-case assignment.

Assignment (``-T persona_assignment=``):

``random`` (default) for each axis independently, ``sha256(f"{seed}|{case_id}|{axis}")`` picks one
           value uniformly (the paper distributes traits uniformly over the dataset). A case keeps
           its persona whatever other cases are in the run (``--limit``, subsets).
``balanced`` for each axis, the cases are ordered by that same hash and dealt the values in turn,
           so every value occurs equally often (counts differ by at most one) — exact balance for
           stratified comparisons on a small set; a case's persona then depends on the case set.

Neither uses Python's ``hash`` (salted per process), so both are the same on every machine and in
every process. Precedence, per axis: a task parameter (e.g. ``-T personality=anxious``) over a
value fixed in the case record over the assignment. The source of each value is recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Literal, get_args

from pydantic import BaseModel

from bedside.discharge.records import EducationLevel, HealthLiteracy, PersonaFields, Personality, RecallLevel
from bedside.params import BadParameter
from bedside.prompts import load_yaml

AXES: dict[str, tuple[str, ...]] = {
    "personality": get_args(Personality),
    "education_level": get_args(EducationLevel),
    "health_literacy": get_args(HealthLiteracy),
    "recall_level": get_args(RecallLevel),
}

Source = Literal["task", "case", "seed"]


class Persona(BaseModel):
    personality: Personality
    education_level: EducationLevel
    health_literacy: HealthLiteracy
    recall_level: RecallLevel
    sources: dict[str, Source]

    def label(self, axis: str) -> str:
        """Human label of this persona's value on ``axis`` (e.g. ``high school``)."""
        return load_yaml("discharge/personas.yaml")[axis][getattr(self, axis)]["label"]

    def description(self, axis: str) -> str:
        """The paper's trait description for this persona's value on ``axis``."""
        return load_yaml("discharge/personas.yaml")[axis][getattr(self, axis)]["description"]


def seeded_choice(seed: int | str, case_id: str, axis: str, values: tuple[str, ...]) -> str:
    digest = hashlib.sha256(f"{seed}|{case_id}|{axis}".encode()).digest()
    return values[int.from_bytes(digest[:8], "big") % len(values)]


#: the patient's stress behaviour (``-T behavior=``): none, or one of CPB-Bench's four challenging
#: behaviours as an overlay of the patient prompt (:func:`bedside.solvers.discharge.encounter.behavior_overlay`)
Behavior = Literal["none", "contradiction", "false_belief", "self_diagnosis", "care_resistance"]
BEHAVIORS: tuple[str, ...] = get_args(Behavior)

#: how personas are dealt to the cases (``-T persona_assignment=``; module docstring)
PersonaAssignment = Literal["random", "balanced"]


def balanced_draws(case_ids: list[str], seed: int | str) -> dict[str, dict[str, str]]:
    """case id → axis → value, each axis's values dealt in turn over the cases ordered by
    ``sha256(seed|case_id|axis)`` (so the axes stay independent of each other)."""
    draws: dict[str, dict[str, str]] = {cid: {} for cid in case_ids}
    for axis, values in AXES.items():
        order = sorted(case_ids, key=lambda cid: hashlib.sha256(f"{seed}|{cid}|{axis}".encode()).digest())
        for i, cid in enumerate(order):
            draws[cid][axis] = values[i % len(values)]
    return draws


def validate_overrides(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Check task-parameter overrides against the axis values; drop unset ones."""
    clean: dict[str, str] = {}
    for axis, value in overrides.items():
        if value is None:
            continue
        if axis not in AXES:
            raise BadParameter(axis, f"unknown persona axis; axes are {list(AXES)}")
        if value not in AXES[axis]:
            raise BadParameter(axis, f"{axis}={value!r} is not one of {list(AXES[axis])}")
        clean[axis] = value
    return clean


def assign_persona(
    case_id: str,
    seed: int | str,
    fixed: PersonaFields | None = None,
    overrides: Mapping[str, str | None] | None = None,
    drawn: dict[str, str] | None = None,
) -> Persona:
    """The persona of ``case_id`` under ``seed`` (see module docstring for precedence); ``drawn``
    holds a balanced assignment's values (default: the per-case random draw)."""
    task_values = validate_overrides(overrides or {})
    values: dict[str, str] = {}
    sources: dict[str, Source] = {}
    for axis, options in AXES.items():
        case_value = getattr(fixed, axis) if fixed is not None else None
        if axis in task_values:
            values[axis], sources[axis] = task_values[axis], "task"
        elif case_value is not None:
            values[axis], sources[axis] = case_value, "case"
        else:
            values[axis] = drawn[axis] if drawn else seeded_choice(seed, case_id, axis, options)
            sources[axis] = "seed"
    return Persona.model_validate({**values, "sources": sources})
