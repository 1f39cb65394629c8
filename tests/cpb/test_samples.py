"""Records → samples: metadata for stratification and the language/category/dataset filters."""

from __future__ import annotations

import pytest

from bedside.cpb.records import CPBDataError
from bedside.cpb.samples import control_dataset, positive_dataset
from tests.conftest import shared_path
from tests.cpb import synthetic


@pytest.fixture
def data(tmp_path):
    return synthetic.write_data(tmp_path / "cpb-bench_data")


def ids(ds) -> set[str]:
    return {s.id for s in ds}


@pytest.mark.eval
def test_sample_metadata(data):
    [sample] = [s for s in positive_dataset(data) if s.id == "MedDG_T01"]
    md = sample.metadata
    assert (md["kind"], md["case_id"], md["category"], md["dataset"], md["language"]) == (
        "positive",
        "MedDG_T01",
        "Information Contradiction",
        "MedDG",
        "zh",
    )
    assert md["case"]["conversation_segment"][0] == {"speaker": "Patient", "text": "我没有发烧。", "index": 1}
    assert "三十九度" in sample.input
    [ctrl] = [s for s in control_dataset(data) if s.metadata["dataset"] == "IMCS21"]
    assert (ctrl.metadata["kind"], ctrl.metadata["category"], ctrl.metadata["language"]) == ("control", "none", "zh")


@pytest.mark.eval
def test_language_filter(data):
    assert ids(positive_dataset(data, language="en")) == {"ACI_T01", "ACI_T02", "ACI_T03"}
    assert ids(positive_dataset(data, language="ZH")) == {"MedDG_T01"}
    assert len(positive_dataset(data, language="all")) == 4
    assert {s.metadata["dataset"] for s in control_dataset(data, language="en")} == {"MediTOD"}


@pytest.mark.eval
def test_category_filter_accepts_label_snake_case_and_short_names(data):
    assert ids(positive_dataset(data, category="Care Resistance")) == {"ACI_T01"}
    assert ids(positive_dataset(data, category="self_diagnosis")) == {"ACI_T02"}
    assert ids(positive_dataset(data, category="false_belief,contradiction")) == {"ACI_T03", "MedDG_T01"}
    assert ids(positive_dataset(data, category=["factual-inaccuracy"])) == {"ACI_T03"}


@pytest.mark.eval
def test_dataset_filter_and_imcs_alias(data):
    assert ids(positive_dataset(data, dataset="meddg")) == {"MedDG_T01"}
    assert ids(positive_dataset(data, dataset="ACI", category="care_resistance")) == {"ACI_T01"}
    # the controls call the IMCS-21 corpus IMCS21, the positives IMCS: either name selects both
    assert {s.metadata["dataset"] for s in control_dataset(data, dataset="IMCS")} == {"IMCS21"}


@pytest.mark.eval
def test_unknown_filter_values_are_clear_errors(data):
    with pytest.raises(CPBDataError, match=r"language='fr'.*\['en', 'zh', 'all'\]"):
        positive_dataset(data, language="fr")
    with pytest.raises(CPBDataError, match=r"category='rudeness'.*care_resistance"):
        positive_dataset(data, category="rudeness")
    with pytest.raises(CPBDataError, match=r"dataset='PubMed'.*MediTOD"):
        control_dataset(data, dataset="PubMed")
    with pytest.raises(CPBDataError, match=r"no positive case matches language='zh', category='care_resistance'"):
        positive_dataset(data, language="zh", category="care_resistance")


@pytest.mark.shared
def test_filters_on_the_real_data():
    root = shared_path("data", "cpb-bench")
    english = positive_dataset(root, language="en")
    assert len(english) == 28 + 69 and {s.metadata["dataset"] for s in english} == {"ACI", "MediTOD"}
    assert len(positive_dataset(root, category="care_resistance")) == 261
    assert len(positive_dataset(root, dataset="IMCS", category="Self-diagnosis")) == 128
    assert len(control_dataset(root, language="zh")) == 97 + 92
    assert len(control_dataset(root, dataset="imcs")) == 97
