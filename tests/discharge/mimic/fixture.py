"""A synthetic, MIMIC-shaped fixture for the DischargeBench case builder. NO real data.

:func:`write_fixture` writes, under a folder of the test's ``tmp_path``, gzip CSVs with the official
column names of MIMIC-IV v3.1 ``hosp/`` (patients, admissions, diagnoses_icd, d_icd_diagnoses) and
MIMIC-IV-Note v2.2 ``note/discharge.csv.gz``; the notes are fictional and use MIMIC's section headers.

Every inclusion/exclusion rule of paper A.1 has a patient that proves it (``PATIENTS``, each with the
reason it is in or out), and every one of the 24 chapter labels has at least one eligible patient.
``extra`` adds filler patients (random chapters, seeded) for sampling and memory-scaling checks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

SUBJECT0, HADM0, NOTE_SUBJECT = 10_000_000, 20_000_000, "SYNTHETIC TEST NOTE"
INVALID_MARK = "SCRIPTED-INVALID"

#: main-diagnosis codes (MIMIC form, undotted) of each chapter label, with a plain-language name
CHAPTER_CODES: dict[str, tuple[str, int, str]] = {
    "neo10": ("C187", 10, "sigmoid colon cancer"),
    "neo9": ("1541", 9, "rectal cancer"),
    "circ10": ("I214", 10, "heart attack (NSTEMI)"),
    "circ9": ("41071", 9, "heart attack (subendocardial infarction)"),
    "msk10": ("M5416", 10, "lumbar radiculopathy"),
    "gu10": ("N201", 10, "kidney stone in the ureter"),
    "dig10": ("K8000", 10, "gallbladder inflammation with gallstones"),
    "resp10": ("J4551", 10, "severe asthma attack"),
    "skin9": ("6826", 9, "leg cellulitis"),
    "endo9": ("25013", 9, "diabetic ketoacidosis"),
    "inf9": ("00845", 9, "C. difficile colitis"),
    "inj9": ("82322", 9, "tibia fracture"),
    "blood9": ("2800", 9, "iron deficiency anemia from blood loss"),
    "supp9": ("V5811", 9, "chemotherapy session"),
    "symp9": ("7802", 9, "fainting"),
    "preg9": ("64254", 9, "pre-eclampsia after delivery"),
    "cong9": ("7510", 9, "Meckel diverticulum"),
    "nerv9": ("3570", 9, "Guillain-Barre syndrome"),
    "inj10": ("S82851A", 10, "ankle fracture"),
    "fact10": ("Z5111", 10, "chemotherapy session"),
    "inf10": ("A0472", 10, "C. difficile colitis"),
    "nerv10": ("G610", 10, "Guillain-Barre syndrome"),
    "endo10": ("E1010", 10, "diabetic ketoacidosis"),
    "preg10": ("O00102", 10, "tubal pregnancy"),
    "symp10": ("R55", 10, "fainting"),
    "cong10": ("Q430", 10, "Meckel diverticulum"),
}
#: the label each key maps to (what the chapter mapping must give)
LABELS = {
    "neo10": "Neoplasms",
    "neo9": "Neoplasms",
    "circ10": "Diseases of the Circulatory System",
    "circ9": "Diseases of the Circulatory System",
    "msk10": "Diseases of the Musculoskeletal System and Connective Tissue",
    "gu10": "Diseases of the Genitourinary System",
    "dig10": "Diseases of the Digestive System",
    "resp10": "Diseases of the Respiratory System",
    "skin9": "Diseases of the Skin and Subcutaneous Tissue",
    "endo9": "Endocrine, Nutritional and Metabolic Diseases, and Immunity Disorders",
    "inf9": "Infectious and Parasitic Diseases",
    "inj9": "Injury and Poisoning",
    "blood9": "Diseases of the Blood and Blood-Forming Organs",
    "supp9": "Supplementary Classification of Factors Influencing Health Status and Contact with Health Services",
    "symp9": "Symptoms, Signs, and Ill-Defined Conditions",
    "preg9": "Complications of Pregnancy, Childbirth, and the Puerperium",
    "cong9": "Congenital Anomalies",
    "nerv9": "Diseases of the Nervous System and Sense Organs",
    "inj10": "Injury, Poisoning and Certain Other Consequences of External Causes",
    "fact10": "Factors Influencing Health Status and Contact with Health Services",
    "inf10": "Certain Infectious and Parasitic Diseases",
    "nerv10": "Diseases of the Nervous System",
    "endo10": "Endocrine, Nutritional and Metabolic Diseases",
    "preg10": "Pregnancy, Childbirth and the Puerperium",
    "symp10": "Symptoms, Signs and Abnormal Clinical and Laboratory Findings",
    "cong10": "Congenital Malformations, Deformations and Chromosomal Abnormalities",
}
OTHER_CODES: dict[str, tuple[str, int, str]] = {
    "htn10": ("I10", 10, "Essential (primary) hypertension"),
    "htn9": ("4019", 9, "Unspecified essential hypertension"),
    "dm10": ("E119", 10, "Type 2 diabetes mellitus without complications"),
    "depr10": ("F329", 10, "Major depressive disorder, single episode, unspecified"),
    "delir10": ("F05", 10, "Delirium due to known physiological condition"),
    "alz10": ("G309", 10, "Alzheimer's disease, unspecified"),
    "mci10": ("G3184", 10, "Mild cognitive impairment of uncertain or unknown etiology"),
    "ataxia10": ("G3281", 10, "Cerebellar ataxia in diseases classified elsewhere"),
    "alz9": ("3310", 9, "Alzheimer's disease"),
    "dem9": ("2948", 9, "Other persistent mental disorders due to conditions classified elsewhere"),
    "senile9": ("2900", 9, "Senile dementia, uncomplicated"),
    "mr9": ("319", 9, "Unspecified intellectual disabilities"),
    "park9": ("3320", 9, "Paralysis agitans"),
    "mening9": ("3200", 9, "Hemophilus meningitis"),
    "suicid9": ("V6284", 9, "Suicidal ideation"),
    "ida10": ("D500", 10, "Iron deficiency anemia secondary to blood loss (chronic)"),
    "glauc10": ("H4011", 10, "Primary open-angle glaucoma"),
    "ecode9": ("E8497", 9, "Accidents occurring in residential institution"),
}


@dataclass
class Adm:
    dx: list[str]  # keys of CHAPTER_CODES / OTHER_CODES, in seq_num order (seq_num 1 first)
    note: str = "yes"  # "yes", "no" (no note), "empty" (whitespace text), "two" (two notes, seq 2 and 1)
    main_seq: int = 1  # 2: the diagnoses are numbered from 2 (no seq_num 1)
    mark: str = ""  # extra text put into the note (e.g. INVALID_MARK)


@dataclass
class Pat:
    name: str
    age: int
    adms: list[Adm]
    included: bool  # has at least one eligible admission
    why: str
    gender: str = "F"
    race: str = "WHITE"
    hadm_ids: list[int] = field(default_factory=list)
    subject_id: int = 0


def patients() -> list[Pat]:
    """The fixture's patients: one that proves each rule, then one eligible patient per chapter key."""
    p = [
        Pat("age17", 17, [Adm(["circ10"])], False, "anchor_age 17 < 18"),
        Pat("age66", 66, [Adm(["circ10"])], False, "anchor_age 66 > 65"),
        Pat("age18", 18, [Adm(["circ10", "htn10"])], True, "anchor_age 18 is in", gender="M"),
        Pat("age65", 65, [Adm(["circ9", "htn9"])], True, "anchor_age 65 is in", race="BLACK/AFRICAN AMERICAN"),
        Pat(
            "psych_other_admission",
            40,
            [Adm(["circ10"]), Adm(["htn10", "depr10"], note="no")],
            False,
            "F32.9 in another admission (no note there) excludes the patient",
        ),
        Pat("g30", 50, [Adm(["dig10", "alz10"])], False, "G30.9 (Alzheimer's) excludes"),
        Pat("g31", 50, [Adm(["dig10", "mci10"])], False, "G31.84 excludes"),
        Pat("f05", 50, [Adm(["dig10", "delir10"])], False, "F05 (F00-F09) excludes"),
        Pat(
            "icd9_331",
            45,
            [Adm(["circ9"]), Adm(["htn9", "alz9"], note="no")],
            False,
            "ICD-9 331.0 in another admission excludes",
        ),
        Pat("icd9_294", 45, [Adm(["resp10"]), Adm(["htn9", "dem9"])], False, "ICD-9 294.8 excludes"),
        Pat("icd9_290", 45, [Adm(["neo9", "senile9"])], False, "ICD-9 290.0 excludes"),
        Pat("icd9_319", 45, [Adm(["neo9", "mr9"])], False, "ICD-9 319 excludes"),
        Pat(
            "boundaries_kept",
            44,
            [Adm(["nerv9", "park9", "mening9", "suicid9"]), Adm(["nerv10", "ataxia10"])],
            True,
            "ICD-9 332, 320, V62.84 and ICD-10 G32.81 do not exclude",
            gender="M",
        ),
        Pat("no_seq_num_1", 33, [Adm(["gu10", "htn10"], main_seq=2)], False, "no seq_num 1: no main diagnosis"),
        Pat("no_note", 33, [Adm(["gu10"], note="no")], False, "no discharge note"),
        Pat("empty_note", 33, [Adm(["gu10"], note="empty")], False, "discharge note with empty text"),
        Pat(
            "outside_chapters",
            52,
            [Adm(["ida10"]), Adm(["glauc10"]), Adm(["ecode9"])],
            False,
            "D50.0, H40.11 and E849.7 are chapters outside Table 2",
        ),
        Pat("two_notes", 29, [Adm(["gu10"], note="two")], True, "two notes: the lowest note_seq is used", gender="M"),
        Pat(
            "two_chapters",
            38,
            [Adm(["cong10"]), Adm(["circ10"])],
            True,
            "eligible in two chapters, drawn once (the rarer chapter first)",
            race="ASIAN - CHINESE",
        ),
        Pat(
            "invalid_extraction",
            47,
            [Adm(["symp10"], mark=INVALID_MARK)],
            True,
            "its note makes the scripted extractor reply without the required keys",
        ),
    ]
    single = {"cong10", "symp10"}  # chapters whose only candidate is the patient above
    for i, key in enumerate(k for k in CHAPTER_CODES if k not in single):
        p.append(
            Pat(
                f"chapter_{key}",
                20 + (i * 7) % 45,
                [Adm([key, "htn10" if CHAPTER_CODES[key][1] == 10 else "htn9"])],
                True,
                f"eligible, {LABELS[key]}",
                gender="MF"[i % 2],
                race=RACES[i % len(RACES)],
            )
        )
    for i in range(4):  # a well-populated chapter for the sampling tests
        p.append(
            Pat(
                f"circulatory_{i}",
                30 + i,
                [Adm(["circ10" if i % 2 else "circ9"])],
                True,
                "eligible, circulatory",
                gender="MF"[i % 2],
            )
        )
    return p


