"""``-T prompts=PATH``: the official prompt texts, loaded from the user's clone of MAGIC-AI4Med/MedSP1000.

The clone here is a fake written by the tests (``helpers.write_fake_clone``): the official file layout and function
signatures with placeholder texts, so that no official text is copied into this repository."""

from __future__ import annotations

import json

import pytest

from bedside.medsp.records import load_scenarios
from bedside.medsp.samples import DEMO_DIR
from bedside.params import BadParameter
from bedside.scorers.medsp.evaluator import load_evaluator_prompts
from bedside.solvers.medsp import OfficialPromptsError, load_prompt_set
from bedside.tasks.medsp import medsp
from tests.medsp.helpers import ANAPHYLAXIS, BACK_PAIN, calls, run_one, score, store, turns_of, write_fake_clone

SCENARIO = next(s for s in load_scenarios(DEMO_DIR).scenarios if s.case_id == "bedside_demo_anaphylaxis")


@pytest.fixture
def clone(tmp_path):
    return write_fake_clone(tmp_path / "MedSP1000")


def test_the_loader_runs_only_the_prompt_builders(clone, capsys):
    prompts = load_prompt_set(str(clone))
    assert capsys.readouterr().out == ""  # module-level statements (a print) are never executed
    # the packet reaches the official builder compiled as the official code does (RoleBundle.compiled_text)
    system = prompts.examinee_system(SCENARIO)
    assert system.startswith("FAKE-OFFICIAL examinee system.") and SCENARIO.examinee.text() in system
    assert prompts.first_feedback() == "FAKE-OFFICIAL placeholder: nothing yet."  # from SimulationController.__init__
    rubric = load_evaluator_prompts(str(clone)).evaluator_system(SCENARIO.rubric.items())
    assert "PC:\n- Obtains vital signs and places the patient on a cardiac monitor" in rubric
    # the clone's src/simulate folder works as well as its root
    assert load_prompt_set(str(clone / "src" / "simulate")).examinee_system(SCENARIO) == system


@pytest.mark.eval
def test_a_clone_that_lacks_a_builder_is_rejected_by_name(clone):
    path = clone / "src" / "simulate" / "prompts.py"
    path.write_text(path.read_text().replace("def build_tts_selector_prompt", "def renamed_selector"))
    with pytest.raises(OfficialPromptsError, match="lacks build_tts_selector_prompt"):
        load_prompt_set(str(clone))
    with pytest.raises(BadParameter, match="prompts"):
        medsp(prompts=str(clone))


@pytest.mark.eval
def test_an_encounter_with_the_official_prompts(clone, tmp_path):
    log, sample = run_one(tmp_path, BACK_PAIN, prompts=str(clone))
    assert store(sample)["prompts"] == str(clone) and log.eval.metadata["prompts"] == str(clone)
    exam = turns_of(sample, "examinee")
    assert sample.messages[0].text.startswith("FAKE-OFFICIAL examinee system.")
    # the official controller counts the turn before building its prompt: turn 1 is a "continue" prompt
    assert exam[0]["prompt"].startswith("FAKE-OFFICIAL turn 1 of bedside_demo_back_pain")
    assert "Feedback: FAKE-OFFICIAL placeholder: nothing yet." in exam[0]["prompt"]
    assert "Label: plan_discussion" in exam[4]["prompt"]
    sp_call = calls(sample, "medsp.patient")[0]
    assert sp_call.input[0].text.startswith("FAKE-OFFICIAL SP system.") and sp_call.input[-1].text.startswith(
        "FAKE-OFFICIAL said"
    )
    env = turns_of(sample, "environment")
    assert env[0]["prompt"].startswith("FAKE-OFFICIAL status Not assessed") and "eos=true" in env[3]["prompt"]
    # the evaluator: the official frozen-rubric prompt and reply format (items by verbatim text)
    [judge] = calls(sample, "medsp.evaluator")
    assert judge.input[0].text.startswith("FAKE-OFFICIAL evaluator system.") and judge.input[-1].text.endswith(
        "FAKE-OFFICIAL evaluate"
    )
    assert "properties" in judge.input[-1].metadata["bedside_protocol"]["schema"]
    assert set(judge.input[-1].metadata["bedside_protocol"]["schema"]["properties"]) == {
        "reasoning",
        "PC",
        "MK",
        "SBP",
        "ICS",
        "PBLI",
        "PROF",
    }
    assert json.loads(judge.output.completion)["PC"]
    sim = store(sample)["sim_state"]
    assert sim["transcript"][0]["content"] == "FAKE-OFFICIAL opening of bedside_demo_back_pain, status Not assessed"
    # the same encounter and verdicts as with bedside's wording (the scripted roles read both)
    _, bedside = run_one(tmp_path / "bedside", BACK_PAIN)
    assert [t["actions"] for t in exam] == [t["actions"] for t in turns_of(bedside, "examinee")]
    assert [i["met"] for i in score(sample).metadata["items"]] == [i["met"] for i in score(bedside).metadata["items"]]


