"""The MedSP1000 closed loop (paper arXiv 2606.05112, Sections 2.1, 4 and 5.5), following the official code
(MAGIC-AI4Med/MedSP1000, MIT licence, ``src/simulate/{controller,agents,test_time}.py``), as an Inspect solver.

Each turn runs three agents on the orchestrator (:func:`bedside.solvers.orchestrator.run_encounter`), in the
official order::

    examinee → SP (patient) → environment controller      (turn 1, 2, ... up to max_turns)

There is no call before the examinee's first turn (the official code makes none): the examinee starts
from its own packet.

- **examinee** — the model under test. It replies ``{"speak", "actions", "eos"}``. ``eos`` means "everything
  the *current state* requires has been done" (not "end the session"): the environment is told so and either
  advances the scenario by one state or, when no state is left, sets ``should_end``.
- **SP** (role ``patient``) — from the ``sp_actor`` packet; answers every turn (also when the examinee said
  nothing), with a *list* of utterances (the patient's without prefix, family or guardians as
  ``RoleName: words``) and the patient-side roles present (``actors_present``). A prefix naming a role that is
  not present is recorded as a warning, never enforced (as in the official code).
- **environment** (role ``environment``) — from the ``environment_controller`` packet; returns ``feedback``,
  ``events``, ``patient_status`` (in-story), ``actors_present`` (medical team), ``action_assessments`` (per
  action: ``executed`` / ``pending`` / ``unsupported`` with a rationale), ``progress_index``, ``state_label``,
  ``should_end`` and ``completion_reason``.

Scenario state (official ``SimulationState``, kept in :class:`SimState` and the store): ``progress_index`` and
the state label start at 0 / ``initial_assessment``; every environment reply's index (a non-negative integer)
and non-empty label are accepted, and a change is appended to ``phase_history``. As in the official code the
one-state-per-eos rule is the environment's (its prompt), not enforced; bedside records every departure
(an advance without eos, a skip of more than one state, a move back) in ``progression_anomalies``. There is no
predefined state list: "no state left" is the environment's ``should_end`` on an eos turn.

End reasons (checked after the environment has resolved the turn, so the last examinee turn is always answered
by the SP and resolved by the environment; the examinee never sees that last reply):

- ``scenario_complete`` — ``should_end`` on a turn where the examinee said ``eos`` (no state left);
- ``environment_end`` — ``should_end`` on any other turn (the official code obeys it whatever ``eos`` was);
- ``max_turns`` — the examinee has had ``max_turns`` turns (official default 12, all states together);
- ``error`` — a model failure or a reply that stayed unreadable after ``parse_retries`` fresh samples (the
  official code crashes and the scenario has no result; bedside keeps the sample, which the scorer leaves
  unscored and counts as ``erroneous``).

What each agent sees (official ``controller.py``; every agent keeps its own chat: its system prompt, then each
turn's user message and its raw reply):

- the examinee: its packet, and each turn the case title (the case folder's name), the current patient status,
  the current state label, the latest environment ``events`` and ``feedback`` (titled "changed" when the
  environment reported anything or moved the state) and the SP's latest utterances. Never the turn budget,
  action statuses or rationales, ``actors_present``, ``completion_reason``, other packets or the rubric;
- the SP: its packet, the examinee's words this turn and the last four completed turn records (the examinee's
  words and actions, the environment's interpretation of the actions, the SP's own words, the environment's
  feedback and events; never statuses or rationales);
- the environment: its packet, the current status, progress index and label, the examinee's words, the SP's
  answer this turn, the examinee's actions (a JSON list) and, on an ``eos`` turn, the signal to advance or end;
- the evaluator (:mod:`bedside.scorers.medsp.rubric`, prompts in :mod:`bedside.scorers.medsp.evaluator`): the frozen
  rubric, the transcript, the action log (with statuses and rationales) and a state summary; never the
  evaluator packet.

Prompts: bedside's own wording (``prompts/medsp/``) by default; with ``prompts=PATH`` (a clone of the official
repository) the official texts are loaded from its ``src/simulate/`` (:func:`load_prompt_set`,
:mod:`bedside.medsp.official`). Packets are shown as the official code compiles them (file headers,
struck-through text removed; see :meth:`bedside.medsp.records.RolePacket.text`).

Test-time scaling (official ``test_time.py``), ``scaling=``:

- ``"single"`` — the control of the official scaling runs: one examinee sample at temperature 0.
- ``"best_of_n"`` — :class:`BestOfNExaminee`: each turn ``n`` (5) candidates from the examinee's full chat at
  temperature 0.8; the examinee model picks one at temperature 0 seeing only its system prompt, this turn's
  prompt and the candidates (``{"choice", "rationale"}``; an unreadable or out-of-range choice falls back to
  candidate 0, recorded). Only the chosen reply enters the examinee's chat. ``bon_selector="majority"`` keeps
  bedside's earlier self-consistency vote instead of the selector call.
- ``"panel"`` — :class:`PanelExaminee` (the official "medagents"): ``panel_size`` (5) specialties chosen once
  per case by the examinee model (temperature 0, from its packet; padded with "General Medicine"); each turn
  every specialist gives a free-text opinion (examinee system prompt plus a specialist overlay, this turn's
  prompt, no history, temperature 0.8); the examinee model integrates them with its full chat (temperature 0);
  the specialists then vote on the proposal (temperature 0; an unreadable vote counts as agreement) and any
  disagreement with advice triggers one revision (``panel_rounds`` = 1). Only the final reply enters the
  examinee's chat.

With any scaling the SP and the environment run at temperature 0 (official ``fixed_temperature``); without,
no temperature is set for any role (the provider's default, as in the official code). Candidates, opinions,
votes, selections and fallbacks are kept in each examinee turn's ``data`` (``best_of_n`` / ``panel``), in the
store and as ``INFO`` events.

Everything is left in ``state.store`` (:class:`~bedside.medsp.records.MedSPStore`); ``state.messages`` is the
examinee's own chat.

Where each part lives: :mod:`.session` (the controller bookkeeping: scenario state, action log, end reasons,
advanced by the orchestrator), :mod:`.agents` (examinee, SP, environment), :mod:`.scaling` (best-of-N, panel),
:mod:`.prompts` (bedside's and the official prompt sets), :mod:`.solver` (the Inspect solver).
"""

from bedside.medsp.official import OfficialPromptsError
from bedside.solvers.medsp.agents import EnvironmentAgent, ExamineeAgent, MedSPAgent, PatientAgent
from bedside.solvers.medsp.prompts import BedsidePrompts, OfficialPrompts, PromptSet, load_prompt_set
from bedside.solvers.medsp.scaling import BestOfNExaminee, PanelExaminee, normalise_action, self_consistency
from bedside.solvers.medsp.session import Session
from bedside.solvers.medsp.solver import BonSelector, Scaling, make_examinee, medsp_encounter

__all__ = [
    "OfficialPromptsError",
    "EnvironmentAgent",
    "ExamineeAgent",
    "MedSPAgent",
    "PatientAgent",
    "BedsidePrompts",
    "OfficialPrompts",
    "PromptSet",
    "load_prompt_set",
    "BestOfNExaminee",
    "PanelExaminee",
    "normalise_action",
    "self_consistency",
    "Session",
    "BonSelector",
    "Scaling",
    "make_examinee",
    "medsp_encounter",
]
