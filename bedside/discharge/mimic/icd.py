"""ICD chapter of a MIMIC-IV main diagnosis, as one of the 24 chapter labels of the paper's Table 2.

Paper Appendix A.1: "We retain the original coding granularity and treat ICD-9 and ICD-10 chapters as
separate strata rather than imposing a manual mapping; each patient appears in exactly one chapter.
Mapping each main-diagnosis ICD code to its parent chapter under this scheme yields 24 chapter
labels." The labels are those :class:`bedside.discharge.records.DischargeCase` accepts
(``ICD_CHAPTER_LABELS``): chapters whose names coincide in ICD-9 and ICD-10 (Neoplasms, the
circulatory, respiratory, ... systems) share one label, the others are labels of one version only.

- **ICD-10-CM** codes are placed with ``simple-icd-10-cm`` (its ancestor chain ends at the chapter,
  numbered 1-22). A code the library does not know (MIMIC-IV spans several ICD-10-CM editions) is
  tried as its 3-character category, then placed by the chapter's letter range
  (:data:`ICD10_CHAPTER_RANGES`, the ranges the library itself prints, 2025 edition).
- **ICD-9-CM** codes are placed by the chapter ranges of :data:`ICD9_CHAPTERS`, from the ICD-9-CM
  Tabular List of Diseases (Volume 1, NCHS/CMS; final FY2014 edition), chapter headings as in its
  Appendix E "List of Three-Digit Categories": 001-139, 140-239, 240-279, 280-289, 290-319,
  320-389, 390-459, 460-519, 520-579, 580-629, 630-679, 680-709, 710-739, 740-759, 760-779,
  780-799, 800-999, the supplementary V codes (V01-V91) and E codes (E000-E999).

Chapters that are not among the 24 labels give ``label=None`` (the admission is outside the sampling
frame and counted as such in the cohort summary): ICD-9 mental disorders (290-319, excluded anyway),
the perinatal period (760-779) and the E codes (external causes); ICD-10 chapters 3 (blood and
immune mechanism, D50-D89: the ``DischargeCase`` schema keeps the "Diseases of the Blood and
Blood-Forming Organs" label for ICD-9 only), 5 (mental, excluded anyway), 7 (eye), 8 (ear), 16
(perinatal), 20 (external causes, V00-Y99) and 22 (special purposes, U00-U85). None of these
appears in the paper's Table 2.

MIMIC-IV stores codes without the dot (``4019``, ``V5861``, ``E8490``, ``S82851A``);
:func:`dotted` writes them the usual way (``401.9``, ``V58.61``, ``E849.0``, ``S82.851A``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bedside.discharge.records import ICD_CHAPTER_LABELS, ICD_CHAPTERS_BY_VERSION

# ---------------------------------------------------------------------------------------------
# ICD-9-CM: (first, last, chapter title, Table 2 label or None)

#: ICD-9-CM chapters of the numeric codes, by 3-digit category (Tabular List, Volume 1).
ICD9_CHAPTERS: tuple[tuple[int, int, str, str | None], ...] = (
    (1, 139, "Infectious and Parasitic Diseases", "Infectious and Parasitic Diseases"),
    (140, 239, "Neoplasms", "Neoplasms"),
    (
        240,
        279,
        "Endocrine, Nutritional and Metabolic Diseases, and Immunity Disorders",
        "Endocrine, Nutritional and Metabolic Diseases, and Immunity Disorders",
    ),
    (280, 289, "Diseases of the Blood and Blood-Forming Organs", "Diseases of the Blood and Blood-Forming Organs"),
    (290, 319, "Mental Disorders", None),
    (320, 389, "Diseases of the Nervous System and Sense Organs", "Diseases of the Nervous System and Sense Organs"),
    (390, 459, "Diseases of the Circulatory System", "Diseases of the Circulatory System"),
    (460, 519, "Diseases of the Respiratory System", "Diseases of the Respiratory System"),
    (520, 579, "Diseases of the Digestive System", "Diseases of the Digestive System"),
    (580, 629, "Diseases of the Genitourinary System", "Diseases of the Genitourinary System"),
    (
        630,
        679,
        "Complications of Pregnancy, Childbirth, and the Puerperium",
        "Complications of Pregnancy, Childbirth, and the Puerperium",
    ),
    (680, 709, "Diseases of the Skin and Subcutaneous Tissue", "Diseases of the Skin and Subcutaneous Tissue"),
    (
        710,
        739,
        "Diseases of the Musculoskeletal System and Connective Tissue",
        "Diseases of the Musculoskeletal System and Connective Tissue",
    ),
    (740, 759, "Congenital Anomalies", "Congenital Anomalies"),
    (760, 779, "Certain Conditions Originating in the Perinatal Period", None),
    (780, 799, "Symptoms, Signs, and Ill-Defined Conditions", "Symptoms, Signs, and Ill-Defined Conditions"),
    (800, 999, "Injury and Poisoning", "Injury and Poisoning"),
)
ICD9_V_CHAPTER = (
    "Supplementary Classification of Factors Influencing Health Status and Contact with Health Services",
    "Supplementary Classification of Factors Influencing Health Status and Contact with Health Services",
)
ICD9_E_CHAPTER = ("Supplementary Classification of External Causes of Injury and Poisoning", None)

# ---------------------------------------------------------------------------------------------
# ICD-10-CM: chapter number (simple-icd-10-cm) -> (first category, last category, Table 2 label)

ICD10_CHAPTER_RANGES: dict[int, tuple[str, str, str | None]] = {
    1: ("A00", "B99", "Certain Infectious and Parasitic Diseases"),
    2: ("C00", "D49", "Neoplasms"),
    3: ("D50", "D89", None),  # blood and immune mechanism: not a Table 2 label for ICD-10
    4: ("E00", "E89", "Endocrine, Nutritional and Metabolic Diseases"),
    5: ("F01", "F99", None),  # mental and behavioural disorders (excluded patients anyway)
    6: ("G00", "G99", "Diseases of the Nervous System"),
    7: ("H00", "H59", None),  # eye and adnexa
    8: ("H60", "H95", None),  # ear and mastoid process
    9: ("I00", "I99", "Diseases of the Circulatory System"),
    10: ("J00", "J99", "Diseases of the Respiratory System"),
    11: ("K00", "K95", "Diseases of the Digestive System"),
    12: ("L00", "L99", "Diseases of the Skin and Subcutaneous Tissue"),
    13: ("M00", "M99", "Diseases of the Musculoskeletal System and Connective Tissue"),
    14: ("N00", "N99", "Diseases of the Genitourinary System"),
    15: ("O00", "O9A", "Pregnancy, Childbirth and the Puerperium"),
    16: ("P00", "P96", None),  # perinatal period
    17: ("Q00", "QA0", "Congenital Malformations, Deformations and Chromosomal Abnormalities"),
    18: ("R00", "R99", "Symptoms, Signs and Abnormal Clinical and Laboratory Findings"),
    19: ("S00", "T88", "Injury, Poisoning and Certain Other Consequences of External Causes"),
    20: ("V00", "Y99", None),  # external causes of morbidity
    21: ("Z00", "Z99", "Factors Influencing Health Status and Contact with Health Services"),
    22: ("U00", "U85", None),  # codes for special purposes
}

# every label used above is a schema label of its version (checked at import: a typo fails loudly)
for _chapter in ICD9_CHAPTERS + ((0, 0, *ICD9_V_CHAPTER), (0, 0, *ICD9_E_CHAPTER)):
    assert _chapter[-1] is None or _chapter[-1] in ICD_CHAPTERS_BY_VERSION[9], _chapter
for _range in ICD10_CHAPTER_RANGES.values():
    assert _range[-1] is None or _range[-1] in ICD_CHAPTERS_BY_VERSION[10], _range
assert {label for *_, label in ICD9_CHAPTERS if label} | {ICD9_V_CHAPTER[1]} | {
    label for *_, label in ICD10_CHAPTER_RANGES.values() if label
} == set(ICD_CHAPTER_LABELS)


@dataclass(frozen=True)
class Chapter:
    """Where a code belongs: the chapter's own title, and its Table 2 label (None: not one of the 24)."""

    version: int
    title: str
    label: str | None
    how: str  # "simple-icd-10-cm", "category", "range" (ICD-10 fallbacks) or "icd9-table"


