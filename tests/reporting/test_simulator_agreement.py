"""``bedside agreement LOG --people DIR``: the simulator checker against people's realism rating, per patient
turn. The numbers are checked against a hand-worked example and scikit-learn; bad input stops in one line naming
the file, the record and the field; ``bedside rescore --simulator-checker`` replaces only the simulator check."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from inspect_ai.scorer import Score
from sklearn.metrics import cohen_kappa_score

from bedside.cli import main
from bedside.reporting.simulator_agreement import agreement_table, confusion, kappa_of_counts, read
from tests.reporting.synth import log, sample, write

TURNS = [1, 3, 5, 7]


def checked(sid: str, findings: list[tuple[int | None, str, str]], uuid: str, turns=TURNS, by=("rules",), **meta):
    """A sample whose simulator check found ``findings`` (turn, kind, check)."""
    score = Score(
        value={"simulator_error": float(bool(findings))},
        metadata={
            "findings": [{"turn": t, "kind": k, "check": c, "evidence": ""} for t, k, c in findings],
            "checked_by": list(by),
            "patient_turns": list(turns),
            **meta,
        },
    )
    made = sample(sid, {"simulator_check": score})
    made.uuid = uuid
    return made


LLM = ("rules", "llm:openai/x")
PERSON = ("rules", "person")
#: the checker: a role reversal at turn 5 of both transcripts (and a rules finding about the whole transcript)
CHECKER = [
    checked("a", [(None, "persona_break", "rules:reading_level"), (5, "role_reversal", "llm:openai/x")], "u1", by=LLM),
    checked("b", [(5, "role_reversal", "llm:openai/x")], "u2", by=LLM),
]
#: the people: a leak at turns 1 and 5 of a, a role reversal at turns 1 and 5 of b (the rules' finding beside)
PEOPLE = [
    checked("a", [(1, "unsupported_fact", "person"), (5, "unsupported_fact", "person")], "u1", by=PERSON),
    checked(
        "b",
        [(1, "role_reversal", "person"), (1, "role_reversal", "rules:x"), (5, "role_reversal", "person")],
        "u2",
        by=PERSON,
    ),
]


def logs(tmp_path: Path, checker=CHECKER, people=PEOPLE, rater="phys_a") -> tuple[str, str]:
    folder = tmp_path / rater
    folder.mkdir(exist_ok=True)
    first = write(log("bedside/discharge", "m", checker), tmp_path / "checked.eval")
    write(log("bedside/discharge", "m", people), folder / "rated.eval")
    return first, str(folder)


def test_the_hand_worked_example(tmp_path):
    checker, people = logs(tmp_path)
    pairs, left_out = read([checker], [people], "all")
    assert left_out == {"checker": 0, "people": 0}
    # the whole-transcript finding is at no turn; the rules' finding in the people's log is not the person's
    assert pairs["checker"].tolist() == ["realistic", "realistic", "role_reversal", "realistic"] * 2
    assert pairs["person"].tolist() == ["off_script", "realistic", "off_script", "realistic"] + [
        "role_reversal",
        "realistic",
        "role_reversal",
        "realistic",
    ]
    table = agreement_table(pairs).set_index("level")
    assert (table["n_turns"] == 8).all() and (table["n_transcripts"] == 2).all()
    # any error: checker [0,0,1,0] x2 against people [1,0,1,0] x2: agreement 6/8, chance (2*4 + 6*4)/64 = 1/2
    anyone = table.loc["any error"]
    assert anyone["kappa"] == pytest.approx(0.5) and anyone["agreement"] == pytest.approx(0.75)
    assert anyone["recall"] == pytest.approx(2 / 4) and anyone["false_alarm"] == 0.0
    assert anyone["recall_n"] == 4 and anyone["false_alarm_n"] == 4
    # role reversal: found at b's turn 5, missed at b's turn 1, a false alarm at a's turn 5 (of 6 turns without one)
    reversal = table.loc["role reversal"]
    assert reversal["kappa"] == pytest.approx(1 / 3) and reversal["recall"] == pytest.approx(1 / 2)
    assert reversal["false_alarm"] == pytest.approx(1 / 6)
    # three categories: agreement 5/8, chance (6*4 + 0*2 + 2*2)/64
    assert table.loc["3 categories", "kappa"] == pytest.approx((5 / 8 - 28 / 64) / (1 - 28 / 64))
    assert table.loc["3 categories", "kappa"] == pytest.approx(cohen_kappa_score(pairs["checker"], pairs["person"]))
    for row in table.itertuples():  # every interval inside its scale and around its number
        if not math.isnan(row.kappa_low):
            assert -1 <= row.kappa_low <= row.kappa <= row.kappa_high <= 1, row
        for name in ("recall", "false_alarm"):
            value, low, high = getattr(row, name), getattr(row, f"{name}_low"), getattr(row, f"{name}_high")
            if not math.isnan(low):
                assert 0 <= low <= value <= high <= 1, row
    grid = confusion(pairs)
    assert grid.loc["realistic", "off_script"] == 1 and grid.loc["role_reversal", "off_script"] == 1
    assert grid.loc["total", "total"] == 8


def test_the_checker_alone_and_the_rules_alone(tmp_path):
    checker, people = logs(tmp_path)
    rules, _ = read([checker], [people], "rules")
    assert set(rules["checker"]) == {"realistic"}  # the rules found nothing at a turn
    llm, _ = read([checker], [people], "llm")
    assert llm["checker"].tolist() == read([checker], [people], "all")[0]["checker"].tolist()


def test_kappa_of_counts_is_cohens_kappa():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    table = np.zeros((3, 3))
    np.add.at(table, (a, b), 1)
    assert kappa_of_counts(table) == pytest.approx(cohen_kappa_score(a, b))
    assert math.isnan(kappa_of_counts(np.array([[5.0, 0], [0, 0]])))  # one category on both sides


def test_two_people_are_compared_with_each_other(tmp_path):
    checker, first = logs(tmp_path)
    second_people = [
        checked("a", [(1, "unsupported_fact", "person")], "u1", by=PERSON),
        checked("b", [(1, "role_reversal", "person"), (5, "role_reversal", "person")], "u2", by=PERSON),
    ]
    _, second = logs(tmp_path, people=second_people, rater="phys_b")
    pairs, _ = read([checker], [first, second], "all")
    table = agreement_table(pairs)
    assert set(table["comparison"]) == {"checker vs people", "person vs person"}
    people = table[table["comparison"] == "person vs person"].set_index("level")
    # they differ on a's turn 5 only: any error agreement 7/8
    assert people.loc["any error", "agreement"] == pytest.approx(7 / 8) and people.loc["any error", "n_turns"] == 8
    assert table[table["comparison"] == "checker vs people"]["n_turns"].eq(16).all()


@pytest.mark.parametrize(
    "people, said",
    [
        (
            [checked("c", [], "u3", by=PERSON)],
            "sample c epoch 1: field id: no sample of the checker's logs has this case",
        ),
        ([checked("a", [], "u9", by=PERSON)], "sample a epoch 1: field uuid: u9 is another transcript"),
        ([checked("a", [], "u1", turns=[1, 3], by=PERSON)], "field scores.simulator_check.metadata.patient_turns"),
        ([checked("a", [], "u1")], "field scores.simulator_check.metadata.checked_by: ['rules'] has no person's"),
        ([sample("a", {})], "sample a epoch 1: field scores.simulator_check: no simulator check"),
    ],
)
def test_bad_input_is_one_line_naming_file_record_and_field(tmp_path, capsys, people, said):
    checker, rated = logs(tmp_path, people=people)
    assert main(["agreement", checker, "--people", rated]) == 2
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and said in out and "rated.eval" in out, out


def test_the_command_prints_the_table_the_confusion_and_writes_a_csv(tmp_path, capsys):
    checker, people = logs(tmp_path)
    assert main(["agreement", checker, "--people", people, "--checker", "llm", "--csv", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr().out
    assert "checker vs people" in out and "patient turns by category" in out and "phys_a" in out
    written = pd.read_csv(tmp_path / "t.csv").set_index("level")
    assert written.loc["any error", "kappa"] == pytest.approx(0.5)


def test_an_unreadable_answer_leaves_the_transcript_out_and_says_so(tmp_path, capsys):
    people = [PEOPLE[0], checked("b", [], "u2", by=PERSON, checker_error="unreadable")]
    checker, rated = logs(tmp_path, people=people)
    assert main(["agreement", checker, "--people", rated]) == 0
    out = capsys.readouterr().out
    assert "1 transcript(s) left out: a person's answer could not be read" in out
    assert "checker vs people     any error       4             1" in out


@pytest.mark.eval
def test_rescore_checks_the_simulated_patient_again_and_keeps_every_other_score(tmp_path, capsys):
    from inspect_ai.log import read_eval_log

    from bedside.tasks.discharge import discharge
    from tests.conftest import run, scripted

    roles = {"monitor": scripted(), "grader": scripted(), "patient": scripted(patient_plant=["reversal"])}
    first = run(
        discharge(simulator_check=True, min_turns=4, max_turns=8),
        roles={**roles, "simulator_checker": scripted(checker_flag_turns=[3])},
        log_dir=tmp_path / "run",
        limit=2,
    )
    plain = run(discharge(min_turns=4, max_turns=8), roles=roles, log_dir=tmp_path / "plain", limit=1)
    assert (
        main(
            ["rescore", first.location, plain.location, "--simulator-checker", "bedside/scripted"]
            + ["--checker-M", "checker_flag_turns=[1]", "--out", str(tmp_path / "again")]
        )
        == 0
    )
    again = read_eval_log(str(tmp_path / "again" / Path(first.location).name))
    assert again.eval.model_roles["simulator_checker"].args == {"checker_flag_turns": [1]}
    assert again.eval.metadata["bedside_rescore"]["previous_simulator_checker"].startswith("bedside/scripted")
    assert sorted(s.name for s in again.eval.scorers) == sorted(s.name for s in first.eval.scorers)
    for before, after in zip(first.samples, again.samples):
        assert set(after.scores) == set(before.scores)  # replaced, not added as simulator_check-1
        for name in set(before.scores) - {"simulator_check"}:
            assert after.scores[name].value == before.scores[name].value
        turns = before.scores["simulator_check"].metadata["patient_turns"]
        assert llm_turns(before) == {turns[2]} and llm_turns(after) == {turns[0]}
    # a log without the check gets it, beside its own scores
    added = read_eval_log(str(tmp_path / "again" / Path(plain.location).name))
    [one] = added.samples
    assert "simulator_check" in one.scores and set(plain.samples[0].scores) < set(one.scores)
    assert "simulator_check" in [s.name for s in added.eval.scorers]
    # the same command again leaves the finished logs as they are
    capsys.readouterr()
    assert (
        main(
            ["rescore", first.location, "--simulator-checker", "bedside/scripted"]
            + ["--checker-M", "checker_flag_turns=[1]", "--out", str(tmp_path / "again")]
        )
        == 0
    )


def llm_turns(sample) -> set[int]:
    """The turns the LLM checker flagged in a sample."""
    findings = sample.scores["simulator_check"].metadata["findings"]
    return {f["turn"] for f in findings if f["check"].startswith("llm:")}
