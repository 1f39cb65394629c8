"""What each agent sees (official ``controller.py``; paper Section 4).

- the examinee: its own packet, then per turn the case title, the patient status, the state label, the latest
  events and feedback and the SP's latest words. Never evaluator material, the rubric, action statuses or
  rationales, actors_present, completion reasons, the turn budget, nor environment material the environment
  has not revealed yet;
- the SP: its packet, the examinee's words this turn and the last four turn records (no statuses);
- the environment: its packet, the examinee's words and actions and the SP's answer of this turn;
- the evaluator: the frozen rubric, the transcript, the action log and the state summary, never its packet.
"""

from __future__ import annotations

import json
import re

import pytest

from bedside.medsp.scripted_environment import action_results, scenario_states, timed_events
from tests.conftest import model_inputs, scripted
from tests.medsp.helpers import ANAPHYLAXIS, BACK_PAIN, DKA_ICU, calls, run_one, scenario_of, store, text_of, turns_of

pytestmark = pytest.mark.eval

#: field names and texts that belong to the evaluation side of the environment's reply
EVALUATION_SIDE = (
    "action_assessments",
    "actors_present",
    "completion_reason",
    "interpreted_action",
    "progress_index",
    "Listed under action results",
    "Not among this scenario's action results",
    "Listed as present at the start",
    "is available on request",
    "No scenario state after",
    "The handover point of the scenario was reached",
    "executed",
    "unsupported",
)


def evaluator_only_lines(scenario) -> list[str]:
    """Lines of the evaluator packet found in no other packet, plus every rubric item."""
    others = "\n".join(scenario.packet(r).text() for r in ("examinee", "sp_actor", "environment_controller"))
    lines = [ln.strip().lstrip("- ").strip() for ln in scenario.evaluator.text().splitlines()]
    unique = [ln for ln in lines if len(ln) > 12 and not ln.startswith("#") and ln not in others]
    return unique + [i.text for i in scenario.rubric.items()]


def environment_secrets(scenario) -> list[str]:
    materials = scenario.environment_controller.text()
    secrets = [o.text for o in action_results(materials)] + [o.status for o in action_results(materials) if o.status]
    for _, _, text, status in timed_events(materials):
        secrets += [text] + ([status] if status else [])
    for _, text, status in scenario_states(materials):
        secrets += [t for t in (text, status) if t]
    return secrets


@pytest.mark.parametrize(
    "sample_id,scaling",
    [(ANAPHYLAXIS, "none"), (ANAPHYLAXIS, "panel"), (DKA_ICU, "none"), (DKA_ICU, "best_of_n"), (BACK_PAIN, "none")],
)
def test_the_examinee_sees_only_its_own_view(tmp_path, scaling, sample_id):
    extra = {"panel_size": 2} if scaling == "panel" else {"n": 2} if scaling == "best_of_n" else {}
    _, sample = run_one(tmp_path, sample_id, scaling=scaling, **extra)
    scenario = scenario_of(sample)
    forbidden = evaluator_only_lines(scenario)
    assert len(forbidden) > 10
    examinee_calls = model_inputs(sample, None)  # every call of the model under test (selector, panel too)
    assert examinee_calls
    for call in examinee_calls:
        text = text_of(call)
        assert scenario.examinee.text() in text  # its own packet, as compiled
        assert [f for f in forbidden if f in text] == []
        assert scenario.sp_actor.text() not in text and scenario.environment_controller.text() not in text
        leaked = [w for w in EVALUATION_SIDE if w in text]
        assert leaked == [], leaked
        assert not re.search(r"turns? (left|remaining)|at most \d+ turns|budget", text)
    # environment material reaches the examinee only once revealed (before the turn that reads it)
    history = store(sample)["history"]
    exam_turns = turns_of(sample, "examinee")
    secrets = environment_secrets(scenario)
    seen_any = False
    for k, turn in enumerate(exam_turns):
        revealed = json.dumps(
            [t["data"] for t in history if t["role"] == "environment" and t["data"]["turn"] < turn["turn"]]
        )
        for secret in secrets:
            if secret in turn["prompt"]:
                seen_any = True
                assert secret in revealed, (k + 1, secret)
    assert seen_any


def test_the_turn_budget_is_never_shown(tmp_path):
    never_end = scripted(medsp_examinee_never_end=True)
    _, short = run_one(tmp_path / "3", BACK_PAIN, examinee=never_end, max_turns=3)
    _, long = run_one(tmp_path / "12", BACK_PAIN, examinee=never_end, max_turns=12)
    # the same prompts whatever the cap: the examinee cannot know how many turns it has
    short_calls, long_calls = model_inputs(short, None), model_inputs(long, None)
    assert len(short_calls) == 3 and len(long_calls) == 12
    assert [text_of(c) for c in short_calls] == [text_of(c) for c in long_calls[:3]]


