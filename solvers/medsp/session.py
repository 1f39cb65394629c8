"""The MedSP1000 encounter's controller bookkeeping (official ``controller.py``): the scenario state
(:class:`~bedside.medsp.records.SimState`) advanced by the orchestrator, turn by turn: the examinee's turn is
counted before its prompt is built; the environment's reply is applied as the official controller does
(action log, state update, turn record, progression anomalies) and decides the end reason:

- ``scenario_complete`` — ``should_end`` on a turn where the examinee said ``eos`` (no state left);
- ``environment_end`` — ``should_end`` on any other turn (the official code obeys it whatever ``eos`` was);
- ``max_turns`` — the examinee has had ``max_turns`` turns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.log import transcript

from bedside.end_reasons import EndReason
from bedside.medsp import MedSPEndReason
from bedside.medsp.records import Scenario, SimState, TurnRecord
from bedside.protocols import Reply
from bedside.records import Turn
from bedside.solvers.medsp.prompts import PromptSet


@dataclass
class Session:
    """The scenario, the prompt set and the :class:`SimState` of one encounter: the orchestrator's
    :class:`~bedside.solvers.orchestrator.Controller` (:meth:`before_turn`, :meth:`after_reply`). The
    agents read it to build their prompts; only the orchestrator's calls change it."""

    scenario: Scenario
    prompts: PromptSet
    max_turns: int
    state: SimState = field(default_factory=SimState)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.state.latest_environment_feedback = [self.prompts.first_feedback()]
        self.state.phase_history.append(f"{self.state.progress_index}:{self.state.current_phase_id}")
        self.state.transcript.append(
            {
                "role": "system",
                "type": "opening_context",
                "content": self.prompts.opening_context(*self.case, self.state),
            }
        )

    @property
    def case(self) -> tuple[str, str]:
        """(case id, case title): the official case title is the case folder's name."""
        return self.scenario.case_id, self.scenario.case_id

    # the orchestrator's controller hooks: the state advances here, never inside an agent's reply
    def before_turn(self, role: str, history: Sequence[Turn]) -> None:
        """The official controller counts the examinee's turn before building its prompt."""
        if role == "examinee":
            self.state.total_turns += 1
            self.state.phase_turns += 1

    def after_reply(self, role: str, history: Sequence[Turn], reply: Reply) -> str | None:
        """The environment's reply resolves the turn (:meth:`resolve`): what it changed goes into the
        environment turn's data, and the end reason (if any) ends the encounter."""
        if role != "environment":
            return None
        exam, patient = history[-2], history[-1]
        env = {k: v for k, v in reply.data.items() if k != "prompt"}  # the environment's reply as read
        end, info = self.resolve(exam.data, patient.data, env)
        reply.data = {**env, **info, "turn": exam.data["turn"], "eos": exam.data["eos"], "prompt": reply.data["prompt"]}
        if end is not None:
            reply.data["end_reason"] = end
        return end

    # the agents' per-turn user messages
    def examinee_prompt(self) -> str:
        return self.prompts.examinee_turn(*self.case, self.state)

    def patient_prompt(self, speech: str) -> str:
        return self.prompts.patient_turn(*self.case, self.state, speech)

    def environment_prompt(self, exam: dict[str, Any], patient: dict[str, Any]) -> str:
        return self.prompts.environment_turn(
            *self.case, self.state, exam["speak"], exam["actions"], patient["speak"], exam["eos"]
        )

    def resolve(
        self, exam: dict[str, Any], patient: dict[str, Any], env: dict[str, Any]
    ) -> tuple[str | None, dict[str, Any]]:
        """The environment's reply applied as the official controller does (action log, state update, turn
        record); returns the end reason (or None) and what this turn changed."""
        s = self.state
        turn = s.total_turns
        logged = self._log_actions(turn, exam["actions"], env["action_assessments"])
        before = (s.progress_index, s.current_phase_id)
        if env["patient_status"]:
            s.patient_status = env["patient_status"]
        if env["progress_index"] is not None:
            s.progress_index = env["progress_index"]
        if env["state_label"]:
            s.current_phase_id = env["state_label"]
        moved = (s.progress_index, s.current_phase_id) != before
        if moved:
            s.phase_history.append(f"{s.progress_index}:{s.current_phase_id}")
            self._check_progression(turn, before, bool(exam["eos"]))
        s.latest_state_changed = bool(env["events"]) or bool(env["feedback"]) or moved
        if env["should_end"]:
            s.completion_reason = env["completion_reason"]
        s.turns.append(
            TurnRecord(
                turn_index=turn,
                phase_id=s.current_phase_id,
                progress_index=s.progress_index,
                minutes_since_encounter=s.minutes_since_encounter,
                minutes_since_ingestion=s.minutes_since_ingestion,
                examinee_speak=exam["speak"],
                examinee_actions=list(exam["actions"]),
                canonical_actions=[
                    a["interpreted_action"] for a in env["action_assessments"] if a["interpreted_action"]
                ],
                sp_speak=list(patient["speak"]),
                environment_feedback=list(env["feedback"]),
                environment_events=list(env["events"]),
            )
        )
        s.transcript += [
            {"role": "examinee", "content": exam["speak"]},
            {"role": "examinee_actions", "content": list(exam["actions"])},
            {"role": "sp", "content": list(patient["speak"])},
            {"role": "environment", "content": list(env["feedback"])},
        ]
        if env["events"]:
            s.transcript.append({"role": "system_event", "content": list(env["events"])})
        s.latest_patient_speak = list(patient["speak"])
        s.latest_environment_feedback = list(env["feedback"])
        s.latest_environment_events = list(env["events"])
        end: str | None = None
        if env["should_end"]:
            end = MedSPEndReason.SCENARIO_COMPLETE if exam["eos"] else MedSPEndReason.ENVIRONMENT_END
        elif s.total_turns >= self.max_turns:
            end = EndReason.MAX_TURNS
        info = {
            "progress_index_after": s.progress_index,
            "state_label_after": s.current_phase_id,
            "patient_status_after": s.patient_status,
            "state_moved": moved,
            "action_log": logged,
        }
        transcript().info(
            {
                "turn": turn,
                "eos": bool(exam["eos"]),
                "state": f"{s.progress_index}:{s.current_phase_id}",
                "moved": moved,
                "actions": {a["raw"]: a["status"] for a in logged},
                "should_end": env["should_end"],
                "end": end,
            },
            source="medsp_environment",
        )
        return end, info

    def _log_actions(self, turn: int, actions: list[str], assessments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each action's assessment (official ``_record_action_history``): by its exact text, else the i-th
        assessment without a ``raw``, else ``unsupported`` with an empty rationale."""
        by_raw = {a["raw"]: a for a in assessments if a["raw"]}
        unnamed = [a for a in assessments if not a["raw"]]
        logged = []
        for i, action in enumerate(actions):
            found = by_raw.get(action) or (unnamed[i] if i < len(unnamed) else None)
            entry = {
                "turn": turn,
                "raw": action,
                "canonical_id": (found or {}).get("interpreted_action") or None,
                "status": (found or {}).get("status", "unsupported"),
                "rationale": (found or {}).get("rationale", ""),
            }
            self.state.action_history.append(entry)
            self.statuses[entry["status"]] += 1
            logged.append(entry)
            if entry["status"] == "unsupported":  # a person playing the examinee is told (a model is not)
                from bedside.providers.human import tell

                tell("examinee", f"Your action “{action}” was not carried out: the scenario does not support it.")
        return logged

    def _check_progression(self, turn: int, before: tuple[int, str], eos: bool) -> None:
        """Record (never enforce, as the official code) departures from the one-state-per-eos rule."""
        after = self.state.progress_index
        kinds = []
        if not eos:
            kinds.append("moved_without_eos")
        if after > before[0] + 1:
            kinds.append("skipped_states")
        if after < before[0]:
            kinds.append("moved_back")
        for kind in kinds:
            self.anomalies.append(
                {
                    "turn": turn,
                    "kind": kind,
                    "from": f"{before[0]}:{before[1]}",
                    "to": f"{after}:{self.state.current_phase_id}",
                }
            )
