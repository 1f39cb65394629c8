"""What a MedSP1000 encounter leaves behind: the sample store (:class:`MedSPStore`) and the scenario state
(:class:`SimState`, official ``SimulationState``; official field names, so that the official prompt builders
can read it). The solver (:mod:`bedside.solvers.medsp`) writes them, the scorer (:mod:`bedside.scorers.medsp.rubric`)
reads them back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inspect_ai.util import StoreModel
from pydantic import Field

from bedside.records import Turn

#: official initial state (``runtime_hints``): the state label and the status before any assessment
INITIAL_STATE = "initial_assessment"
INITIAL_STATUS = "Not assessed"


class MedSPStore(StoreModel):
    """What one MedSP1000 encounter produced (``sample.store`` keys ``MedSPStore:*``)."""

    scenario: str = ""
    scaling: str = "none"
    max_turns: int = 0
    prompts: str = "bedside"
    history: list[Turn] = Field(default_factory=list)  # every accepted turn (examinee, patient, environment)
    sim_state: dict = Field(default_factory=dict)  # SimState: transcript, action log, turns, phase history, ...
    progress_index: int = 0  # the scenario state reached (also in sim_state)
    state_label: str = ""
    phase_history: list[str] = Field(default_factory=list)  # "<index>:<label>" of every state entered
    end_reason: str = ""
    error: str | None = None
    examinee_turns: int = 0
    action_statuses: dict[str, int] = Field(default_factory=dict)  # executed / pending / unsupported
    unsupported_actions: int = 0
    progression_anomalies: list[dict] = Field(default_factory=list)
    panel_domains: list[str] = Field(default_factory=list)
    panel_domain_selection: dict = Field(default_factory=dict)
    role_fallbacks: list[str] = Field(default_factory=list)
    agent_stats: dict[str, dict[str, int]] = Field(default_factory=dict)


@dataclass
class TurnRecord:
    """One completed turn (official ``sim_types.TurnRecord``; the SP sees the last four)."""

    turn_index: int
    phase_id: str
    progress_index: int
    minutes_since_encounter: int
    minutes_since_ingestion: int
    examinee_speak: str
    examinee_actions: list[str]
    canonical_actions: list[str]
    sp_speak: list[str]
    environment_feedback: list[str]
    environment_events: list[str]


@dataclass
class SimState:
    """The encounter's state (official ``SimulationState``). The minutes are never advanced, as in the
    official code (they are kept only so that the official prompt builders find them)."""

    current_phase_id: str = INITIAL_STATE
    progress_index: int = 0
    total_turns: int = 0
    phase_turns: int = 0
    minutes_since_encounter: int = 0
    minutes_since_ingestion: int = 0
    patient_status: str = INITIAL_STATUS
    completion_reason: str = ""
    transcript: list[dict] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    action_history: list[dict] = field(default_factory=list)
    phase_history: list[str] = field(default_factory=list)
    latest_patient_speak: list[str] = field(default_factory=list)
    latest_environment_feedback: list[str] = field(default_factory=list)
    latest_environment_events: list[str] = field(default_factory=list)
    latest_state_changed: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimState:
        data = dict(data)
        data["turns"] = [TurnRecord(**t) for t in data.get("turns", [])]
        return cls(**data)
