"""Cohort selection of MIMIC-IV-Ext-DischargeBench from a credentialed MIMIC-IV copy (paper Appendix A.1).

Sources (as PhysioNet distributes them, gzip CSV): MIMIC-IV v3.1 ``hosp/patients.csv.gz``,
``hosp/admissions.csv.gz``, ``hosp/diagnoses_icd.csv.gz``, ``hosp/d_icd_diagnoses.csv.gz`` and
MIMIC-IV-Note v2.2 ``note/discharge.csv.gz``, joined on ``subject_id`` / ``hadm_id``.

Rules, in order (every count is reported in the summary's ``funnel``):

1. **Age**: adults 18-65 (inclusive) by ``patients.anchor_age``; the case's ``age`` is ``anchor_age``.
2. **Exclusion, across all admissions**: a patient with any ``diagnoses_icd`` row (any ``seq_num``,
   any admission, with or without a note) of ICD-10 F00-F99 or G30-G31, or ICD-9 290-319 or 331
   (:func:`bedside.discharge.mimic.icd.excluded_code`) is excluded whole.
3. **Main diagnosis**: the admission's ``seq_num = 1`` diagnosis ("the first ICD code recorded for
   the admission"); admissions without one are dropped.
4. **Discharge note**: admissions without a non-empty discharge note are dropped. When an admission
   has several, the one of ``note_type`` "DS" with the lowest ``note_seq`` is used.
5. **Chapter**: the main diagnosis is mapped to one of the 24 chapter labels of Table 2
   (:mod:`bedside.discharge.mimic.icd`); admissions whose chapter is not among them are outside the frame.
6. **Stratified sample**: ``per_chapter`` patients per chapter label (the strata are the 24 labels;
   ICD-9 and ICD-10 chapters stay separate unless their names coincide). Each patient appears once:
   the chapters are drawn from the rarest (fewest eligible patients) to the most common, and a
   patient drawn for one chapter is no longer a candidate for the others. Within a chapter the
   candidate admissions, sorted by ``hadm_id``, are shuffled by ``DataFrame.sample`` with
   ``numpy.random.default_rng([seed, i])`` (``i`` = the label's index in ``ICD_CHAPTER_LABELS``), and
   each patient's first admission in that order is kept; the first ``per_chapter`` patients are
   the sample. The draw therefore depends only on the eligible set and the seed, not on file order
   or chunk size. A chapter with fewer eligible patients gives all of them (reported).

Memory: every table is read in chunks (``pandas.read_csv(chunksize=..., usecols=...)``). Only small
per-admission columns are kept (main diagnosis, race, note id and length); the notes are read twice,
the second time keeping only the sampled notes' text. Peak memory is therefore one chunk of notes
plus a few integer columns per admission, whatever the size of the note table.
"""

from __future__ import annotations

import csv
import gzip
import json
import statistics
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from bedside.discharge.mimic import icd
from bedside.discharge.records import ICD_CHAPTER_LABELS
from bedside.params import SetupError

TABLES: dict[str, tuple[str, ...]] = {
    "patients": ("subject_id", "gender", "anchor_age"),
    "admissions": ("subject_id", "hadm_id", "race"),
    "diagnoses_icd": ("subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"),
    "d_icd_diagnoses": ("icd_code", "icd_version", "long_title"),
    "discharge": ("note_id", "subject_id", "hadm_id", "note_type", "note_seq", "text"),
}
MIN_AGE, MAX_AGE = 18, 65
#: rows per chunk of the hosp tables, and of the note table (notes are ~10 kB each)
CHUNKSIZE = 200_000
NOTE_CHUNKSIZE = 500
LABEL_INDEX = {label: i for i, label in enumerate(ICD_CHAPTER_LABELS)}


class CohortError(SetupError):
    """Missing or malformed MIMIC files; the message names the file."""


# ---------------------------------------------------------------------------------------------
# locating and reading the files


