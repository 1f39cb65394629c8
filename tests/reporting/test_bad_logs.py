"""Bad logs stay one line in every reader: a truncated ``.eval`` (the zip cut short) stops it naming the file; a
log still being written (status ``started``) is read with the samples it holds and named as unfinished; a
folder holding the logs of two runs of different cases is refused by ``compare`` naming both."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai.scorer import Score

from bedside.reporting.load import read_runs
from tests.conftest import bedside_command
from tests.reporting.synth import log, sample, write

READERS = (("report", "--out", "OUT"), ("strata",), ("audit",), ("compare", "BASE"), ("estimate", "--cases", "9"))


def scored(sid: str, value: float) -> object:
    return sample(sid, {"conversation_quality": Score(value={"clarity": value})})


def command(reader: tuple[str, ...], path: Path, tmp: Path, base: Path) -> list[str]:
    args = [str(tmp / "out") if a == "OUT" else str(base) if a == "BASE" else a for a in reader[1:]]
    if reader[0] == "compare":
        return [reader[0], *args, str(path)]
    return [reader[0], str(path), *args]


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r[0])
def test_a_truncated_eval_is_one_line_naming_it(tmp_path, reader):
    base = Path(write(log("bedside/discharge", "prov/a", [scored("c1", 3.0)]), tmp_path / "base.eval"))
    cut = tmp_path / "cut.eval"
    cut.write_bytes(base.read_bytes()[: base.stat().st_size // 2])
    done = bedside_command(*command(reader, cut, tmp_path, base))
    assert done.returncode == 2
    [line] = done.stdout.strip().splitlines()
    assert f"{cut}: not a readable eval log (" in line


def test_a_log_still_being_written_is_read_and_named_unfinished(tmp_path):
    started = log("bedside/discharge", "prov/a", [scored("c1", 3.0), scored("c2", 4.0)])
    started.status = "started"
    started.eval.dataset.sample_ids = ["c1", "c2", "c3"]
    path = write(started, tmp_path / "started.eval")
    done = bedside_command("strata", path)
    assert done.returncode == 0
    [line] = [text for text in done.stderr.splitlines() if path in text]
    assert line.startswith(f"warning: {path} is unfinished (status 'started'; 2 of 3 samples)")
    [run] = read_runs([path], say=False)
    assert [str(s.id) for s in run.samples] == ["c1", "c2"]


def test_compare_refuses_a_folder_of_two_runs_in_one_line(tmp_path):
    folder = tmp_path / "two"
    folder.mkdir()
    write(log("bedside/discharge", "prov/a", [scored("c1", 3.0)]), folder / "a.eval")
    write(log("bedside/discharge", "prov/b", [scored("c9", 3.0)]), folder / "b.eval")
    base = write(log("bedside/discharge", "prov/a", [scored("c1", 3.0)]), tmp_path / "base.eval")
    done = bedside_command("compare", base, str(folder))
    assert done.returncode == 2
    [line] = done.stdout.strip().splitlines()
    assert f"{folder}: holds 2 runs" in line and "a.eval" in line and "b.eval" in line
