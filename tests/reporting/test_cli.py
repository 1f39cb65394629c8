"""The one ``bedside`` command: its sub-commands (the shared ones and each benchmark's own)."""

from __future__ import annotations

import pytest
from inspect_ai.scorer import Score

from bedside.cli import BadInput, bad_input, main, parser
from tests.reporting.synth import log, sample, write

COMMANDS = {
    "report",
    "strata",
    "audit",
    "compare",
    "estimate",
    "agreement",
    "annotate",
    "rescore",
    "scale",
    "build-cases",
    "replay-check",
    "safety",
    "study",
}


def test_bedside_has_every_sub_command():
    [sub] = [a for a in parser()._actions if a.dest == "command"]
    assert set(sub.choices) == COMMANDS


@pytest.fixture
def logs(tmp_path):
    def one(name, values):
        samples = [
            sample(f"c{i}", {"s": Score(value={"x": v})}, metadata={"category": "A" if i % 2 else "B"})
            for i, v in enumerate(values)
        ]
        return write(log("bedside/cpb", "prov/a", samples), tmp_path / f"{name}.eval")

    return one("base", [0.1, 0.2, 0.3, 0.4]), one("cand", [0.2, 0.3, 0.5, 0.4])


@pytest.mark.eval
def test_strata_and_compare_run_from_the_command(logs, capsys):
    assert main(["strata", logs[0]]) == 0
    assert "category" in capsys.readouterr().out
    assert main(["compare", *logs]) == 0
    out = capsys.readouterr().out
    assert "| `x` |" in out and "no gate" in out


def test_bad_input_is_the_error_of_its_block_only():
    with pytest.raises(BadInput) as bad, bad_input("study build", ValueError, FileNotFoundError):
        raise FileNotFoundError("raters.csv: no such file")
    assert str(bad.value) == "bedside study build: raters.csv: no such file"
    assert isinstance(bad.value.__cause__, FileNotFoundError)
    with pytest.raises(KeyError), bad_input("study build", ValueError):  # not one of its errors: stays a KeyError
        raise KeyError("deeper")


@pytest.mark.eval
def test_a_command_prints_its_bad_input_as_one_line_and_exits_2(logs, tmp_path, capsys, monkeypatch):
    missing = str(tmp_path / "nope.eval")
    assert main(["strata", missing]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"bedside strata: {missing}") and out.count("\n") == 1
    # the same error past the command's narrow block (from its tables, not its input) is no bad input
    def failing(*args, **kwargs):
        raise ValueError("a defect in the tables")

    monkeypatch.setattr("bedside.reporting.strata.strata_table", failing)
    with pytest.raises(ValueError, match="a defect in the tables"):
        main(["strata", logs[0]])
