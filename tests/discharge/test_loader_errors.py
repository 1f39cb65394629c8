"""Bad DischargeBench case files: each problem is reported with file, line, case id and field;
all bad records are listed together; the CLI prints the report without a Python traceback."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bedside.compat import PrerequisiteError
from bedside.discharge.records import CaseFileError, load_cases
from bedside.discharge.samples import DEMO_CASES
from tests import forked
from tests.conftest import REPO

INSPECT = str(Path(sys.executable).parent / "inspect")


def demo_records(n: int = 3) -> list[dict]:
    return [json.loads(line) for line in DEMO_CASES.read_text().splitlines() if line.strip()][:n]


def write_lines(tmp_path: Path, lines: list[str | bytes], name: str = "cases.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode("utf-8") for x in lines) + b"\n")
    return path


def write(tmp_path: Path, records: list[dict]) -> Path:
    return write_lines(tmp_path, [json.dumps(r) for r in records])


def problems(path: Path) -> str:
    with pytest.raises(CaseFileError) as err:
        load_cases(path)
    assert isinstance(err.value, PrerequisiteError) and isinstance(err.value, ValueError)
    return str(err.value)


@pytest.mark.eval
def test_non_utf8_names_file_line_case_and_field(tmp_path):
    records = demo_records()
    lines: list[str | bytes] = [json.dumps(r) for r in records]
    # line 2: a Latin-1 "é" inside the note
    lines[1] = json.dumps(records[1]).encode().replace(b"FICTIONAL SYNTHETIC CASE", b"FICTIONAL SYNTHETIC CAS\xc9", 1)
    path = write_lines(tmp_path, lines)
    msg = problems(path)
    offset = len(json.dumps(records[0]).encode()) + 1 + lines[1].index(b"\xc9")
    assert f"{path}:2: case '{records[1]['case_id']}': field 'discharge_note': not valid UTF-8" in msg
    assert "byte 0xc9" in msg and f"byte offset {offset} of the file" in msg
    assert "1 problem(s)" in msg


@pytest.mark.eval
def test_non_utf8_file_reports_every_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in demo_records())
        .replace("FICTIONAL", "FICTIONAL é")
        .encode("latin-1", "replace")
    )
    msg = problems(path)
    for lineno in (1, 2, 3):
        assert f"{path}:{lineno}: case " in msg
    assert msg.count("not valid UTF-8") == 3 and "field 'discharge_note'" in msg


def test_non_utf8_outside_json_names_the_line(tmp_path):
    records = demo_records(2)
    path = write_lines(tmp_path, [json.dumps(records[0]), b"\xff\xfe garbage"])
    msg = problems(path)
    assert f"{path}:2: not valid UTF-8 (byte 0xff at column 1, byte offset {len(json.dumps(records[0])) + 1}" in msg


def test_utf8_bom_is_accepted(tmp_path):
    records = demo_records(2)
    path = write_lines(tmp_path, [b"\xef\xbb\xbf" + json.dumps(records[0]).encode(), json.dumps(records[1])])
    assert [c.case_id for c in load_cases(path)] == [r["case_id"] for r in records]


@pytest.mark.eval
@pytest.mark.parametrize("field", ["discharge_note", "main_diagnosis", "gender", "race", "icd_code", "case_id"])
@pytest.mark.parametrize("blank", [" ", "\n\t  \n", "\u00a0"])
def test_whitespace_only_required_string_rejected(tmp_path, field, blank):
    records = demo_records()
    records[2][field] = blank
    path = write(tmp_path, records)
    msg = problems(path)
    case_id = blank if field == "case_id" else records[2]["case_id"]
    assert f"{path}:3: case {case_id!r}: field '{field}': must not be empty or whitespace only" in msg


@pytest.mark.eval
def test_optional_strings_may_still_be_empty(tmp_path):
    records = demo_records(1)
    records[0]["family_history"] = ""
    records[0]["discharge_info"]["new_medications"] = ""
    records[0]["checklist_questions"] = [q for q in records[0]["checklist_questions"] if not q.startswith("Q2")]
    assert load_cases(write(tmp_path, records))[0].family_history == ""


@pytest.mark.eval
@pytest.mark.parametrize("age", [True, False, "40", 40.5, None])
def test_non_integer_age_rejected(tmp_path, age):
    records = demo_records()
    records[0]["age"] = age
    path = write(tmp_path, records)
    msg = problems(path)
    assert f"{path}:1: case '{records[0]['case_id']}': field 'age': Input should be a valid integer" in msg
    assert f"(got {age!r})" in msg


@pytest.mark.eval
def test_duplicate_keys_rejected_top_level_and_nested(tmp_path):
    records = demo_records()
    line2 = json.dumps(records[1])
    # "age" twice at the top level, "follow_up_appointments" twice inside discharge_info
    line2 = line2.replace('"age": ', '"age": 51, "age": ', 1)
    line2 = line2.replace('"follow_up_appointments": ', '"follow_up_appointments": "x", "follow_up_appointments": ', 1)
    path = write_lines(tmp_path, [json.dumps(records[0]), line2, json.dumps(records[2])])
    msg = problems(path)
    case = repr(records[1]["case_id"])
    assert f"{path}:2: case {case}: field 'age': key given more than once in the record" in msg
    assert f"{path}:2: case {case}: field 'discharge_info.follow_up_appointments': key given more than once" in msg
    assert "2 problem(s)" in msg


@pytest.mark.eval
def test_identical_duplicate_key_still_rejected(tmp_path):
    records = demo_records(1)
    line = json.dumps(records[0]).replace('"race": ', f'"race": {json.dumps(records[0]["race"])}, "race": ', 1)
    path = write_lines(tmp_path, [line])
    assert f"{path}:1: case '{records[0]['case_id']}': field 'race': key given more than once" in problems(path)


@pytest.mark.eval
@pytest.mark.parametrize(
    "chapter",
    ["Diseases of the circulatory system", "Mental Disorders", "Diseases of the Ear and Mastoid Process", ""],
)
def test_unknown_icd_chapter_rejected(tmp_path, chapter):
    records = demo_records()
    records[1]["icd_chapter"] = chapter
    path = write(tmp_path, records)
    msg = problems(path)
    assert f"{path}:2: case '{records[1]['case_id']}': field 'icd_chapter':" in msg
    if chapter:
        assert "not one of the 24 ICD chapter labels" in msg


@pytest.mark.eval
def test_icd_chapter_suggests_the_close_label(tmp_path):
    records = demo_records(1)
    records[0]["icd_chapter"] = "Diseases of the circulatory system"
    msg = problems(write(tmp_path, records))
    assert "did you mean 'Diseases of the Circulatory System'?" in msg


@pytest.mark.eval
@pytest.mark.parametrize(
    ("chapter", "version"),
    [
        ("Congenital Anomalies", 10),
        ("Injury and Poisoning", 10),
        ("Congenital Malformations, Deformations and Chromosomal Abnormalities", 9),
        ("Diseases of the Nervous System", 9),
    ],
)
def test_icd_chapter_of_the_other_version_rejected(tmp_path, chapter, version):
    records = demo_records(1)
    records[0]["icd_chapter"], records[0]["icd_version"] = chapter, version
    path = write(tmp_path, records)
    msg = problems(path)
    assert f"{path}:1: case '{records[0]['case_id']}': field 'icd_chapter':" in msg
    assert f"is an ICD-{19 - version} chapter label, but icd_version is {version}" in msg


@pytest.mark.eval
@pytest.mark.parametrize("version", [9, 10])
def test_shared_chapter_label_valid_for_both_versions(tmp_path, version):
    records = demo_records(1)
    records[0]["icd_chapter"], records[0]["icd_version"] = "Neoplasms", version
    assert load_cases(write(tmp_path, records))[0].icd_version == version


@pytest.mark.eval
def test_all_bad_records_reported_together(tmp_path):
    records = demo_records(5)
    records[0]["age"] = True
    records[1]["discharge_note"] = "   "
    records[3]["icd_chapter"] = "Mental Disorders"
    lines: list[str | bytes] = [json.dumps(r) for r in records]
    lines[2] = lines[2].replace('"gender": ', '"gender": "F", "gender": ', 1)
    lines[4] = lines[4].encode().replace(b"FICTIONAL", b"FICTIONAL \x80", 1)
    path = write_lines(tmp_path, lines)
    msg = problems(path)
    assert "5 problem(s)" in msg
    for lineno, field in [(1, "age"), (2, "discharge_note"), (3, "gender"), (4, "icd_chapter"), (5, "discharge_note")]:
        assert f"{path}:{lineno}: case '{records[lineno - 1]['case_id']}': field '{field}':" in msg, (lineno, msg)


def test_folder_instead_of_file(tmp_path):
    with pytest.raises(CaseFileError, match="is a folder"):
        load_cases(tmp_path)


@pytest.mark.eval
def test_markup_like_path_is_kept_verbatim(tmp_path):
    folder = tmp_path / "[bold]x"
    folder.mkdir()
    records = demo_records(1)
    records[0]["age"] = True
    path = write(folder, records)
    with pytest.raises(CaseFileError) as err:
        load_cases(path)
    assert f"{path}:1:" in str(err.value)
    assert "\\[bold]x" in err.value.message  # the CLI renders .message as rich markup


@pytest.mark.eval
def test_cli_prints_the_report_without_traceback(tmp_path):
    records = demo_records()
    records[0]["age"] = True
    records[2]["discharge_note"] = " \n "
    lines: list[str | bytes] = [json.dumps(r) for r in records]
    lines[1] = lines[1].encode().replace(b"FICTIONAL", b"FICTIONAL \xe9", 1)
    path = write_lines(tmp_path, lines)
    env = {**os.environ, "COLUMNS": "300", "INSPECT_LOG_DIR": str(tmp_path / "logs")}
    command = [
        INSPECT,
        "eval",
        "tasks/discharge.py",
        "--model",
        "bedside/scripted",
        "-T",
        f"data={path}",
        "--limit",
        "1",
        "--log-dir",
        str(tmp_path / "logs"),
    ]
    proc = forked.run(command, cwd=REPO, env=env, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in output, output[-3000:]
    assert f"{path}: rejected, 3 problem(s):" in output
    assert f"{path}:1: case '{records[0]['case_id']}': field 'age':" in output
    assert f"{path}:2: case '{records[1]['case_id']}': field 'discharge_note': not valid UTF-8" in output
    assert f"{path}:3: case '{records[2]['case_id']}': field 'discharge_note': must not be empty" in output
    assert not list((tmp_path / "logs").glob("*.eval"))  # rejected before any model call
