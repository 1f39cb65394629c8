"""Shared fixtures of the MIMIC builder tests: the synthetic MIMIC-shaped folders (written once per
test module into a temporary folder) and a cohort drawn from them; the loopback server of the data-use
guard tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bedside.discharge.mimic.cohort import select_cohort, write_cohort
from tests.discharge.mimic.fixture import write_fixture
from tests.loopback.server import LoopbackServer


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("mimic"))


@pytest.fixture(scope="module")
def cohort(fx):
    return select_cohort(fx.mimic, fx.note, per_chapter=2, seed=0)


@pytest.fixture(scope="module")
def cohort_file(cohort, tmp_path_factory):
    path = tmp_path_factory.mktemp("cohort") / "cases.cohort.jsonl"
    write_cohort(cohort.records, path)
    return path


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """The loopback server, as the test channel too (the call's tag travels to the scripted answers)."""
    with LoopbackServer() as running:
        monkeypatch.setenv("BEDSIDE_LOOPBACK_URL", running.base_url)
        yield running
