"""The one ``bedside`` command: its sub-commands, and the deprecated spellings that say so."""

from __future__ import annotations

import pytest
from inspect_ai.scorer import Score

from bedside.cli import deprecated_report, main, parser
from tests.reporting.synth import log, sample, write

COMMANDS = {
    "report",
    "strata",
    "audit",
    "compare",
    "agreement",
    "annotate",
    "rescore",
    "build-cases",
    "replay-check",
    "safety",
    "delta",
}


def test_bedside_has_every_sub_command():
    [sub] = [a for a in parser()._actions if a.dest == "command"]
    assert set(sub.choices) == COMMANDS
    assert "DEPRECATED" in sub.choices["delta"].description.upper()


@pytest.fixture
def logs(tmp_path):
    def one(name, values):
        samples = [
            sample(f"c{i}", {"s": Score(value={"x": v})}, metadata={"category": "A" if i % 2 else "B"})
            for i, v in enumerate(values)
        ]
        return write(log("bedside/cpb", "prov/a", samples), tmp_path / f"{name}.eval")

    return one("base", [0.1, 0.2, 0.3, 0.4]), one("cand", [0.2, 0.3, 0.5, 0.4])


def test_bedside_report_alias_says_it_is_deprecated_and_runs_the_same_command(logs, capsys):
    assert main(["strata", logs[0]]) == 0
    new = capsys.readouterr()
    assert deprecated_report(["strata", logs[0]]) == 0
    old = capsys.readouterr()
    assert old.out == new.out and "category" in new.out
    assert "bedside-report is deprecated" in old.err and "bedside strata" in old.err and not new.err


def test_delta_is_compare_without_a_gate(logs, capsys):
    assert main(["compare", *logs]) == 0
    new = capsys.readouterr()
    assert main(["delta", *logs]) == 0
    old = capsys.readouterr()
    assert old.out == new.out and "| `x` |" in new.out and "no gate" in new.out
    assert "bedside delta is deprecated" in old.err and "bedside compare" in old.err
