"""Shared MedSP runs: one default run per demo scenario used by several tests (each eval costs ~1 s)."""

from __future__ import annotations

import pytest

from tests.medsp.helpers import ANAPHYLAXIS, BACK_PAIN, run_one


@pytest.fixture(scope="session")
def anaphylaxis_run(tmp_path_factory):
    """(log, sample) of the anaphylaxis scenario with every role scripted and default options."""
    return run_one(tmp_path_factory.mktemp("medsp_anaphylaxis"), ANAPHYLAXIS)


@pytest.fixture(scope="session")
def back_pain_run(tmp_path_factory):
    return run_one(tmp_path_factory.mktemp("medsp_back_pain"), BACK_PAIN)
