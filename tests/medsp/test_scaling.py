"""Test-time scaling as in the official ``test_time.py``: best-of-N with a self-critic selector, and the
specialist panel ("medagents")."""

from __future__ import annotations

import json

import pytest

from bedside.medsp.protocols import panel_domains, parse_domains
from bedside.protocols import tag_of
from bedside.solvers.medsp import self_consistency
from tests.conftest import scripted
from tests.medsp.helpers import ANAPHYLAXIS, calls, roles, run_one, store, text_of, turns_of

WAIT = ["Wait and observe"]


def protocol_of(event) -> str:
    return tag_of(event.input).name


@pytest.mark.eval
def test_best_of_n_samples_n_candidates_and_the_examinee_model_selects(tmp_path, anaphylaxis_run):
    # n=3, parse_retries=2: candidates use seeds 0, 3, 6; the one with seed 3 (candidate 1) deviates
    _, sample = run_one(
        tmp_path, ANAPHYLAXIS, examinee=scripted(medsp_examinee_deviant_seeds=[3]), scaling="best_of_n", n=3
    )
    exam = turns_of(sample, "examinee")
    events = calls(sample, role=None)
    # per turn: 3 candidates at temperature 0.8, then one selector call at 0, by the examinee model
    assert [protocol_of(e) for e in events] == (["medsp.examinee"] * 3 + ["medsp.bon_selector"]) * len(exam)
    assert {e.config.temperature for e in events if protocol_of(e) == "medsp.examinee"} == {0.8}
    assert {e.config.temperature for e in events if protocol_of(e) == "medsp.bon_selector"} == {0.0}
    assert {e.config.seed for e in events if protocol_of(e) == "medsp.examinee"} == {None, 3, 6}
    # SP and environment run at temperature 0 in a scaled run
    assert {
        e.config.temperature for e in sample.events if e.event == "model" and e.role in ("patient", "environment")
    } == {0.0}
    selectors = [e for e in events if protocol_of(e) == "medsp.bon_selector"]
    for k, (data, sel) in enumerate(zip(exam, selectors)):
        # the selector sees the examinee's system prompt and this turn's prompt with the candidates: no history
        assert len(sel.input) == 2 and sel.input[0].text == sample.messages[0].text
        assert sel.input[1].text.startswith(data["prompt"])
        assert "[Candidate 1]\n  speak: Let's just wait" in sel.input[1].text
        bon = data["best_of_n"]
        assert bon["n"] == 3 and len(bon["candidates"]) == 3 and bon["candidates"][1]["actions"] == WAIT
        assert (
            bon["selector"] == "self_critic" and bon["choice"] == 0 and bon["chosen"] == 0 and bon["fallback"] is None
        )
        assert bon["rationale"] and data["actions"] == bon["candidates"][0]["actions"]
    # only the chosen reply enters the examinee's chat: the same trajectory as an unscaled run here
    _, plain = anaphylaxis_run
    assert [t["actions"] for t in exam] == [t["actions"] for t in turns_of(plain, "examinee")]
    assert "Wait and observe" not in text_of(sample.messages)


@pytest.mark.eval
def test_best_of_n_commits_the_selected_candidate(tmp_path):
    _, sample = run_one(
        tmp_path,
        ANAPHYLAXIS,
        examinee=scripted(medsp_examinee_deviant_seeds=[3], medsp_selector_choice=1),
        scaling="best_of_n",
        n=3,
    )
    first = turns_of(sample, "examinee")[0]
    assert first["actions"] == WAIT and first["best_of_n"]["chosen"] == 1
    assert json.loads(sample.messages[2].text)["actions"] == WAIT  # the chosen raw reply is the committed one
    assert turns_of(sample, "environment")[0]["action_log"][0]["raw"] == "Wait and observe"


@pytest.mark.eval
def test_best_of_n_selector_falls_back_to_candidate_0(tmp_path):
    _, sample = run_one(tmp_path, ANAPHYLAXIS, examinee=scripted(medsp_selector_choice=7), scaling="best_of_n", n=2)
    bon = turns_of(sample, "examinee")[0]["best_of_n"]
    assert bon["chosen"] == 0 and bon["choice"] == 7 and bon["fallback"] == "choice 7 out of range 0..1"
    _, sample = run_one(
        tmp_path, ANAPHYLAXIS, examinee=scripted(medsp_selector_malformed_attempts=3), scaling="best_of_n", n=2
    )
    bon = turns_of(sample, "examinee")[0]["best_of_n"]
    assert bon["chosen"] == 0 and bon["fallback"].startswith(
        "selector failed: examinee: no readable reply after 3 tries"
    )
    infos = [e.data for e in sample.events if e.event == "info" and e.source == "medsp_scaling"]
    assert infos and infos[0]["best_of_n"]["fallback"].startswith("selector failed")


