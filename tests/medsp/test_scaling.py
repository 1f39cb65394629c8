"""Test-time scaling (paper 2.6): best-of-N with a self-consistency choice, and an MDT panel."""

from __future__ import annotations

import json

from bedside.protocols import detect
from bedside.solvers.medsp import panel_personas, self_consistency
from tests.conftest import model_inputs, scripted
from tests.medsp.helpers import ANAPHYLAXIS, run_one, store, text_of

WAIT = ["Wait and observe"]


def examinee_turns(sample):
    return [t["data"] for t in store(sample)["history"] if t["role"] == "examinee"]


def test_self_consistency_majority_vote():
    a = {"speak": "Check the monitor now.", "actions": ["Check vital signs", "IV access"], "eos": False}
    b = {"speak": "I will check the monitor.", "actions": ["iv access", " check  vital signs."], "eos": False}
    c = {"speak": "Let's wait.", "actions": WAIT, "eos": False}
    chosen, votes = self_consistency([c, a, b])
    assert chosen in (1, 2) and sorted(votes.values()) == [1, 2]  # actions compared normalised, order-free
    assert self_consistency([c, a])[0] == 0  # a tie goes to the first sampled group
    # within the winning group: the speech agreeing most with the others
    d = {"speak": "Check the monitor now please.", "actions": a["actions"], "eos": False}
    e = {"speak": "Something unrelated entirely.", "actions": a["actions"], "eos": False}
    assert self_consistency([e, a, d])[0] in (1, 2)


def test_best_of_n_samples_n_candidates_and_keeps_the_majority(tmp_path, anaphylaxis_run):
    # with n=3 and parse_retries=2 the candidates use seeds 0, 3, 6; the one with seed 3 deviates
    _, sample = run_one(tmp_path, ANAPHYLAXIS, examinee=scripted(medsp_examinee_deviant_seeds=[3]), scaling="best_of_n", n=3)
    turns = examinee_turns(sample)
    assert len(model_inputs(sample, None)) == 3 * len(turns)
    for data in turns:
        bon = data["best_of_n"]
        assert bon["n"] == 3 and len(bon["candidates"]) == 3 and sorted(bon["votes"].values()) == [1, 2]
        assert data["actions"] != WAIT and bon["candidates"][bon["chosen"]]["actions"] == data["actions"]
    assert store(sample)["end_reason"] == "environment_end"
    # the same trajectory as without scaling, since the majority is the default behaviour
    _, plain = anaphylaxis_run
    assert [t["actions"] for t in turns] == [t["actions"] for t in examinee_turns(plain)]


def test_best_of_n_follows_the_majority_even_against_the_first_sample(tmp_path):
    _, sample = run_one(tmp_path, ANAPHYLAXIS, examinee=scripted(medsp_examinee_deviant_seeds=[3, 6]), scaling="best_of_n", n=3)
    first = examinee_turns(sample)[0]
    assert first["actions"] == WAIT and first["best_of_n"]["chosen"] in (1, 2)
    env = store(sample)["history"][3]["data"]
    assert env["unsupported"][0]["action"] == "Wait and observe"


def test_panel_specialists_advise_and_the_integrator_decides(tmp_path):
    _, sample = run_one(tmp_path, ANAPHYLAXIS, scaling="panel", panel_size=3)
    turns = examinee_turns(sample)
    calls = model_inputs(sample, None)
    kinds = [detect(c).name for c in calls]
    assert kinds.count("medsp.panel_specialist") == 3 * len(turns)
    assert kinds.count("medsp.panel_integrator") == len(turns) and "medsp.examinee" not in kinds
    specialist_calls = [c for c in calls if detect(c).name == "medsp.panel_specialist"]
    specialties = [c[0].text.split("Your specialty is ", 1)[1].split(";", 1)[0] for c in specialist_calls[:3]]
    assert sorted(specialties) == sorted(["Emergency medicine", "Critical Care", "Internal medicine"])  # case's own first
    for data in turns:
        assert [a["specialty"] for a in data["panel"]] == ["Emergency medicine", "Critical Care", "Internal medicine"]
    # every specialist's advice reaches the integrator of that turn
    integrator_calls = [c for c in calls if detect(c).name == "medsp.panel_integrator"]
    for call, data in zip(integrator_calls, turns):
        handed = call[-1].text
        assert "[MDT advice for this turn]" in handed
        assert all(a["text"] in handed for a in data["panel"])
    # the integrator's turn drives the encounter
    assert json.loads(sample.messages[2].text)["actions"] == turns[0]["actions"]
    assert store(sample)["end_reason"] == "environment_end"
    assert store(sample)["agent_stats"]["examinee"]["panel_calls"] == 3 * len(turns)


def test_panel_personas_put_the_case_specialty_first():
    assert [p["specialty"] for p in panel_personas(5, "Pediatrics")] == [
        "Pediatrics", "Emergency medicine", "Critical Care", "Internal medicine", "Primary care",
    ]
    assert panel_personas(2, "Dermatology")[0] == {"specialty": "Dermatology", "focus": "the core problems of Dermatology in this case"}
    assert [p["specialty"] for p in panel_personas(2, None)] == ["Emergency medicine", "Critical Care"]
    specialist_prompt = model_free_prompt()
    assert "Dermatology" in specialist_prompt


def model_free_prompt() -> str:
    from bedside.prompts import render

    return render("medsp/panel_specialist.j2", packet="p", max_turns=3, **panel_personas(1, "Dermatology")[0])


def test_scaling_via_cli_parameters_reaches_the_solver(tmp_path):
    log, sample = run_one(tmp_path, ANAPHYLAXIS, scaling="best_of_n", n=2)
    assert log.eval.task_args["scaling"] == "best_of_n" and store(sample)["scaling"] == "best_of_n"
    assert all(len(t["best_of_n"]["candidates"]) == 2 for t in examinee_turns(sample))
    assert text_of(model_inputs(sample, None)[0]) == text_of(model_inputs(sample, None)[1])  # same view, new seed
