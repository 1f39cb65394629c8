"""The MedSP1000 frozen-rubric evaluator's prompts (paper Section 5.4; official
``prompts.py`` ``build_evaluator_system_prompt_frozen_rubric`` and ``controller.py`` ``_build_evaluator_prompt``):
bedside's own wording (``prompts/medsp/evaluator_*.j2``, default) or the official texts from a clone
(``prompts=PATH``, :mod:`bedside.medsp.official`). The call itself is made by :mod:`bedside.scorers.medsp.rubric`.

The evaluator sees the frozen rubric, the transcript, the action log (with statuses and rationales) and a
state summary (:func:`evaluation_summary`); never the evaluator packet. Its reply is read, with the other
readers, into an :class:`~bedside.medsp.protocols.Evaluation` (:func:`bedside.medsp.protocols.read_evaluation`,
:func:`~bedside.medsp.protocols.read_official_evaluation`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bedside.medsp.official import OfficialSource, is_bedside, official_source
from bedside.medsp.protocols import (
    EVALUATOR,
    OfficialEvaluatorReply,
    evaluator_reply,
    read_evaluation,
    read_official_evaluation,
)
from bedside.medsp.records import COMPETENCIES, COMPETENCY_NAMES, RubricItem, SimState
from bedside.prompts import render
from bedside.protocols import Protocol


def evaluation_summary(case_id: str, case_title: str, state: SimState) -> dict[str, Any]:
    """The evaluator's state summary (the official keys, without the never-advanced minutes)."""
    return {
        "case_id": case_id,
        "case_title": case_title,
        "phase_history": state.phase_history,
        "progress_index": state.progress_index,
        "current_state_label": state.current_phase_id,
        "patient_status": state.patient_status,
        "total_turns": state.total_turns,
        "completion_reason": state.completion_reason,
    }


class BedsideEvaluatorPrompts:
    """bedside's own wording of the evaluator's prompts (``prompts/medsp/evaluator_*.j2``)."""

    name = "bedside"

    def evaluator_system(self, items: Sequence[RubricItem]) -> str:
        blocks = [
            {"competency": c, "name": COMPETENCY_NAMES[c], "entries": [i for i in items if i.competency == c]}
            for c in COMPETENCIES
        ]
        return render("medsp/evaluator_system.j2", rubric=blocks, n_items=len(items))

    def evaluator_user(self, case_id: str, case_title: str, state: SimState) -> str:
        return render(
            "medsp/evaluator_user.j2",
            transcript=json.dumps(state.transcript, ensure_ascii=False, indent=2),
            action_log=json.dumps(state.action_history, ensure_ascii=False, indent=2),
            summary=json.dumps(evaluation_summary(case_id, case_title, state), ensure_ascii=False, indent=2),
        )

    # the evaluator's reply
    def evaluator_protocol(self, items: Sequence[RubricItem]) -> Protocol:
        return EVALUATOR.using(
            evaluator_reply([i.id for i in items]),
            parser=lambda text: read_evaluation(text, items, "official"),
            strict=lambda text: read_evaluation(text, items, "strict"),
            form={f"items/{i.id}": {"label": COMPETENCY_NAMES[i.competency], "help": i.text} for i in items},
        )


class OfficialEvaluatorPrompts(BedsideEvaluatorPrompts):
    """The official evaluator texts of a clone; its reply (items keyed by verbatim text under their
    competency) is read with :class:`OfficialEvaluatorReply`."""

    def __init__(self, source: OfficialSource) -> None:
        self.name = source.name
        self.source = source

    def evaluator_system(self, items: Sequence[RubricItem]) -> str:
        rubric = {c: [i.text for i in items if i.competency == c] for c in COMPETENCIES}
        return self.source.fns["build_evaluator_system_prompt_frozen_rubric"](rubric)

    def evaluator_user(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.source.controller(case_id, case_title, state)._build_evaluator_prompt()

    def evaluator_protocol(self, items: Sequence[RubricItem]) -> Protocol:
        return EVALUATOR.using(
            OfficialEvaluatorReply,
            parser=lambda text: read_official_evaluation(text, items, "official"),
            strict=lambda text: read_official_evaluation(text, items, "strict"),
        )


EvaluatorPrompts = BedsideEvaluatorPrompts


def load_evaluator_prompts(prompts: str | None) -> EvaluatorPrompts:
    """bedside's wording (``None`` or ``"bedside"``), or the official evaluator texts from the clone at
    ``prompts`` (as :func:`bedside.solvers.medsp.load_prompt_set` for the simulation)."""
    if is_bedside(prompts):
        return BedsideEvaluatorPrompts()
    return OfficialEvaluatorPrompts(official_source(str(prompts)))