@pytest.mark.eval
def test_best_of_n_majority_option_keeps_the_earlier_self_consistency_vote(tmp_path):
    _, sample = run_one(
        tmp_path,
        ANAPHYLAXIS,
        examinee=scripted(medsp_examinee_deviant_seeds=[3, 6]),
        scaling="best_of_n",
        n=3,
        bon_selector="majority",
    )
    assert calls(sample, "medsp.bon_selector") == []
    first = turns_of(sample, "examinee")[0]
    assert all(tag_of(e.input) is not None for e in calls(sample))  # every model call carries its protocol tag
    assert (
        first["actions"] == WAIT
        and first["best_of_n"]["selector"] == "majority"
        and first["best_of_n"]["chosen"] in (1, 2)
    )


def test_self_consistency_majority_vote():
    a = {"speak": "Check the monitor now.", "actions": ["Check vital signs", "IV access"], "eos": False}
    b = {"speak": "I will check the monitor.", "actions": ["iv access", " check  vital signs."], "eos": False}
    c = {"speak": "Let's wait.", "actions": WAIT, "eos": False}
    chosen, votes = self_consistency([c, a, b])
    assert chosen in (1, 2) and sorted(votes.values()) == [1, 2]  # actions compared normalised, order-free
    assert self_consistency([c, a])[0] == 0  # a tie goes to the first sampled group


@pytest.mark.eval
def test_panel_chooses_specialties_once_then_opinions_integration_and_a_vote(tmp_path):
    _, sample = run_one(tmp_path, ANAPHYLAXIS, scaling="panel", panel_size=3)
    rec = store(sample)
    exam = turns_of(sample, "examinee")
    events = calls(sample, role=None)
    kinds = [protocol_of(e) for e in events]
    assert all(tag_of(e.input) is not None for e in calls(sample))  # every model call carries its protocol tag
    # once per case, before the first turn, by the examinee model at temperature 0
    assert kinds[0] == "medsp.panel_domains" and kinds.count("medsp.panel_domains") == 1
    assert events[0].config.temperature == 0.0 and len(events[0].input) == 2
    assert rec["panel_domains"] == ["Emergency Medicine", "Critical Care", "Internal Medicine"]
    # per turn: 3 opinions (0.8), one integration (0), 3 votes (0); everyone agrees: no revision
    per_turn = ["medsp.panel_specialist"] * 3 + ["medsp.panel_integrator"] + ["medsp.panel_vote"] * 3
    assert kinds[1:] == per_turn * len(exam) and "medsp.examinee" not in kinds
    temps = {k: {e.config.temperature for e in events if protocol_of(e) == k} for k in set(kinds)}
    assert (
        temps["medsp.panel_specialist"] == {0.8}
        and temps["medsp.panel_integrator"] == {0.0}
        and temps["medsp.panel_vote"] == {0.0}
    )
    system = sample.messages[0].text
    for k, data in enumerate(exam):
        turn_events = events[1 + k * 7 : 1 + (k + 1) * 7]
        specialists, integrator, votes = turn_events[:3], turn_events[3], turn_events[4:]
        consulted = set()
        for e in specialists:  # (concurrent calls: any order)
            # examinee system prompt plus a specialist overlay; this turn's prompt; no history
            assert len(e.input) == 2 and e.input[0].text.startswith(system)
            consulted |= {d for d in rec["panel_domains"] if d in e.input[0].text[len(system) :]}
            assert e.input[1].text.startswith(data["prompt"])
        assert consulted == set(rec["panel_domains"])
        # the integrator is the examinee model with its full chat, plus the opinions
        assert len(integrator.input) == 1 + 2 * k + 1
        assert all(op in integrator.input[-1].text for op in data["panel"]["opinions"].values())
        for e in votes:  # the proposal only: no turn prompt, no history
            assert len(e.input) == 2 and data["prompt"] not in e.input[1].text and data["speak"] in e.input[1].text
        assert data["panel"]["consensus"][0]["advice"] == {} and len(data["panel"]["syntheses"]) == 1
    # the examinee's chat holds the clean turn prompts, not the integration prompts
    assert [m.text for m in sample.messages[1::2]] == [d["prompt"] for d in exam]
    assert "Your specialist panel has advised" not in text_of(sample.messages)