RACES = ("WHITE", "BLACK/AFRICAN AMERICAN", "HISPANIC/LATINO - PUERTO RICAN", "ASIAN", "OTHER", "UNKNOWN")


def note_text(subject: str, key: str, mark: str = "", pad: int = 0) -> str:
    """A fictional MIMIC-style discharge note for a main diagnosis key (``pad``: about that many more
    characters of physical-exam text, for notes of realistic length in memory measurements)."""
    code, version, name = CHAPTER_CODES.get(key) or OTHER_CODES[key]
    exam = "VS: T 98.6 HR 80 BP 128/78 RR 16 SpO2 98% RA" + "\nGEN: comfortable, no distress." * (pad // 31)
    return f"""{NOTE_SUBJECT} - fictional, not patient data ({subject}).
{mark}
Name:  ___                     Unit No:   ___
Admission Date:  ___              Discharge Date:   ___
Date of Birth:  ___             Sex:   F
Service: MEDICINE
Allergies:
Penicillins
Attending: ___.
Chief Complaint:
Symptoms of {name}
Major Surgical or Invasive Procedure:
Ultrasound-guided drainage procedure
History of Present Illness:
Ms. ___ is a patient who presented with two days of symptoms of {name}. She came to the emergency department because the symptoms got worse.
Past Medical History:
- Hypertension
- Seasonal allergies
Social History:
Lives with her partner. No tobacco.
Family History:
Mother with hypertension. Father with type 2 diabetes.
Physical Exam:
{exam}
Pertinent Results:
CT scan showed findings consistent with {name}. Blood cultures were negative.
Brief Hospital Course:
She was admitted for {name}. She was treated with IV fluids and IV antibiotics and underwent a drainage procedure. Labs improved.
Medications on Admission:
1. Lisinopril 10 mg PO DAILY
Discharge Medications:
1. Lisinopril 10 mg PO DAILY
2. Amoxicillin 500 mg PO TID Duration: 7 Days
Discharge Disposition:
Home
Discharge Diagnosis:
PRIMARY: {name}
SECONDARY: hypertension
Discharge Condition:
Mental Status: Clear and coherent. Activity Status: Ambulatory - Independent.
Discharge Instructions:
Dear Ms. ___, You were admitted for {name}. Take the new antibiotic amoxicillin three times a day for 7 days. Walk every day and drink plenty of fluids. Stop taking ibuprofen. Please return to the emergency department if you have a fever above 101 F, chest pain or worsening pain.
Followup Instructions:
Please follow up with your PCP, Dr. ___, within 1 week. A blood test is scheduled in 5 days.
"""


@dataclass
class Fixture:
    mimic: Path  # --mimic DIR (holds hosp/)
    note: Path  # --note DIR (holds note/)
    patients: list[Pat]

    def by_name(self, name: str) -> Pat:
        return next(p for p in self.patients if p.name == name)

    def included(self) -> set[int]:
        return {p.subject_id for p in self.patients if p.included}


def write_fixture(root: Path, extra: int = 0, seed: int = 0, pad: int = 0) -> Fixture:
    """Write the fixture under ``root`` (``root/mimic-iv/hosp/*.csv.gz``, ``root/mimic-iv-note/note/``);
    ``extra`` filler patients, notes padded by ``pad`` characters (see :func:`note_text`)."""
    pats = patients()
    rng = random.Random(seed)
    keys = list(CHAPTER_CODES)
    for i in range(extra):
        pats.append(
            Pat(
                f"extra_{i}",
                rng.randint(18, 90),
                [Adm([rng.choice(keys), "htn10"]) for _ in range(rng.randint(1, 3))],
                True,
                "filler",
                gender=rng.choice("MF"),
                race=rng.choice(RACES),
            )
        )
    pt, adm, dx, notes = [], [], [], []
    hadm, note_no = HADM0, 0
    for s, p in enumerate(pats, start=1):
        p.subject_id = SUBJECT0 + s
        if p.name.startswith("extra_"):
            p.included = 18 <= p.age <= 65
        pt.append(
            {
                "subject_id": p.subject_id,
                "gender": p.gender,
                "anchor_age": p.age,
                "anchor_year": 2150,
                "anchor_year_group": "2014 - 2016",
                "dod": "",
            }
        )
        p.hadm_ids = []
        for a in p.adms:
            hadm += 1
            p.hadm_ids.append(hadm)
            adm.append(
                {
                    "subject_id": p.subject_id,
                    "hadm_id": hadm,
                    "admittime": "2150-01-01 10:00:00",
                    "dischtime": "2150-01-05 12:00:00",
                    "deathtime": "",
                    "admission_type": "EW EMER.",
                    "admit_provider_id": "P00000",
                    "admission_location": "EMERGENCY ROOM",
                    "discharge_location": "HOME",
                    "insurance": "Other",
                    "language": "ENGLISH",
                    "marital_status": "SINGLE",
                    "race": p.race,
                    "edregtime": "",
                    "edouttime": "",
                    "hospital_expire_flag": 0,
                }
            )
            for seq, key in enumerate(a.dx, start=a.main_seq):
                code, version, _ = CHAPTER_CODES.get(key) or OTHER_CODES[key]
                dx.append(
                    {
                        "subject_id": p.subject_id,
                        "hadm_id": hadm,
                        "seq_num": seq,
                        "icd_code": code,
                        "icd_version": version,
                    }
                )
            if a.note == "no":
                continue
            if a.note == "empty":
                texts = ["   \n"]
            elif a.note == "two":
                texts = [
                    note_text(p.name, a.dx[0], "SECOND NOTE (note_seq 2)", pad),
                    note_text(p.name, a.dx[0], a.mark, pad),
                ]
            else:
                texts = [note_text(p.name, a.dx[0], a.mark, pad)]
            for k, text in enumerate(texts):
                note_no += 1
                seq = len(texts) - k  # "two": the first row written has note_seq 2
                notes.append(
                    {
                        "note_id": f"{p.subject_id}-DS-{seq}",
                        "subject_id": p.subject_id,
                        "hadm_id": hadm,
                        "note_type": "DS",
                        "note_seq": seq,
                        "charttime": "2150-01-05 00:00:00",
                        "storetime": "2150-01-05 13:00:00",
                        "text": text,
                    }
                )
    titles = [
        {"icd_code": c, "icd_version": v, "long_title": f"{n[0].upper()}{n[1:]}"} for c, v, n in CHAPTER_CODES.values()
    ]
    titles += [{"icd_code": c, "icd_version": v, "long_title": n} for c, v, n in OTHER_CODES.values()]
    mimic, note = root / "mimic-iv", root / "mimic-iv-note"
    (mimic / "hosp").mkdir(parents=True, exist_ok=True)
    (note / "note").mkdir(parents=True, exist_ok=True)
    for name, rows in (("patients", pt), ("admissions", adm), ("diagnoses_icd", dx), ("d_icd_diagnoses", titles)):
        pd.DataFrame(rows).to_csv(mimic / "hosp" / f"{name}.csv.gz", index=False, compression="gzip")
    pd.DataFrame(notes).to_csv(note / "note" / "discharge.csv.gz", index=False, compression="gzip")
    return Fixture(mimic=mimic, note=note, patients=pats)
