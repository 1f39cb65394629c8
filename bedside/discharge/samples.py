"""DischargeBench cases → Inspect samples, with the persona assigned per case.

Sample metadata carries the whole case (``case``), the persona (``persona``) and flat keys used
to stratify results: ``icd_chapter``, ``icd_version``, ``personality``, ``education_level``,
``health_literacy``, ``recall_level``, and ``behavior`` (the stress overlay, ``none`` by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from inspect_ai.dataset import MemoryDataset, Sample

from bedside.discharge.persona import Behavior, PersonaAssignment, assign_persona, balanced_draws
from bedside.discharge.records import DischargeCase, load_cases
from bedside.paths import DATASETS_DIR, user_path

DEMO_CASES = DATASETS_DIR / "discharge" / "demo.jsonl"


def case_sample(
    case: DischargeCase,
    seed: int | str,
    overrides: Mapping[str, str | None],
    behavior: Behavior = "none",
    drawn: dict[str, str] | None = None,
) -> Sample:
    persona = assign_persona(case.case_id, seed, case.persona, overrides, drawn)
    return Sample(
        id=case.case_id,
        input=(
            f"Discharge education session for case {case.case_id} ({case.main_diagnosis}); "
            f"patient persona: {persona.personality}, {persona.education_level} education, "
            f"{persona.health_literacy} health literacy, {persona.recall_level} recall."
        ),
        target="",
        metadata={
            "case": case.model_dump(mode="json"),
            "persona": persona.model_dump(mode="json"),
            "icd_chapter": case.icd_chapter,
            "icd_version": case.icd_version,
            "personality": persona.personality,
            "education_level": persona.education_level,
            "health_literacy": persona.health_literacy,
            "recall_level": persona.recall_level,
            "behavior": behavior,
            "synthetic": case.synthetic,
        },
    )


def discharge_dataset(
    data: str | Path | None = None,
    seed: int | str = 0,
    overrides: Mapping[str, str | None] | None = None,
    behavior: Behavior = "none",
    assignment: PersonaAssignment = "random",
) -> MemoryDataset:
    """All cases of ``data`` (default: the shipped synthetic demo set), validated up front;
    personas by ``assignment`` (``random`` or ``balanced``, :mod:`bedside.discharge.persona`)."""
    path = user_path(data) if data else DEMO_CASES
    cases = load_cases(path)
    draws = balanced_draws([c.case_id for c in cases], seed) if assignment == "balanced" else {}
    samples = [case_sample(case, seed, overrides or {}, behavior, draws.get(case.case_id)) for case in cases]
    return MemoryDataset(samples, name="dischargebench", location=str(path))
