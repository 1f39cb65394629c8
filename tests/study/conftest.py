"""The runs the clinician study's tests build studies from (:mod:`tests.study.logs`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reporting.synth import write
from tests.study.logs import MODELS, run


@pytest.fixture
def runs(tmp_path: Path) -> list[str]:
    return [write(run(model), tmp_path / f"{name}.eval") for name, model in MODELS.items()]
