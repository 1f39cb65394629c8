"""MedSP1000 scenarios → Inspect samples, with the MedSP1000-Q100 subset filter.

One sample per usable scenario, id ``<case_id>/<scenarioN>`` (the release's own key). Sample
metadata: the whole scenario record (``scenario_record``: packets, rubric, case metadata; read by
the solver and the scorer, never shown to a model as such) and flat keys for grouping:
``case_id``, ``scenario``, ``specialty`` (``"unspecified"`` when the case metadata has none),
``n_items``, ``rubric_counts``, ``rubric_version``, ``synthetic``.

What is left out is reported, never dropped silently (:class:`DatasetReport`; the task logs it as a
warning and writes it into the eval log's task metadata): unusable files and scenarios (empty or
invalid rubric, missing role folder, empty packet file, ...), scenarios whose rubric has no item
(nothing to score; the release has 86), and subset entries that are not in the data.

Subsets (``subset=``): ``"q100"`` selects MedSP1000-Q100, the 100-scenario subset listed in the
release's ``subset.json`` (which bedside does not ship: it is the release's file). It is looked
up, in this order, in the data folder, the rubric folder and the rubric folder's parent (the
release keeps ``rubrics/`` and ``subset.json`` side by side); its ``name`` must be
``MedSP1000-Q100``. Any other value is the path of a subset file of the same format
(``{"name", "n_scenarios", "scenarios": ["<case_id>/scenarioN", ...]}``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from inspect_ai.dataset import MemoryDataset, Sample
from pydantic import BaseModel, Field

from bedside.medsp.records import MedSPError, Scenario, SubsetFile, load_scenarios, load_subset
from bedside.paths import DATASETS_DIR, user_path

logger = logging.getLogger(__name__)

DEMO_DIR = DATASETS_DIR / "medsp" / "demo"
SUBSETS: dict[str, str] = {"q100": "MedSP1000-Q100"}


class DatasetReport(BaseModel):
    """What was loaded and what was left out, for the log."""

    data: str
    rubrics: str | None = None
    subset: str | None = None
    subset_file: str | None = None
    scenarios: int = 0
    unusable: list[str] = Field(default_factory=list)
    no_rubric_items: list[str] = Field(default_factory=list)
    subset_missing: list[str] = Field(default_factory=list)
    unused_rubrics: int = 0

    def warnings(self) -> list[str]:
        out = [f"MedSP: unusable, left out: {u}" for u in self.unusable]
        if self.no_rubric_items:
            out.append(
                f"MedSP: {len(self.no_rubric_items)} scenario(s) left out because their rubric has no item: "
                f"{self.no_rubric_items}"
            )
        if self.subset_missing:
            out.append(
                f"MedSP: {len(self.subset_missing)} scenario(s) of subset {self.subset} are not in the data: "
                f"{self.subset_missing[:20]}{' ...' if len(self.subset_missing) > 20 else ''}"
            )
        return out


def find_subset_file(subset: str, data: Path, rubrics: Path | None) -> Path:
    """The file for ``subset`` (a known name such as ``q100``, or a path)."""
    name = SUBSETS.get(subset.lower())
    if name is None:
        path = user_path(subset)
        if not path.is_file():
            raise MedSPError(
                f"subset={subset!r}: not a known subset ({', '.join(SUBSETS)}) nor an existing subset file"
            )
        return path
    candidates = [data / "subset.json"]
    if rubrics is not None:
        candidates += [rubrics / "subset.json", rubrics.parent / "subset.json"]
    file = next((p for p in candidates if p.is_file()), None)
    if file is None:
        raise MedSPError(
            f"subset={subset!r} needs the release's subset.json ({name}); looked in "
            f"{', '.join(str(p) for p in candidates)}. Put it next to the data or the rubric folder, "
            "or pass its path: -T subset=/path/to/subset.json"
        )
    found = load_subset(file)
    if found.name != name:
        raise MedSPError(f"{file}: subset file is {found.name!r}, expected {name!r} for subset={subset!r}")
    return file


def scenario_sample(scenario: Scenario) -> Sample:
    specialty = scenario.meta.specialty or "unspecified"
    title = f": {scenario.meta.title}" if scenario.meta.title else ""
    return Sample(
        id=scenario.key,
        input=f"MedSP1000 standardized-patient scenario {scenario.key} ({specialty}){title}",
        target="",
        metadata={
            "scenario_record": scenario.model_dump(mode="json"),
            "case_id": scenario.case_id,
            "scenario": scenario.scenario,
            "specialty": specialty,
            "n_items": scenario.rubric.n_items,
            "rubric_counts": scenario.rubric.counts(),
            "rubric_version": scenario.rubric.rubric_version,
            "synthetic": scenario.meta.synthetic,
        },
    )


def select_subset(keys: list[str], subset: SubsetFile) -> tuple[list[str], list[str]]:
    """(kept keys in data order, subset entries absent from ``keys``)."""
    wanted = set(subset.scenarios)
    present = set(keys)
    return [k for k in keys if k in wanted], [s for s in subset.scenarios if s not in present]


def medsp_dataset(
    data: str | Path | None = None,
    rubrics: str | Path | None = None,
    subset: str | None = None,
) -> tuple[MemoryDataset, DatasetReport]:
    """Usable scenarios of ``data`` (default: the shipped synthetic demo set) as samples, and the
    report of what was left out (module docstring). Raises :class:`MedSPError` when nothing is
    usable or the subset cannot be resolved."""
    root = user_path(data) if data else DEMO_DIR
    rubric_folder = user_path(rubrics) if rubrics else None
    loaded = load_scenarios(root, rubric_folder)
    report = DatasetReport(
        data=str(root),
        rubrics=str(rubric_folder) if rubric_folder else None,
        unusable=[str(u) for u in loaded.unusable],
        no_rubric_items=loaded.rubric_items_empty,
        unused_rubrics=loaded.unused_rubrics,
    )
    scenarios = [s for s in loaded.scenarios if s.rubric.n_items > 0]
    if subset:
        path = find_subset_file(subset, root, rubric_folder)
        subset_file = load_subset(path)
        kept, missing = select_subset([s.key for s in scenarios], subset_file)
        report.subset, report.subset_file, report.subset_missing = subset_file.name, str(path), missing
        keep = set(kept)
        scenarios = [s for s in scenarios if s.key in keep]
    report.scenarios = len(scenarios)
    for line in report.warnings():
        logger.warning(line)
    if not scenarios:
        problems = "\n  ".join(report.warnings()[:20]) or "(no problem reported)"
        raise MedSPError(f"{root}: no usable MedSP scenario{f' in subset {subset!r}' if subset else ''}:\n  {problems}")
    samples = [scenario_sample(s) for s in scenarios]
    return MemoryDataset(samples, name="medsp1000", location=str(root)), report