def locate(mimic_dir: str | Path, note_dir: str | Path) -> dict[str, Path]:
    """The five source files: ``<mimic>/hosp/<table>.csv.gz`` (or ``<mimic>/<table>.csv.gz``, or
    uncompressed ``.csv``) and ``<note>/note/discharge.csv.gz`` (or ``<note>/discharge.csv.gz``)."""
    found: dict[str, Path] = {}
    places = {name: [Path(mimic_dir) / "hosp", Path(mimic_dir)] for name in TABLES if name != "discharge"}
    places["discharge"] = [Path(note_dir) / "note", Path(note_dir)]
    for name, dirs in places.items():
        candidates = [d / f"{name}{ext}" for d in dirs for ext in (".csv.gz", ".csv")]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            raise CohortError(f"{name}: not found; looked for {', '.join(str(c) for c in candidates[::2])}")
        found[name] = hit
    for name, path in found.items():
        _check_columns(name, path)
    return found


def _open_text(path: Path) -> TextIO:
    """``path`` as text (gzip-compressed when it ends in .gz)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _check_columns(name: str, path: Path) -> None:
    try:
        with _open_text(path) as f:
            header = next(csv.reader(f), [])
    except (OSError, EOFError, UnicodeDecodeError) as ex:
        raise CohortError(f"{path}: cannot read ({ex})") from ex
    missing = [c for c in TABLES[name] if c not in header]
    if missing:
        raise CohortError(f"{path}: missing column(s) {missing}; has {header}")


def _chunks(path: Path, columns: tuple[str, ...], chunksize: int, dtype: dict[str, Any]) -> Iterator[pd.DataFrame]:
    return pd.read_csv(path, usecols=list(columns), chunksize=chunksize, dtype=dtype, keep_default_na=True)


def _ids(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce").astype("Int64")


# ---------------------------------------------------------------------------------------------
# the selection


@dataclass
class Cohort:
    """The sampled cohort: one record per case (with the note text) and the summary."""

    records: list[dict[str, Any]]
    summary: dict[str, Any]
    eligible: pd.DataFrame = field(repr=False)  # one row per eligible admission (no note text)


def excluded_mask(codes: pd.Series, versions: pd.Series) -> pd.Series:
    """Vectorised :func:`bedside.discharge.mimic.icd.excluded_code` (same rules, one chunk at a time)."""
    codes = codes.fillna("").astype(str).str.replace(".", "", regex=False).str.strip().str.upper()
    versions = pd.to_numeric(versions, errors="coerce")
    head = codes.str[:3]
    ten = (versions == 10) & (codes.str.startswith("F") | head.isin(["G30", "G31"]))
    number = pd.to_numeric(head, errors="coerce")  # V and E codes (and ICD-10 codes) give NaN
    nine = (versions == 9) & (number.between(290, 319) | (number == 331))
    return (ten | nine).fillna(False).astype(bool)


def select_cohort(
    mimic_dir: str | Path,
    note_dir: str | Path,
    per_chapter: int = 20,
    seed: int = 0,
    chunksize: int = CHUNKSIZE,
    note_chunksize: int = NOTE_CHUNKSIZE,
) -> Cohort:
    if per_chapter < 1:
        raise CohortError(f"per_chapter must be at least 1, got {per_chapter}")
    if seed < 0:
        raise CohortError(f"seed must be a non-negative integer, got {seed}")
    files = locate(mimic_dir, note_dir)
    funnel: dict[str, int] = {}

    # 1. patients and age
    parts = [
        c.assign(subject_id=_ids(c.subject_id), anchor_age=pd.to_numeric(c.anchor_age, errors="coerce"))
        for c in _chunks(files["patients"], TABLES["patients"], chunksize, {"gender": "string"})
    ]
    patients = pd.concat(parts, ignore_index=True).drop_duplicates("subject_id")
    funnel["patients"] = len(patients)
    patients = patients[patients.anchor_age.between(MIN_AGE, MAX_AGE)]
    funnel["patients_aged_18_65"] = len(patients)

    # 2. exclusions over every diagnosis row; 3. main diagnoses (seq_num 1)
    excluded_parts: list[np.ndarray] = []
    mains: list[pd.DataFrame] = []
    dx_dtype = {"icd_code": "string", "icd_version": "string", "seq_num": "string"}
    for c in _chunks(files["diagnoses_icd"], TABLES["diagnoses_icd"], chunksize, dx_dtype):
        c = c.assign(subject_id=_ids(c.subject_id), hadm_id=_ids(c.hadm_id))
        mask = excluded_mask(c.icd_code, c.icd_version)
        excluded_parts.append(c.subject_id[mask].dropna().drop_duplicates().to_numpy(dtype="int64"))
        first = c[pd.to_numeric(c.seq_num, errors="coerce") == 1]
        first = first[first.icd_code.fillna("").str.strip() != ""]
        mains.append(first[["hadm_id", "icd_code", "icd_version"]])
    if not mains:
        raise CohortError(f"{files['diagnoses_icd']}: no diagnosis rows")
    main = pd.concat(mains, ignore_index=True).drop_duplicates("hadm_id", keep="first")
    main["icd_version"] = pd.to_numeric(main.icd_version, errors="coerce").astype("Int64")
    main["icd_code"] = main.icd_code.str.replace(".", "", regex=False).str.strip().str.upper()
    excluded = np.unique(np.concatenate(excluded_parts)) if excluded_parts else np.array([], dtype="int64")
    funnel["patients_excluded_psychiatric_or_cognitive"] = int(patients.subject_id.isin(excluded).sum())
    patients = patients[~patients.subject_id.isin(excluded)]
    funnel["patients_included"] = len(patients)

    # admissions of the included patients
    adm_parts = []
    for c in _chunks(files["admissions"], TABLES["admissions"], chunksize, {"race": "string"}):
        c = c.assign(subject_id=_ids(c.subject_id), hadm_id=_ids(c.hadm_id))
        adm_parts.append(c[c.subject_id.isin(patients.subject_id)])
    admissions = pd.concat(adm_parts, ignore_index=True).drop_duplicates("hadm_id")
    funnel["admissions_of_included_patients"] = len(admissions)
    admissions = admissions.merge(main, on="hadm_id", how="left")
    no_main = admissions.icd_code.isna() | admissions.icd_version.isna()
    funnel["admissions_without_main_diagnosis"] = int(no_main.sum())
    admissions = admissions[~no_main]

    # 4. discharge notes, pass 1: which admissions have a usable note (no text kept)
    notes = _note_index(files["discharge"], note_chunksize, admissions.hadm_id.to_numpy(dtype="int64"))
    admissions = admissions.merge(notes, on="hadm_id", how="left", suffixes=("", "_note"))
    no_note = admissions.note_id.isna()
    funnel["admissions_without_discharge_note"] = int(no_note.sum())
    admissions = admissions[~no_note]

    # 5. chapters
    pairs = admissions[["icd_code", "icd_version"]].drop_duplicates()
    chapters = {
        (code, int(version)): icd.chapter(code, int(version)) if int(version) in (9, 10) else None
        for code, version in pairs.itertuples(index=False)
    }
    keys = list(zip(admissions.icd_code, admissions.icd_version))
    admissions = admissions.assign(
        icd_chapter=pd.Series([_label(chapters[(c, int(v))]) for c, v in keys], index=admissions.index),
        icd_chapter_title=pd.Series([_title(chapters[(c, int(v))]) for c, v in keys], index=admissions.index),
    )
    outside = admissions.icd_chapter.isna()
    funnel["admissions_chapter_outside_table_2"] = int(outside.sum())
    outside_titles = Counter(admissions.icd_chapter_title[outside].fillna("<no chapter>"))
    eligible = admissions[~outside].merge(patients, on="subject_id", how="inner")
    funnel["eligible_admissions"] = len(eligible)
    funnel["eligible_patients"] = int(eligible.subject_id.nunique())

    # 6. stratified sample
    sample = sample_per_chapter(eligible, per_chapter, seed)
    funnel["sampled_patients"] = len(sample)

    # the sampled notes' text (pass 2) and the codes' titles
    texts = _note_texts(files["discharge"], note_chunksize, set(int(n) for n in sample.note_key))
    titles = _titles(files["d_icd_diagnoses"], chunksize, set(zip(sample.icd_code, sample.icd_version.astype(int))))
    records = [_record(row, texts, titles) for row in sample.itertuples(index=False)]

    summary = {
        "source": {name: str(path) for name, path in files.items()},
        "rules": {
            "age": f"{MIN_AGE}-{MAX_AGE} by anchor_age (inclusive)",
            "excluded_codes": "ICD-10 F00-F99, G30-G31; ICD-9 290-319, 331 (any admission)",
            "main_diagnosis": "diagnoses_icd seq_num 1",
            "strata": "the 24 chapter labels of Table 2 (bedside.discharge.records.ICD_CHAPTER_LABELS)",
        },
        "per_chapter": per_chapter,
        "seed": seed,
        "funnel": funnel,
        "outside_table_2": dict(sorted(outside_titles.items())),
        "chapters": chapter_table(eligible, sample),
        "sampled": summarize(records),
    }
    return Cohort(records=records, summary=summary, eligible=eligible.drop(columns=["note_key"], errors="ignore"))


def _label(found: icd.Chapter | None) -> str | None:
    return None if found is None else found.label


def _title(found: icd.Chapter | None) -> str | None:
    return None if found is None else found.title


def _note_index(path: Path, chunksize: int, wanted: np.ndarray) -> pd.DataFrame:
    """One note per wanted admission: ``note_type`` "DS" first, then the lowest ``note_seq``; notes
    whose text is empty or whitespace are skipped. Returns hadm_id, note_id, note_key (row number in
    the file). The text of each chunk is only tested for a non-space character, then dropped."""
    keep: list[pd.DataFrame] = []
    offset = 0
    dtype = {"note_id": "string", "note_type": "string", "text": "string"}
    for c in _chunks(path, TABLES["discharge"], chunksize, dtype):
        keys = np.arange(offset, offset + len(c))
        offset += len(c)
        hadm = _ids(c.hadm_id)
        usable = (hadm.isin(wanted) & c.text.str.contains(r"\S", regex=True, na=False)).to_numpy(dtype=bool)
        keep.append(
            pd.DataFrame(
                {
                    "hadm_id": hadm[usable].to_numpy(dtype="int64", na_value=-1),
                    "note_id": c.note_id[usable].to_numpy(),
                    "note_key": keys[usable],
                    "not_ds": (c.note_type[usable].fillna("").str.upper() != "DS").to_numpy(dtype=int),
                    "note_seq": pd.to_numeric(c.note_seq[usable], errors="coerce").fillna(np.inf).to_numpy(),
                }
            )
        )
        del c
    index = (
        pd.concat(keep, ignore_index=True)
        if keep
        else pd.DataFrame(columns=["hadm_id", "note_id", "note_key", "not_ds", "note_seq"])
    )
    index = index.sort_values(["hadm_id", "not_ds", "note_seq", "note_key"]).drop_duplicates("hadm_id")
    index["hadm_id"] = index.hadm_id.astype("Int64")
    return index[["hadm_id", "note_id", "note_key"]]


def _note_texts(path: Path, chunksize: int, keys: set[int]) -> dict[int, str]:
    texts: dict[int, str] = {}
    offset = 0
    for c in _chunks(path, ("note_id", "text"), chunksize, {"note_id": "string", "text": "string"}):
        rows = np.arange(offset, offset + len(c))
        offset += len(c)
        hit = np.isin(rows, list(keys))
        for key, text in zip(rows[hit], c.text[hit]):
            texts[int(key)] = str(text)
        if len(texts) == len(keys):
            break
    return texts


def _titles(path: Path, chunksize: int, wanted: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
    titles: dict[tuple[str, int], str] = {}
    for c in _chunks(
        path,
        TABLES["d_icd_diagnoses"],
        chunksize,
        {"icd_code": "string", "icd_version": "string", "long_title": "string"},
    ):
        codes = c.icd_code.fillna("").str.replace(".", "", regex=False).str.strip().str.upper()
        versions = pd.to_numeric(c.icd_version, errors="coerce")
        for code, version, title in zip(codes, versions, c.long_title):
            if pd.notna(version) and (code, int(version)) in wanted:
                titles[(code, int(version))] = "" if pd.isna(title) else str(title)
    return titles


def _record(row: Any, texts: dict[int, str], titles: dict[tuple[str, int], str]) -> dict[str, Any]:
    version = int(row.icd_version)
    return {
        "case_id": f"mimic-{int(row.hadm_id)}",
        "subject_id": int(row.subject_id),
        "hadm_id": int(row.hadm_id),
        "note_id": str(row.note_id),
        "age": int(row.anchor_age),
        "gender": _text(row.gender),
        "race": _text(row.race),
        "icd_code": icd.dotted(row.icd_code, version),
        "icd_code_mimic": str(row.icd_code),
        "icd_version": version,
        "icd_chapter": row.icd_chapter,
        "icd_chapter_title": row.icd_chapter_title,
        "icd_title": titles.get((str(row.icd_code), version), ""),
        "discharge_note": texts[int(row.note_key)],
    }


def _text(value: Any) -> str:
    return "UNKNOWN" if value is None or pd.isna(value) or not str(value).strip() else str(value).strip()


# ---------------------------------------------------------------------------------------------
# sampling


def sample_per_chapter(eligible: pd.DataFrame, per_chapter: int, seed: int) -> pd.DataFrame:
    """``per_chapter`` patients per chapter label, each patient once (see the module docstring).
    ``eligible`` needs ``subject_id``, ``hadm_id`` and ``icd_chapter``; the rows returned are in
    Table 2 label order, then in draw order."""
    counts = eligible.groupby("icd_chapter").subject_id.nunique()
    order = sorted(counts.index, key=lambda label: (counts[label], LABEL_INDEX[label]))
    taken: set[int] = set()
    drawn: dict[str, pd.DataFrame] = {}
    for label in order:
        candidates = eligible[(eligible.icd_chapter == label) & ~eligible.subject_id.isin(taken)]
        candidates = candidates.sort_values("hadm_id", kind="stable")
        rng = np.random.default_rng([seed, LABEL_INDEX[label]])
        shuffled = candidates.sample(frac=1.0, random_state=rng)
        picked = shuffled.drop_duplicates("subject_id", keep="first").head(per_chapter)
        taken.update(int(s) for s in picked.subject_id)
        drawn[label] = picked
    ordered = [drawn[label] for label in ICD_CHAPTER_LABELS if label in drawn]
    if not ordered:
        return eligible.head(0)
    return pd.concat(ordered, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# summaries (Table 2)


def chapter_table(eligible: pd.DataFrame, sample: pd.DataFrame) -> list[dict[str, Any]]:
    """Per chapter label: eligible admissions and patients, sampled patients, by ICD version."""
    rows = []
    for label in ICD_CHAPTER_LABELS:
        e = eligible[eligible.icd_chapter == label]
        s = sample[sample.icd_chapter == label]
        rows.append(
            {
                "icd_chapter": label,
                "eligible_admissions": len(e),
                "eligible_patients": int(e.subject_id.nunique()),
                "sampled": len(s),
                "sampled_icd9": int((s.icd_version == 9).sum()),
                "sampled_icd10": int((s.icd_version == 10).sum()),
            }
        )
    return rows


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Table 2 of a set of case records (cohort records or :class:`DischargeCase` dumps): n, gender,
    age mean (SD), race, ICD chapter and version counts, note length mean (SD)."""
    n = len(records)

    def counts(key: str) -> list[dict[str, Any]]:
        c = Counter(str(r.get(key)) for r in records)
        return [
            {"level": k, "n": v, "percent": round(100 * v / n, 1)}
            for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
        ]

    def mean_sd(values: list[float]) -> dict[str, float | None]:
        if not values:
            return {"mean": None, "sd": None}
        return {
            "mean": round(statistics.fmean(values), 1),
            "sd": round(statistics.stdev(values), 1) if len(values) > 1 else None,
        }

    return {
        "n": n,
        "gender": counts("gender"),
        "age": mean_sd([float(r["age"]) for r in records]),
        "race": counts("race"),
        "icd_chapter": counts("icd_chapter"),
        "icd_version": counts("icd_version"),
        "note_length_chars": mean_sd([float(len(r.get("discharge_note", ""))) for r in records]),
    }


