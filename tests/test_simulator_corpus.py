"""The corpus of simulated-patient turns (tests/corpus/simulator_errors) and its measurement
(bench/simulator_corpus.py): its schema, its counts, its seeded split, that recall and false alarms are
computed over the turns of each split (no threshold on the rates: they are measured, not pinned), and that the
counts the report states (bedside/reporting/simulator_corpus.yaml) are those of the rules as they are."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from bedside.reporting.simulator import CORPUS_RECORD, corpus_recall
from bedside.simulator_checks import KINDS
from bench.simulator_corpus import counts as record_counts
from bench.simulator_corpus import findings_at, measure, table, transcript
from tests.corpus.simulator_errors import (
    LABELS,
    REALISTIC,
    SPLITS,
    Item,
    _item,
    assign_splits,
    cases,
    load,
)

MIN_PER_KIND = 40
MIN_REALISTIC = 100


def test_every_case_names_a_benchmark_and_its_materials() -> None:
    for name, case in cases().items():
        assert case["benchmark"] in ("discharge", "medsp", "cpb"), name
        assert case["materials"], name
        if case["benchmark"] == "discharge":
            assert set(case["persona"]) == {"personality", "education", "health_literacy", "recall"}, name


def test_counts_per_kind_and_every_kind_in_both_halves() -> None:
    halves = {split: load(split) for split in SPLITS}
    total = Counter(item.kind for items in halves.values() for item in items)
    for kind in KINDS:
        assert total[kind] >= MIN_PER_KIND, kind
    assert total[REALISTIC] >= MIN_REALISTIC
    for split, items in halves.items():
        assert set(Counter(i.kind for i in items)) == set(LABELS), split
    ids = [i.id for items in halves.values() for i in items]
    assert len(ids) == len(set(ids))


def test_every_item_is_a_turn_that_answers_a_clinician() -> None:
    for split in SPLITS:
        for item in load(split):
            assert item.clinician.strip() and item.source.strip(), item.id
            assert item.kind == "early_end" or item.patient.strip(), item.id


def test_the_halves_are_the_seeded_split_of_their_union() -> None:
    by_label: dict[str, list[str]] = {}
    on_file = {}
    for split in SPLITS:
        for item in load(split):
            by_label.setdefault(item.kind, []).append(item.id)
            on_file[item.id] = split
    assert assign_splits(by_label) == on_file
    assert assign_splits(by_label, seed=1) != on_file


def test_a_bad_item_is_one_line_naming_the_file_the_record_and_the_field() -> None:
    raw = {"id": "x-1", "kind": "role_reversal", "case": "dc-chf", "source": "s", "clinician": "c", "patient": "p"}
    known = set(cases())
    assert _item(Path("dev.yaml"), raw, known).kind == "role_reversal"
    with pytest.raises(ValueError, match=r"^dev.yaml: item x-1: field kind: 'reversal' is not one of"):
        _item(Path("dev.yaml"), {**raw, "kind": "reversal"}, known)
    with pytest.raises(ValueError, match=r"^dev.yaml: item x-1: field case: 'nowhere' is not in cases.yaml$"):
        _item(Path("dev.yaml"), {**raw, "case": "nowhere"}, known)
    with pytest.raises(ValueError, match=r"^dev.yaml: item x-1: field after: not a list of"):
        _item(Path("dev.yaml"), {**raw, "after": [["nurse", "hi"]]}, known)


def test_the_checked_turn_is_the_patient_turn_after_its_history_and_the_clinician() -> None:
    item = Item(
        id="t",
        kind="early_end",
        case="dc-chf",
        source="s",
        clinician="Next, your salt.",
        patient="Goodbye now.",
        history=(("clinician", "Hello."), ("patient", "Hi.")),
        after=(("clinician", "Wait."), ("patient", "Okay."), ("clinician", "Less salt.")),
    )
    view, checked = transcript(item, cases()["dc-chf"])
    assert checked == 3 and view.turns[checked].message == "Goodbye now." and view.turns[checked].role == "patient"
    assert view.turns[2].role == "educator" and len(view.turns) == 7
    assert {f.kind for f in findings_at(item, cases()["dc-chf"])} == {"early_end"}


def test_the_rules_see_what_the_transcript_gives_them() -> None:
    """The transcript carries the case's persona and materials: a disclosure is flagged, a dose of the note is grounded."""
    base = {"id": "t", "case": "dc-chf", "source": "s", "clinician": "How are you?"}
    disclosure = Item(kind="persona_break", patient="As an AI language model, I have no body.", **base)
    note_dose = Item(kind=REALISTIC, patient="The furosemide, forty milligrams, every morning?", **base)
    unsupported = Item(kind="unsupported_fact", patient="I take warfarin 5 mg every night.", **base)
    assert "persona_break" in {f.kind for f in findings_at(disclosure, cases()["dc-chf"])}
    # the note's dose is grounded (no unsupported fact); this poor-recall persona reciting drug and dose unasked
    # ("forty milligrams" is a number) breaks its persona
    assert [(f.kind, f.check) for f in findings_at(note_dose, cases()["dc-chf"])] == [("persona_break", "rules:recall")]
    assert "unsupported_fact" in {f.kind for f in findings_at(unsupported, cases()["dc-chf"])}


@pytest.mark.parametrize("split", SPLITS)
def test_recall_and_false_alarms_are_computed_over_the_split(split: str) -> None:
    items = load(split)
    counts = Counter(i.kind for i in items)
    m = measure(split)
    for kind in KINDS:
        rate = m.recall[kind]
        assert rate.n == counts[kind] and 0 <= rate.k <= rate.n
        assert len(m.misses[kind]) == rate.n - rate.k
        low, high = rate.interval
        assert 0 <= low <= rate.k / rate.n <= high <= 1
        assert m.false_alarms_by_kind[kind].n == counts[REALISTIC]
    assert m.false_alarms.n == counts[REALISTIC]
    assert m.false_alarms.k == len({i for i, _ in m.alarms})
    assert f"| {split} | `role_reversal` | {m.recall['role_reversal']} |" in table([m])
    # the report's record is this measurement (else: python -m bench.simulator_corpus --write)
    record = yaml.safe_load(CORPUS_RECORD.read_text(encoding="utf-8"))
    assert record["splits"][split] == record_counts(m), f"{CORPUS_RECORD.name} is stale: run the bench with --write"


def test_the_report_states_the_held_out_recall_per_kind_with_n_and_interval() -> None:
    rate = {"k": 3, "n": 20}
    split = {"recall": dict.fromkeys(KINDS, rate), "false_alarms_any": {"k": 1, "n": 50}}
    record = {"measured": "2026-01-02", "rules_commit": "abc1234", "command": "cmd", "splits": {"held_out": split}}
    text = corpus_recall(
        {**record, "splits": {"held_out": {**split, "recall": {**split["recall"], "early_end": {"k": 0, "n": 21}}}}}
    )
    assert "held-out half" in text and "2026-01-02" in text and "abc1234" in text
    for kind in KINDS[:-1]:
        assert f"{kind} 3/20 = 0.15 [0.05, 0.36]" in text  # Wilson, as statsmodels gives it
    assert "early_end 0/21 = 0.00 [0.00, 0.15]" in text and "1/50 = 0.02 [0.00, 0.10]" in text