@pytest.mark.eval
def test_official_panel_and_selector_prompts(clone, tmp_path):
    _, sample = run_one(tmp_path, ANAPHYLAXIS, prompts=str(clone), scaling="panel", panel_size=2, max_turns=1)
    assert calls(sample, "medsp.panel_domains")[0].input[-1].text.startswith("FAKE-OFFICIAL name 2 specialties.")
    assert all("FAKE-OFFICIAL consult" in e.input[-1].text for e in calls(sample, "medsp.panel_specialist"))
    assert "FAKE-OFFICIAL synthesis" in calls(sample, "medsp.panel_integrator")[0].input[-1].text
    assert calls(sample, "medsp.panel_vote")[0].input[-1].text.startswith("FAKE-OFFICIAL vote on:\nSays: ")
    _, sample = run_one(tmp_path, ANAPHYLAXIS, prompts=str(clone), scaling="best_of_n", n=2, max_turns=1)
    assert "FAKE-OFFICIAL select\n[Candidate 0]" in calls(sample, "medsp.bon_selector")[0].input[-1].text


@pytest.mark.eval
def test_reading_the_official_evaluator_reply(clone):
    """The official prompts' evaluator protocol reads the official format (bedside.medsp.protocols)."""
    items = SCENARIO.rubric.items()
    protocol = load_evaluator_prompts(str(clone)).evaluator_protocol(items)

    def read_official_evaluation(text, items, rule):
        return protocol.read(text, rule)[0]

    by_comp = {
        c: {i.text: True for i in items if i.competency == c} for c in ("PC", "MK", "SBP", "ICS", "PBLI", "PROF")
    }
    reply = {"reasoning": ["ok"], **by_comp}
    reply["PC"] = {f"  {k}  ": v for k, v in reply["PC"].items()}  # whitespace around a key: matched
    moved = next(iter(reply["ICS"]))
    reply["MK"][moved] = "yes"  # an item judged under another competency: matched, noted
    del reply["ICS"][moved]
    for rule in ("official", "strict"):
        evaluation = read_official_evaluation(json.dumps(reply), items, rule)
        assert set(evaluation.verdicts) == {i.id for i in items} and evaluation.verdicts["ICS.1"]["met"] is True
        assert evaluation.notes == ["ICS.1 judged under MK"] and evaluation.extra == []
    # an item left out: unreadable under the strict reading; the official counter shrinks the denominator
    del reply["PROF"]
    with pytest.raises(ValueError, match=r"1 rubric item\(s\) not judged: \['PROF.1'\]"):
        read_official_evaluation(json.dumps(reply), items, "strict")
    official = read_official_evaluation(json.dumps(reply), items, "official")
    assert "PROF.1" not in official.verdicts and "left out of the denominator" in official.notes[-1]
    # a key the rubric does not have: counted under its competency by the official counter
    reply["PC"]["Reassured the family"] = True
    official = read_official_evaluation(json.dumps(reply), items, "official")
    assert official.extra == [{"key": "Reassured the family", "competency": "PC", "met": True}]
