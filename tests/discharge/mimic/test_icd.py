"""ICD chapter mapping (ICD-9 table, ICD-10 via simple-icd-10-cm) and the exclusion codes of paper A.1."""

from __future__ import annotations

import pandas as pd
import pytest

from bedside.discharge.mimic import icd
from bedside.discharge.mimic.cohort import excluded_mask
from bedside.discharge.records import ICD_CHAPTER_LABELS, ICD_CHAPTERS_BY_VERSION
from tests.discharge.mimic.fixture import CHAPTER_CODES, LABELS

ICD9 = [
    ("0010", "Infectious and Parasitic Diseases"),
    ("0389", "Infectious and Parasitic Diseases"),  # leading zero kept (codes are read as text)
    ("1390", "Infectious and Parasitic Diseases"),
    ("1400", "Neoplasms"),
    ("2399", "Neoplasms"),
    ("25013", "Endocrine, Nutritional and Metabolic Diseases, and Immunity Disorders"),
    ("2800", "Diseases of the Blood and Blood-Forming Organs"),
    ("2899", "Diseases of the Blood and Blood-Forming Organs"),
    ("2900", None),  # mental disorders: not a Table 2 label (and excluded)
    ("319", None),
    ("3200", "Diseases of the Nervous System and Sense Organs"),
    ("3310", "Diseases of the Nervous System and Sense Organs"),  # a nervous-system code, yet excluded
    ("3899", "Diseases of the Nervous System and Sense Organs"),
    ("4019", "Diseases of the Circulatory System"),
    ("4590", "Diseases of the Circulatory System"),
    ("486", "Diseases of the Respiratory System"),
    ("5770", "Diseases of the Digestive System"),
    ("5990", "Diseases of the Genitourinary System"),
    ("64254", "Complications of Pregnancy, Childbirth, and the Puerperium"),
    ("6826", "Diseases of the Skin and Subcutaneous Tissue"),
    ("7245", "Diseases of the Musculoskeletal System and Connective Tissue"),
    ("7510", "Congenital Anomalies"),
    ("7706", None),  # perinatal period
    ("7802", "Symptoms, Signs, and Ill-Defined Conditions"),
    ("7999", "Symptoms, Signs, and Ill-Defined Conditions"),
    ("8000", "Injury and Poisoning"),
    ("99591", "Injury and Poisoning"),
    ("V5811", "Supplementary Classification of Factors Influencing Health Status and Contact with Health Services"),
    ("V1582", "Supplementary Classification of Factors Influencing Health Status and Contact with Health Services"),
    ("E8497", None),  # external causes: a supplementary chapter outside Table 2
    ("E9320", None),
]
ICD10 = [
    ("A0472", "Certain Infectious and Parasitic Diseases"),
    ("B20", "Certain Infectious and Parasitic Diseases"),
    ("C187", "Neoplasms"),
    ("D490", "Neoplasms"),
    ("D500", None),  # blood / immune mechanism: the schema keeps that label for ICD-9
    ("E1010", "Endocrine, Nutritional and Metabolic Diseases"),
    ("F329", None),
    ("G610", "Diseases of the Nervous System"),
    ("G3281", "Diseases of the Nervous System"),
    ("H4011", None),  # eye
    ("H6690", None),  # ear
    ("I214", "Diseases of the Circulatory System"),
    ("J4551", "Diseases of the Respiratory System"),
    ("K8000", "Diseases of the Digestive System"),
    ("L03115", "Diseases of the Skin and Subcutaneous Tissue"),
    ("M5416", "Diseases of the Musculoskeletal System and Connective Tissue"),
    ("N201", "Diseases of the Genitourinary System"),
    ("O00102", "Pregnancy, Childbirth and the Puerperium"),
    ("P0730", None),  # perinatal
    ("Q430", "Congenital Malformations, Deformations and Chromosomal Abnormalities"),
    ("R55", "Symptoms, Signs and Abnormal Clinical and Laboratory Findings"),
    ("S82851A", "Injury, Poisoning and Certain Other Consequences of External Causes"),
    ("T7840XA", "Injury, Poisoning and Certain Other Consequences of External Causes"),
    ("V0001XA", None),  # ICD-10 external causes (V00-Y99) are not the ICD-9 V codes
    ("W19XXXA", None),
    ("Y929", None),
    ("Z5111", "Factors Influencing Health Status and Contact with Health Services"),
    ("U071", None),  # special purposes
]