def test_examinee_turn_prompt_content(back_pain_run):
    _, sample = back_pain_run
    prompt = turns_of(sample, "examinee")[1]["prompt"]
    assert prompt.startswith("Case: bedside_demo_back_pain\nPatient's current status: Uncomfortable when moving")
    assert "Current stage of the scenario: initial_assessment" in prompt
    assert "Findings and feedback: BP 132/84" in prompt  # the latest feedback, joined with "; "
    assert "What the patient side said last: My back has been killing me" in prompt


def test_timed_event_reaches_the_examinee_only_after_it_happened(anaphylaxis_run):
    _, sample = anaphylaxis_run
    event = "The hives spread to the neck and the patient's voice becomes hoarse."
    prompts = [t["prompt"] for t in turns_of(sample, "examinee")]
    assert [event in p for p in prompts] == [False, False, True]  # fires after turn 2
    assert not any("BP falls to 78/40" in p for p in prompts)  # averted by epinephrine, never shown


def test_sp_sees_the_words_of_this_turn_and_four_turn_records(back_pain_run):
    _, sample = back_pain_run
    scenario = scenario_of(sample)
    sp_calls = model_inputs(sample, "patient")
    exam = turns_of(sample, "examinee")
    for k, call in enumerate(sp_calls):
        text = text_of(call)
        assert scenario.sp_actor.text() in call[0].text
        assert scenario.environment_controller.text() not in text and scenario.examinee.text() not in text
        assert [f for f in evaluator_only_lines(scenario) if f in text] == []
        prompt = call[-1].text
        assert exam[k]["speak"] in prompt
        records = json.loads(prompt.split("(oldest first):\n", 1)[1].rsplit("\n\nReply as", 1)[0])
        assert len(records) == min(k, 4) and all(
            "status" not in r and "rationale" not in json.dumps(r) for r in records
        )
        assert [r["turn_index"] for r in records] == list(range(max(1, k - 3), k + 1))[: len(records)]
    # the SP keeps its own chat: one user/assistant pair per earlier turn
    assert len(sp_calls[-1]) == 1 + 2 * (len(sp_calls) - 1) + 1


def test_environment_sees_this_turns_words_answer_and_actions(anaphylaxis_run):
    _, sample = anaphylaxis_run
    scenario = scenario_of(sample)
    exam, sp = turns_of(sample, "examinee"), turns_of(sample, "patient")
    for k, call in enumerate(model_inputs(sample, "environment")):
        text = text_of(call)
        assert scenario.environment_controller.text() in call[0].text
        assert [f for f in evaluator_only_lines(scenario) if f in text] == []
        prompt = call[-1].text
        assert exam[k]["speak"] in prompt and sp[k]["speak"][0] in prompt
        assert json.dumps(exam[k]["actions"], indent=2) in prompt


def test_evaluator_sees_rubric_transcript_action_log_and_summary_not_its_packet(anaphylaxis_run):
    _, sample = anaphylaxis_run
    scenario = scenario_of(sample)
    [call] = model_inputs(sample, "grader")  # the whole rubric in one call
    system, user = call[0].text, call[-1].text
    assert all(f"] {item.text}" in system for item in scenario.rubric.items())
    packet_only = [ln for ln in evaluator_only_lines(scenario) if ln not in {i.text for i in scenario.rubric.items()}]
    assert packet_only and not any(ln in system + user for ln in packet_only)
    assert "Debriefing notes" not in system + user
    # transcript, action log with statuses and rationales, state summary (the official three parts)
    sim = store(sample)["sim_state"]
    assert json.dumps(sim["transcript"], ensure_ascii=False, indent=2) in user
    assert json.dumps(sim["action_history"], ensure_ascii=False, indent=2) in user
    assert '"status": "pending"' in user and '"rationale": "Listed under action results' in user
    for key in ("phase_history", "current_state_label", "total_turns", "completion_reason"):
        assert f'"{key}"' in user
    assert sim["transcript"][0]["type"] == "opening_context"
    assert [e["role"] for e in sim["transcript"][1:6]] == [
        "examinee",
        "examinee_actions",
        "sp",
        "environment",
        "examinee",
    ]
    assert calls(sample, "medsp.evaluator")[0].config.temperature == 0.0
