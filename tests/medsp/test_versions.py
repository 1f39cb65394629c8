"""MedSP1000's data versions: its run records the files of its scenario folder and its own prompt set."""

from __future__ import annotations

import pytest

from bedside.tasks.medsp import medsp
from bedside.versions import KEY, data_versions


@pytest.mark.eval
def test_a_run_records_its_scenario_files_and_its_prompt_set():
    versions = medsp().metadata[KEY]
    assert isinstance(versions["cases"], dict) and len(versions["cases"]) > 1
    assert versions["prompts"] == data_versions(None, "medsp")["prompts"] != data_versions(None, "cpb")["prompts"]