@pytest.mark.eval
@pytest.mark.parametrize("code,label", ICD9)
def test_icd9_chapters(code, label):
    assert icd.chapter_label(code, 9) == label
    assert icd.chapter(code, 9).how == "icd9-table"


@pytest.mark.eval
@pytest.mark.parametrize("code,label", ICD10)
def test_icd10_chapters(code, label):
    assert icd.chapter_label(code, 10) == label
    assert icd.chapter(code, 10).how == "simple-icd-10-cm"


def test_icd10_codes_unknown_to_the_library_fall_back_to_category_then_range():
    assert (
        icd.chapter("I2199", 10).how == "category"
        and icd.chapter_label("I2199", 10) == "Diseases of the Circulatory System"
    )
    found = icd.chapter("K6Z99", 10)  # no such category: the letter range decides
    assert found.how == "range" and found.label == "Diseases of the Digestive System"
    assert icd.chapter_label("U999", 10) is None
    assert icd.chapter("", 10) is None and icd.chapter("123", 10) is None and icd.chapter("Q", 9) is None


def test_dotted_codes_and_versions_stay_separate():
    assert (
        icd.dotted("4019", 9) == "401.9" and icd.dotted("V5861", 9) == "V58.61" and icd.dotted("E8490", 9) == "E849.0"
    )
    assert (
        icd.dotted("C187", 10) == "C18.7" and icd.dotted("S82851A", 10) == "S82.851A" and icd.dotted("R55", 10) == "R55"
    )
    assert icd.dotted("486", 9) == "486" and icd.dotted("401.9", 9) == "401.9"
    # the same characters are different chapters in the two versions
    assert icd.chapter_label("V5811", 9) != icd.chapter_label("V5811", 10)
    with pytest.raises(ValueError):
        icd.chapter("I10", 8)


def test_every_chapter_label_is_reachable_and_valid_for_its_version():
    for key, (code, version, _) in CHAPTER_CODES.items():
        label = icd.chapter_label(code, version)
        assert label == LABELS[key], key
        assert label in ICD_CHAPTERS_BY_VERSION[version]
    assert {icd.chapter_label(c, v) for c, v, _ in CHAPTER_CODES.values()} == set(ICD_CHAPTER_LABELS)


EXCLUDED = [
    ("F10", 10, True),
    ("F1020", 10, True),
    ("F99", 10, True),
    ("F01", 10, True),
    ("F0390", 10, True),
    ("F05", 10, True),
    ("G300", 10, True),
    ("G309", 10, True),
    ("G3184", 10, True),
    ("G311", 10, True),
    ("G3281", 10, False),
    ("G20", 10, False),
    ("I10", 10, False),
    ("Z658", 10, False),
    ("2900", 9, True),
    ("290", 9, True),
    ("2948", 9, True),
    ("3000", 9, True),
    ("319", 9, True),
    ("3310", 9, True),
    ("3319", 9, True),
    ("2899", 9, False),
    ("3200", 9, False),
    ("3300", 9, False),
    ("3320", 9, False),
    ("V6284", 9, False),
    ("E9500", 9, False),
    ("4019", 9, False),
]


@pytest.mark.eval
@pytest.mark.parametrize("code,version,excluded", EXCLUDED)
def test_exclusion_codes_of_the_paper(code, version, excluded):
    assert icd.excluded_code(code, version) is excluded


def test_vectorised_exclusion_matches_the_scalar_rule():
    codes = pd.Series([c for c, _, _ in EXCLUDED] + ["290.0", None], dtype="string")
    versions = pd.Series([v for _, v, _ in EXCLUDED] + [9, 10])
    assert excluded_mask(codes, versions).tolist() == [e for _, _, e in EXCLUDED] + [True, False]