def normalise(code: str) -> str:
    """Upper case, no dot, no spaces (MIMIC-IV's form)."""
    return re.sub(r"[\s.]", "", str(code)).upper()


def dotted(code: str, version: int) -> str:
    """The code with its dot: ``4019`` -> ``401.9``, ``V5861`` -> ``V58.61``, ``E8490`` -> ``E849.0``,
    ``C187`` -> ``C18.7``; codes of 3 characters (4 for E codes) stay as they are."""
    code = normalise(code)
    cut = 4 if int(version) == 9 and code.startswith("E") else 3
    return code if len(code) <= cut else f"{code[:cut]}.{code[cut:]}"


def icd9_chapter(code: str) -> Chapter | None:
    code = normalise(code)
    if not code:
        return None
    if code[0] == "V":
        return Chapter(9, ICD9_V_CHAPTER[0], ICD9_V_CHAPTER[1], "icd9-table")
    if code[0] == "E":
        return Chapter(9, ICD9_E_CHAPTER[0], ICD9_E_CHAPTER[1], "icd9-table")
    head = code[:3]
    if not head.isdigit():
        return None
    number = int(head)
    for first, last, title, label in ICD9_CHAPTERS:
        if first <= number <= last:
            return Chapter(9, title, label, "icd9-table")
    return None