@pytest.mark.eval
def test_panel_disagreement_with_advice_triggers_one_revision(tmp_path):
    examinee = scripted(medsp_panel_disagree="Critical Care", medsp_panel_advice_action="Repeat vital signs")
    _, sample = run_one(tmp_path, ANAPHYLAXIS, examinee=examinee, scaling="panel", panel_size=3)
    exam = turns_of(sample, "examinee")
    kinds = [protocol_of(e) for e in calls(sample, role=None)]
    per_turn = (
        ["medsp.panel_specialist"] * 3
        + ["medsp.panel_integrator"]
        + ["medsp.panel_vote"] * 3
        + ["medsp.panel_integrator"]
    )
    assert kinds[1:] == per_turn * len(exam)  # one voting round, then the revised integration is final
    first = exam[0]["panel"]
    assert first["consensus"][0]["votes"] == {
        "Emergency Medicine": True,
        "Critical Care": False,
        "Internal Medicine": True,
    }
    assert first["consensus"][0]["advice"] == {"Critical Care": "Also: Repeat vital signs"}
    assert "Repeat vital signs" not in first["syntheses"][0]["actions"] and "Repeat vital signs" in exam[0]["actions"]
    revised = [e for e in calls(sample, "medsp.panel_integrator")][1]
    assert "(Critical Care) Also: Repeat vital signs" in revised.input[-1].text
    # panel_rounds=0: no vote at all
    _, sample = run_one(tmp_path, ANAPHYLAXIS, examinee=examinee, scaling="panel", panel_size=2, panel_rounds=0)
    assert (
        calls(sample, "medsp.panel_vote") == []
        and "Repeat vital signs" not in turns_of(sample, "examinee")[0]["actions"]
    )


@pytest.mark.eval
def test_panel_specialties_are_parsed_and_padded_as_upstream(tmp_path):
    assert parse_domains("Specialties: Emergency Medicine | Toxicology | emergency medicine", 4) == [
        "Emergency Medicine",
        "Toxicology",
        "General Medicine 3",
        "General Medicine 4",
    ]
    assert parse_domains("1. Cardiology, 2. Nephrology; - Surgery\nPediatrics", 3) == [
        "Cardiology",
        "Nephrology",
        "Surgery",
    ]
    assert parse_domains("", 2) == ["General Medicine", "General Medicine 2"]
    # the solver reads them through the protocol (no solver parses a reply): medsp.panel_domains's reader
    value, _ = panel_domains(2).read("<think>Cardiology?</think>Specialties: Toxicology | Nursing | Surgery")
    assert value.data["domains"] == ["Toxicology", "Nursing"] and panel_domains(2).name == "medsp.panel_domains"
    with pytest.raises(ValueError):  # an empty reply is unreadable (retried, then the defaults are recorded)
        panel_domains(2).read("  ")
    _, sample = run_one(
        tmp_path,
        ANAPHYLAXIS,
        examinee=scripted(medsp_panel_domains="Toxicology,toxicology"),
        scaling="panel",
        panel_size=3,
        max_turns=1,
    )
    assert store(sample)["panel_domains"] == ["Toxicology", "General Medicine 2", "General Medicine 3"]
    assert store(sample)["panel_domain_selection"]["reply"] == "Specialties: Toxicology | toxicology"


@pytest.mark.eval
def test_single_is_the_unscaled_turn_at_temperature_0(tmp_path, anaphylaxis_run):
    _, sample = run_one(tmp_path, ANAPHYLAXIS, scaling="single", role_models=roles())
    assert {e.config.temperature for e in sample.events if e.event == "model" and e.role != "grader"} == {0.0}
    _, plain = anaphylaxis_run
    assert {
        e.config.temperature for e in plain.events if e.event == "model" and e.role in (None, "patient", "environment")
    } == {None}
    assert [t["actions"] for t in turns_of(sample, "examinee")] == [t["actions"] for t in turns_of(plain, "examinee")]
