"""CPB-Bench records → Inspect samples, with the task filters ``language``, ``category``, ``dataset``.

Sample metadata: the whole record (``case``), ``kind`` (``positive``/``control``), ``case_id``,
``category`` (the paper's label, ``none`` for controls), ``dataset``, ``language`` (``en``/``zh``),
``dialog_id``, ``turn_index`` and ``quirks`` (see :mod:`bedside.cpb.records`). ``category``,
``dataset`` and ``language`` are the strata of the failure and overreaction rates.

Filter values are case-insensitive and may list several values (``"ACI,MediTOD"`` or a list):

- ``language``: ``en``, ``zh`` or ``all``;
- ``category``: the paper's label (``"Care Resistance"``), its snake-case form
  (``care_resistance``) or bedside's short name (``contradiction``, ``false_belief``,
  ``self_diagnosis``, ``care_resistance``);
- ``dataset``: ``ACI``, ``MediTOD``, ``MedDG``, ``IMCS`` (``IMCS`` and ``IMCS21`` name the same
  IMCS-21 corpus, the positives call it IMCS and the controls IMCS21: either selects both).

An unknown value is an error that lists the accepted ones; a selection with no case is an error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from inspect_ai.dataset import MemoryDataset, Sample
from pydantic import BeforeValidator

from bedside.cpb.records import (
    CATEGORIES,
    DATASET_LANGUAGE,
    LANGUAGES,
    CategoryName,
    ControlCase,
    CPBCase,
    CPBDataError,
    Language,
    SourceDataset,
    load_controls,
    load_positives,
)
from bedside.params import comma_list

Filter = str | Sequence[str] | None


def _snake(text: str) -> str:
    return text.strip().lower().replace("-", "_").replace(" ", "_")


CATEGORY_ALIASES: dict[str, str] = {}
for _label, _slug in CATEGORIES.items():
    CATEGORY_ALIASES[_snake(_label)] = _label
    CATEGORY_ALIASES[_slug] = _label
    CATEGORY_ALIASES[_label.lower()] = _label

DATASET_ALIASES: dict[str, frozenset[str]] = {
    "aci": frozenset({"ACI"}),
    "meditod": frozenset({"MediTOD"}),
    "meddg": frozenset({"MedDG"}),
    "imcs": frozenset({"IMCS", "IMCS21"}),
    "imcs21": frozenset({"IMCS", "IMCS21"}),
    "imcs_21": frozenset({"IMCS", "IMCS21"}),
}


def _values(value: Filter) -> list[str]:
    if value is None:
        return []
    items: Iterable[Any] = value.split(",") if isinstance(value, str) else value
    return [str(v).strip() for v in items if str(v).strip()]


def languages(value: Filter) -> set[str]:
    """``en``/``zh``/``all`` → the set of language codes."""
    chosen: set[str] = set()
    for v in _values(value) or ["all"]:
        key = v.lower()
        if key == "all":
            chosen |= set(LANGUAGES)
        elif key in LANGUAGES:
            chosen.add(key)
        else:
            raise CPBDataError(f"language={v!r} is not a CPB-Bench language; use one of {[*LANGUAGES, 'all']}")
    return chosen


def categories(value: Filter) -> set[str] | None:
    """Category filter → the set of paper labels (``None``: all)."""

    def labels(v: str) -> set[str] | None:
        label = CATEGORY_ALIASES.get(_snake(v)) or CATEGORY_ALIASES.get(v.strip().lower())
        return None if label is None else {label}

    accepted = sorted(set(CATEGORIES) | set(CATEGORIES.values()))
    return _chosen(
        value, labels, lambda v: f"category={v!r} is not a CPB-Bench behaviour category; use one of {accepted}"
    )


def datasets(value: Filter) -> set[str] | None:
    """Dataset filter → the set of source-dataset names (``None``: all)."""
    return _chosen(
        value,
        lambda v: None if (names := DATASET_ALIASES.get(_snake(v))) is None else set(names),
        lambda v: f"dataset={v!r} is not a CPB-Bench source dataset; use one of {sorted(DATASET_LANGUAGE)}",
    )


def _chosen(value: Filter, named: Callable[[str], set[str] | None], refusal: Callable[[str], str]) -> set[str] | None:
    """The union of what each of the filter's values names (``None``: all); a value that names nothing is
    refused with ``refusal(value)``."""
    values = _values(value)
    if not values or [v.lower() for v in values] == ["all"]:
        return None
    out: set[str] = set()
    for v in values:
        found = named(v)
        if found is None:
            raise CPBDataError(refusal(v))
        out |= found
    return out


def _spelled(aliases: dict[str, Any], name: Any) -> Any:
    """One filter value by the name the annotation lists, for any spelling the loaders accept (the
    paper's label, any case, ``-`` or spaces for ``_``); anything else unchanged, for the annotation
    to refuse."""
    if not isinstance(name, str):
        return name
    found = aliases.get(_snake(name))
    return found if found is not None else name


_LANGUAGE_NAMES = {"all": "all", **{code: code for code in LANGUAGES}}
_CATEGORY_NAMES = {alias: CATEGORIES[label] for alias, label in CATEGORY_ALIASES.items()}
_DATASET_NAMES = {_snake(name): name for name in DATASET_LANGUAGE} | {"imcs_21": "IMCS21"}

#: the tasks' filters (``-T language=``, ``-T category=``, ``-T dataset=``): the names listed, in any of
#: the spellings the loaders accept; a category or dataset filter is one name or several, comma-separated
LanguageFilter = Annotated[Literal["all", Language], BeforeValidator(functools.partial(_spelled, _LANGUAGE_NAMES))]
CategoryFilter = Annotated[
    list[Annotated[CategoryName, BeforeValidator(functools.partial(_spelled, _CATEGORY_NAMES))]],
    BeforeValidator(comma_list),
]
DatasetFilter = Annotated[
    list[Annotated[SourceDataset, BeforeValidator(functools.partial(_spelled, _DATASET_NAMES))]],
    BeforeValidator(comma_list),
]


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def positive_sample(case: CPBCase) -> Sample:
    return _sample(case, "positive", case.behavior_category, case.patient_behavior_text)


def control_sample(case: ControlCase) -> Sample:
    return _sample(case, "control", "none", case.patient_text)


def _sample(case: CPBCase | ControlCase, kind: str, category: str, patient_turn: str) -> Sample:
    """A case's sample (``category``: a positive case's behaviour category, which names it; a control case's
    ``none``)."""
    named = category if kind == "positive" else "control"
    return Sample(
        id=case.case_id,
        input=(
            f"CPB-Bench {named} case {case.case_id} ({case.dataset}, {case.language}): "
            f"the doctor answers the patient turn «{_clip(patient_turn)}»"
        ),
        target="",
        metadata={
            "case": case.model_dump(mode="json"),
            "kind": kind,
            "case_id": case.case_id,
            "category": category,
            "dataset": case.dataset,
            "language": case.language,
            "dialog_id": case.dialog_id,
            "turn_index": case.turn_index,
            "quirks": case.quirks,
        },
    )


def _describe(**filters: Filter) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in filters.items() if v is not None) or "no filter"


def positive_dataset(
    data: str | Path, language: Filter = "all", category: Filter = None, dataset: Filter = None
) -> MemoryDataset:
    """The positive cases of ``data`` (validated whole first), filtered."""
    langs, cats, names = languages(language), categories(category), datasets(dataset)
    cases = [
        c
        for c in load_positives(data)
        if c.language in langs
        and (cats is None or c.behavior_category in cats)
        and (names is None or c.dataset in names)
    ]
    if not cases:
        raise CPBDataError(
            f"{data}: no positive case matches {_describe(language=language, category=category, dataset=dataset)}"
        )
    return MemoryDataset([positive_sample(c) for c in cases], name="cpb-bench", location=str(data))


def control_dataset(data: str | Path, language: Filter = "all", dataset: Filter = None) -> MemoryDataset:
    """The control cases of ``data`` (validated whole first), filtered."""
    langs, names = languages(language), datasets(dataset)
    cases = [c for c in load_controls(data) if c.language in langs and (names is None or c.dataset in names)]
    if not cases:
        raise CPBDataError(f"{data}: no control case matches {_describe(language=language, dataset=dataset)}")
    return MemoryDataset([control_sample(c) for c in cases], name="cpb-bench-control", location=str(data))