@lru_cache(maxsize=1)
def _icd10() -> Any:  # the simple_icd_10_cm module (untyped)
    import warnings

    with warnings.catch_warnings():  # the library loads its data with deprecated importlib calls
        warnings.simplefilter("ignore", DeprecationWarning)
        import simple_icd_10_cm as cm

    return cm


def _chapter_number(code: str) -> int | None:
    cm = _icd10()
    if not cm.is_valid_item(code):
        return None
    ancestors = cm.get_ancestors(code)
    top = ancestors[-1] if ancestors else code
    return int(top) if str(top).isdigit() else None


@lru_cache(maxsize=65536)
def icd10_chapter(code: str) -> Chapter | None:
    code = normalise(code)
    if not code or not code[0].isalpha():
        return None
    for candidate, how in ((code, "simple-icd-10-cm"), (code[:3], "category")):
        number = _chapter_number(candidate)
        if number is not None:
            first, last, label = ICD10_CHAPTER_RANGES[number]
            return Chapter(10, _title(number), label, how)
    head = code[:3]
    for number, (first, last, label) in ICD10_CHAPTER_RANGES.items():
        if number == 22:
            continue  # U codes: checked last (U00-U85 would not compare with the letter ranges)
        if first <= head <= last:
            return Chapter(10, _title(number), label, "range")
    if head[0] == "U":
        return Chapter(10, _title(22), None, "range")
    return None


def _title(number: int) -> str:
    return re.sub(r"\s*\([A-Z0-9]+-[A-Z0-9]+\)\s*$", "", _icd10().get_description(str(number)))


def chapter(code: str, version: int) -> Chapter | None:
    """The chapter of ``code`` under ``version`` (9 or 10); None if the code fits no chapter."""
    version = int(version)
    if version == 9:
        return icd9_chapter(code)
    if version == 10:
        return icd10_chapter(code)
    raise ValueError(f"icd_version must be 9 or 10, got {version!r}")


def chapter_label(code: str, version: int) -> str | None:
    """The Table 2 label of ``code`` (None: no chapter, or a chapter outside the 24 labels)."""
    found = chapter(code, version)
    return None if found is None else found.label


# ---------------------------------------------------------------------------------------------
# the paper's exclusion codes (psychiatric, dementia and other cognitive disorders)


def excluded_code(code: str, version: int) -> bool:
    """Paper A.1: ICD-10 F10-F99 (mental and psychiatric) and F00-F09, G30-G31 (dementia and other
    cognitive disorders incl. Alzheimer's disease); ICD-9 290-319 (incl. 290 and 294) and 331."""
    code = normalise(code)
    if int(version) == 10:
        return code.startswith("F") or code[:3] in ("G30", "G31")
    head = code[:3]
    return head.isdigit() and (290 <= int(head) <= 319 or int(head) == 331)
