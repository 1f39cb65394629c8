"""The simulator checks in real runs of every benchmark: the scripted patient's planted leaks and role
reversals are found at their turns exactly when their wording carries what the rules read (digits, a drug
name, a set phrase), nothing is flagged where nothing was planted, the LLM checker's findings join the rules'
and its unreadable reply is counted and leaves the unflagged kinds unscored, never 0."""

from __future__ import annotations

import math

import pytest
from inspect_ai import task_with
from inspect_ai.log import EvalLog

from bedside.params import SetupError
from bedside.providers.simulator_plants import LEAKS, REVERSALS, planted, wording
from bedside.scorers.simulator import simulator_check
from bedside.tasks.cpb import cpb
from bedside.tasks.discharge import discharge
from bedside.tasks.medsp import medsp
from tests.conftest import run, scripted

pytestmark = pytest.mark.eval

KINDS = ["leak", "reversal"]
#: the wordings the rules can read: digits or a drug name (leaks), a set phrase or a speaker label (reversals);
#: the others (a fact in words, teaching in words of its own) are the LLM checker's
READ_BY_RULES = {
    "leak": {w for w in LEAKS if "{drug}" in w or "{number}" in w},
    "reversal": set(REVERSALS[:4]),
}
FOUND_AS = {"leak": "unsupported_fact", "reversal": "role_reversal"}
PLANT: dict = {"patient_plant": KINDS, "patient_plant_rate": 0.5, "patient_plant_seed": 3}


def checked(log: EvalLog) -> list[tuple[str, int, int, set[str]]]:
    """(sample id, patient turn number, history index, kinds flagged at it) of every checked patient turn."""
    out = []
    for sample in log.samples or []:
        score = sample.scores["simulator_check"]
        flagged: dict[int, set[str]] = {}
        for f in score.metadata["findings"]:
            if f["turn"] is not None:
                flagged.setdefault(f["turn"], set()).add(f["kind"])
        for n, index in enumerate(score.metadata["patient_turns"], start=1):
            out.append((str(sample.id), n, index, flagged.get(index, set())))
    return out


def assert_planted_found(log: EvalLog, rate: float = PLANT["patient_plant_rate"]) -> dict[str, int]:
    """Each planted turn flagged with its kind iff its wording is read by the rules; no leak or reversal flag
    on an unplanted turn. Returns the planted turns per kind."""
    seen = dict.fromkeys(KINDS, 0)
    for sid, n, index, found in checked(log):
        kind = planted(KINDS, [], rate, PLANT["patient_plant_seed"], sid, n)
        if kind is None:
            assert not found & set(FOUND_AS.values()), (sid, index, found)
            continue
        seen[kind] += 1
        readable = wording(kind, PLANT["patient_plant_seed"], sid, n) in READ_BY_RULES[kind]
        assert (FOUND_AS[kind] in found) == readable, (sid, index, kind, found)
    return seen


def only_the_check(task, benchmark: str):
    return task_with(task, scorer=[simulator_check(benchmark)])


def test_discharge_planted_errors_found_and_faithful_turns_clear(tmp_path):
    task = only_the_check(discharge(), "discharge")
    roles = {"monitor": scripted(), "grader": scripted()}
    log = run(task, roles={**roles, "patient": scripted(**PLANT)}, log_dir=tmp_path / "plant", limit=6)
    seen = assert_planted_found(log)
    assert seen["leak"] >= 3 and seen["reversal"] >= 3, seen
    clean = run(task, roles={**roles, "patient": scripted()}, log_dir=tmp_path / "clean", limit=6)
    assert all(not found for *_, found in checked(clean))
    for sample in clean.samples:  # a faithful session: 0, not NaN
        value = sample.scores["simulator_check"].value
        assert value["unsupported_fact"] == 0.0 and value["role_reversal"] == 0.0


def test_medsp_planted_errors_found(tmp_path):
    task = only_the_check(medsp(), "medsp")
    roles = {"environment": scripted(), "grader": scripted(), "patient": scripted(**PLANT)}
    log = run(task, roles=roles, log_dir=tmp_path)
    seen = assert_planted_found(log)
    assert sum(seen.values()) >= 3, seen


def test_cpb_continuation_planted_errors_found_and_single_turn_refused(tmp_path):
    from tests.cpb import synthetic

    data = str(synthetic.write_data(tmp_path / "cpb"))
    task = only_the_check(cpb(data=data, turns=4), "cpb")
    log = run(
        task,
        educator=scripted(doctor_style="accommodating"),
        roles={"grader": scripted(), "patient": scripted(**{**PLANT, "patient_plant_rate": 0.9})},
        log_dir=tmp_path / "logs",
    )
    seen = assert_planted_found(log, rate=0.9)
    assert sum(seen.values()) >= 2, seen
    with pytest.raises(SetupError, match="simulator_check.*-T turns=N"):
        cpb(data=data, simulator_check=True)
    # a single-turn sample checked all the same (the checker's role bound): no simulated patient turn, no number
    single = run(
        only_the_check(cpb(data=data), "cpb"),
        educator=scripted(doctor_style="accommodating"),
        roles={"grader": scripted()},
        log_dir=tmp_path / "single",
        limit=1,
    )
    [sample] = single.samples
    score = sample.scores["simulator_check"]
    assert score.explanation == "no simulated patient turn: nothing to check"
    assert math.isnan(score.value["simulator_error"]) and score.value["checker_unparsed"] == 0.0


