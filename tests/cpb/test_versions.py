"""CPB-Bench's data versions: its run records every file of its data folder."""

from __future__ import annotations

import pytest

from bedside.tasks.cpb import cpb
from bedside.versions import KEY
from tests.cpb import synthetic


@pytest.mark.eval
def test_a_run_records_every_file_of_its_data(tmp_path):
    data = synthetic.write_data(tmp_path / "cpb-bench_data")
    versions = cpb(data=str(data)).metadata[KEY]
    assert set(versions["cases"]) == {p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file()}
