"""What the data-use guard tests of the discharge run and of the safety probe share: demo cases written as
``bedside build-cases`` writes them, and models at the loopback server (the ``server`` fixture of this
folder's conftest) or at a non-local address."""

from __future__ import annotations

import json
from pathlib import Path

from inspect_ai.model import Model, get_model

from bedside.discharge.mimic.data_use import MIMIC_PROVENANCE
from bedside.paths import DATASETS_DIR

DEMO = DATASETS_DIR / "discharge" / "demo.jsonl"
#: an address that is not local: a role there is refused on MIMIC-derived cases
REMOTE = "https://llm.example.org/v1"


def write_mimic_cases(path: Path, limit: int | None = None) -> Path:
    """The first ``limit`` demo cases (None: all) with provenance MIMIC-IV-Note, as build-cases writes them."""
    cases = [json.loads(line) for line in DEMO.read_text().splitlines() if line.strip()][:limit]
    path.write_text(
        "".join(json.dumps({**c, "synthetic": False, "provenance": MIMIC_PROVENANCE}) + "\n" for c in cases)
    )
    return path


def at(url: str, name: str = "m") -> Model:
    """A model ``name`` served at ``url`` (OpenAI's API)."""
    return get_model(f"openai-api/x/{name}", base_url=url, api_key="x", memoize=False)