def test_llm_checker_joins_the_rules_and_an_unreadable_one_is_counted_never_zero(tmp_path):
    roles = {"patient": scripted(), "monitor": scripted(), "grader": scripted()}
    task = discharge(simulator_check=True)
    flagging = run(
        only_the_check(task, "discharge"),
        roles={**roles, "simulator_checker": scripted(checker_flag_turns=[2])},
        log_dir=tmp_path / "flag",
        limit=1,
    )
    [sample] = flagging.samples
    score = sample.scores["simulator_check"]
    second = score.metadata["patient_turns"][1]
    assert [(f["turn"], f["kind"], f["check"]) for f in score.metadata["findings"]] == [
        (second, "role_reversal", "llm:bedside/scripted")
    ]
    assert score.value["role_reversal"] == 1.0 and score.value["checker_unparsed"] == 0.0
    assert score.metadata["checked_by"] == ["rules", "llm:bedside/scripted"]

    unread = run(
        only_the_check(task, "discharge"),
        roles={**roles, "simulator_checker": scripted(checker_malformed_attempts=9)},
        log_dir=tmp_path / "unread",
        limit=1,
    )
    [sample] = unread.samples
    value = sample.scores["simulator_check"].value
    assert value["checker_unparsed"] == 1.0
    assert all(math.isnan(value[k]) for k in ("simulator_error", *FOUND_AS.values()))
    parse_events = [e for e in sample.events if e.event == "info" and e.source == "parse"]
    assert len(parse_events) == 3  # the first reply and its two retries


def test_the_check_is_off_by_default_and_on_by_parameter_or_bound_checker(tmp_path):
    from bedside.scorers.metrics import scorer_name

    assert "simulator_check" not in [scorer_name(s) for s in discharge().scorer]
    assert "simulator_check" in [scorer_name(s) for s in discharge(simulator_check=True).scorer]
    # the task built by Inspect for the eval (by name), with its roles bound: as `inspect eval` builds it
    log = run(
        "bedside/discharge",  # type: ignore[arg-type]
        roles={"patient": scripted(), "monitor": scripted(), "grader": scripted(), "simulator_checker": scripted()},
        log_dir=tmp_path,
        limit=1,
    )
    [sample] = log.samples
    assert sample.scores["simulator_check"].metadata["checked_by"] == ["rules", "llm:bedside/scripted"]
    assert sample.scores["encounter_outcome"].value["role_fallbacks"] == 0.0


def test_report_rates_per_patient_model_and_persona_and_the_clean_population(tmp_path):
    import pandas as pd

    from bedside.reporting.build import build
    from bedside.reporting.run import Run
    from bedside.reporting.population import choices, restrict_log

    roles = {"patient": scripted(**PLANT), "monitor": scripted(), "grader": scripted()}
    log = run(discharge(simulator_check=True), roles=roles, log_dir=tmp_path / "logs", limit=4)
    errors = {str(s.id): s.scores["simulator_check"].value["simulator_error"] for s in log.samples}
    assert 0 < sum(errors.values()) < len(errors), errors  # some sessions flagged, some not

    assert "simulator_clean" in choices()
    kept = restrict_log(Run.of(log), "simulator_clean")
    assert {str(s.id) for s in kept.samples} == {sid for sid, e in errors.items() if e == 0.0}

    index = build([log.location], tmp_path / "report")
    assert "own error rate" in index.read_text()
    # under the table: the rules' recall per kind on the corpus's held-out half, from the bench's record
    import yaml

    from bedside.reporting.simulator import CORPUS_RECORD

    held_out = yaml.safe_load(CORPUS_RECORD.read_text(encoding="utf-8"))["splits"]["held_out"]["recall"]
    assert "measured recall on the bedside corpus" in index.read_text()
    for kind, rate in held_out.items():
        assert f"{kind} {rate['k']}/{rate['n']} = " in index.read_text(), kind
    frame = pd.read_csv(tmp_path / "report" / "simulator_errors.csv")
    overall = frame[(frame["stratum"] == "all") & (frame["key"] == "simulator_error")].iloc[0]
    assert overall["n"] == len(errors) and overall["rate"] == sum(errors.values()) / len(errors)
    assert 0 <= overall["ci_lower"] <= overall["rate"] <= overall["ci_upper"] <= 1
    assert overall["patient_model"] == "bedside/scripted"
    assert {"personality", "education_level", "health_literacy", "recall_level", "behavior"} <= set(frame["stratum"])
    per_trait = frame[(frame["stratum"] == "personality") & (frame["key"] == "simulator_error")]
    assert per_trait["n"].sum() == len(errors)
