"""Visibility rules (paper Section 4): what each agent's prompts may contain.

- no evaluator-packet text and no rubric item reaches the examinee, the patient or the environment;
- no environment material (a result, an event) reaches the examinee before the environment has
  revealed it: every such text in an examinee prompt already appeared in an earlier environment
  turn, and results never requested or events never triggered never appear at all;
- the patient never sees the environment materials as such nor the evaluator packet.
"""

from __future__ import annotations

import pytest

from bedside.providers.scripts.medsp import action_results, timed_events
from bedside.solvers.medsp import environment_report, examinee_sees, parse_environment
from bedside.solvers.encounter import Turn
from tests.conftest import model_inputs
from tests.medsp.helpers import ANAPHYLAXIS, DKA_ICU, run_one, scenario_of, store, text_of


def evaluator_only_lines(scenario) -> list[str]:
    """Lines of the evaluator packet found in no other packet, plus every rubric item."""
    others = "\n".join(scenario.packet(r).text() for r in ("examinee", "sp_actor", "environment_controller"))
    lines = [ln.strip().lstrip("- ").strip() for ln in scenario.evaluator.text().splitlines()]
    unique = [ln for ln in lines if len(ln) > 12 and not ln.startswith("#") and ln not in others]
    return unique + [i.text for i in scenario.rubric.items()]


def environment_secrets(scenario) -> list[str]:
    materials = scenario.environment_controller.text()
    secrets = [o.text for o in action_results(materials)]
    secrets += [o.status for o in action_results(materials) if o.status]
    for _, _, text, status in timed_events(materials):
        secrets += [text] + ([status] if status else [])
    return secrets


@pytest.mark.parametrize(
    "sample_id,scaling", [(ANAPHYLAXIS, "none"), (ANAPHYLAXIS, "panel"), (DKA_ICU, "none"), (DKA_ICU, "best_of_n")]
)
def test_no_evaluator_or_future_text_reaches_the_examinee(tmp_path, scaling, sample_id):
    extra = {"panel_size": 2} if scaling == "panel" else {"n": 2} if scaling == "best_of_n" else {}
    _, sample = run_one(tmp_path, sample_id, scaling=scaling, **extra)
    scenario = scenario_of(sample)
    history = [Turn.model_validate(t) for t in store(sample)["history"]]
    forbidden = evaluator_only_lines(scenario)
    assert len(forbidden) > 10
    calls = model_inputs(sample, None)  # every call of the model under test (specialists, integrator too)
    assert calls
    for call in calls:
        text = text_of(call)
        assert scenario.examinee.text() in text  # its own packet is there
        leaked = [f for f in forbidden if f in text]
        assert leaked == [], leaked
        assert scenario.sp_actor.text() not in text and scenario.environment_controller.text() not in text
    # environment material: only once revealed. Examinee turn k is decided with the history before it.
    secrets = environment_secrets(scenario)
    turns = [t for t in history if t.role == "examinee"]
    seen_any = False
    per_turn = len(calls) // len(turns)
    for k, turn in enumerate(turns):
        revealed = "\n".join(
            environment_report(t.data, "") for t in history if t.role == "environment" and t.index < turn.index
        )
        for call in calls[k * per_turn : (k + 1) * per_turn]:
            text = text_of(call)
            for secret in secrets:
                if secret in text:
                    seen_any = True
                    assert secret in revealed, (k + 1, secret)
    assert seen_any  # results were revealed along the way, so the check above is not vacuous
    everything = "\n".join(text_of(c) for c in calls)
    never_revealed = [s for s in secrets if s not in "\n".join(environment_report(t.data, "") for t in history if t.role == "environment")]
    assert never_revealed and not any(s in everything for s in never_revealed)


def test_timed_event_reaches_the_examinee_only_after_it_happened(anaphylaxis_run):
    _, sample = anaphylaxis_run
    event = "The hives spread to the neck and the patient's voice becomes hoarse."
    hypotension = "BP falls to 78/40"
    calls = model_inputs(sample, None)
    assert [event in text_of(c) for c in calls] == [False, False, True]  # fires after turn 2
    assert not any(hypotension in text_of(c) for c in calls)  # averted by epinephrine, never shown


def test_patient_and_environment_never_see_the_evaluator_packet(anaphylaxis_run):
    _, sample = anaphylaxis_run
    scenario = scenario_of(sample)
    forbidden = evaluator_only_lines(scenario)
    patient_calls = model_inputs(sample, "patient")
    env_calls = model_inputs(sample, "environment")
    assert patient_calls and env_calls
    for call in patient_calls + env_calls:
        text = text_of(call)
        assert [f for f in forbidden if f in text] == []
    for call in patient_calls:
        text = text_of(call)
        assert scenario.sp_actor.text() in text
        assert scenario.environment_controller.text() not in text and scenario.examinee.text() not in text
        assert not any(r in text for r in [o.text for o in action_results(scenario.environment_controller.text())])
    # the evaluator gets its packet and the rubric
    grader_calls = model_inputs(sample, "grader")
    assert len(grader_calls) == 1 and scenario.evaluator.text() in text_of(grader_calls[0])


def test_fields_outside_the_environment_schema_never_reach_the_examinee():
    reply = parse_environment(
        '{"feedback": "BP 120/80.", "events": [], "patient_status": "calm", "actors_present": ["Nurse"],'
        ' "unsupported": [], "should_end": false, "next_event": "SECRET: seizure at T+5", "hint": "give magnesium"}'
    )
    turn = Turn(index=3, role="environment", message=reply.message, raw="", data={**reply.data, "after_turn": 1})
    shown = examinee_sees(turn)
    assert "BP 120/80." in shown and "SECRET" not in shown and "magnesium" not in shown
    assert set(reply.data) == {"feedback", "events", "patient_status", "actors_present", "unsupported", "should_end"}