def summary_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """A Table 2-shaped CSV: variable, level, n, percent, mean, sd (plus the chapter table and the
    funnel when the summary has them)."""
    table = summary.get("sampled", summary)
    rows: list[dict[str, Any]] = [{"variable": "Overall", "level": "n", "n": table["n"]}]
    for variable in ("gender", "race", "icd_chapter", "icd_version"):
        rows += [{"variable": variable, **item} for item in table[variable]]
    for variable in ("age", "note_length_chars"):
        rows.append({"variable": variable, "level": "mean (SD)", **table[variable]})
    for item in summary.get("chapters", []):
        rows.append({"variable": "eligible_patients", "level": item["icd_chapter"], "n": item["eligible_patients"]})
    for key, value in summary.get("funnel", {}).items():
        rows.append({"variable": "funnel", "level": key, "n": value})
    return rows


def write_summary(summary: dict[str, Any], json_path: Path, csv_path: Path) -> None:
    json_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    fields = ["variable", "level", "n", "percent", "mean", "sd"]
    with csv_path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(summary_rows(summary))


def format_summary(summary: dict[str, Any]) -> str:
    """The printed cohort summary (funnel, chapters, demographics)."""
    lines = []
    if "funnel" in summary:
        lines.append("Selection (paper A.1):")
        lines += [f"  {k:<46} {v:>9,}" for k, v in summary["funnel"].items()]
    if "chapters" in summary:
        lines.append(
            f"Chapters (per_chapter={summary['per_chapter']}, seed={summary['seed']}): sampled / eligible patients"
        )
        for row in summary["chapters"]:
            short = row["icd_chapter"] if len(row["icd_chapter"]) <= 70 else row["icd_chapter"][:67] + "..."
            mark = "  (fewer than asked)" if row["sampled"] < summary["per_chapter"] else ""
            lines.append(f"  {short:<70} {row['sampled']:>4} / {row['eligible_patients']:<7,}{mark}")
    table = summary.get("sampled", summary)
    lines.append(f"Demographics (n={table['n']}):")
    age = table["age"]
    lines.append(f"  age, mean (SD)        {age['mean']} ({age['sd']})")
    lines.append(
        "  gender                " + ", ".join(f"{g['level']} {g['n']} ({g['percent']}%)" for g in table["gender"])
    )
    lines.append("  race                  " + ", ".join(f"{g['level']} {g['n']}" for g in table["race"]))
    length = table["note_length_chars"]
    lines.append(f"  note length, mean (SD) {length['mean']} ({length['sd']})")
    return "\n".join(lines)


def write_cohort(records: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_cohort(path: str | Path) -> list[dict[str, Any]]:
    """The intermediate cohort JSONL written by :func:`write_cohort`."""
    path = Path(path)
    if not path.is_file():
        raise CohortError(f"{path}: no such cohort file (write one with `bedside build-cases --cohort-only`)")
    records = []
    required = ("case_id", "age", "gender", "race", "icd_code", "icd_version", "icd_chapter", "discharge_note")
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as ex:
                raise CohortError(f"{path}:{lineno}: not valid JSON ({ex.msg})") from ex
            missing = [k for k in required if k not in record]
            if missing:
                raise CohortError(f"{path}:{lineno}: cohort record without {missing}")
            records.append(record)
    if not records:
        raise CohortError(f"{path}: no cohort records")
    return records
