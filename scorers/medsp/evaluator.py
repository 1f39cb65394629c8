"""The MedSP1000 frozen-rubric evaluator's prompts and reply reader (paper Section 5.4; official
``prompts.py`` ``build_evaluator_system_prompt_frozen_rubric`` and ``controller.py`` ``_build_evaluator_prompt``):
bedside's own wording (``prompts/medsp/evaluator_*.j2``, default) or the official texts from a clone
(``prompts=PATH``, :mod:`bedside.medsp.official`). The call itself is made by :mod:`bedside.scorers.medsp.rubric`.

The evaluator sees the frozen rubric, the transcript, the action log (with statuses and rationales) and a
state summary (:func:`evaluation_summary`); never the evaluator packet. Its reply is read into an
:class:`Evaluation`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from bedside.jsonreply import extract_json_all
from bedside.medsp.official import OfficialSource, is_bedside, official_source
from bedside.medsp.protocols import EVALUATOR, OfficialEvaluatorReply, as_text, coerce_bool, evaluator_reply, text_list
from bedside.medsp.records import COMPETENCIES, COMPETENCY_NAMES, RubricItem, SimState
from bedside.prompts import render
from bedside.protocols import Protocol, reading


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


class Evaluation(BaseModel):
    """One evaluator reply, read: item id -> {met, evidence}, the reasoning, and items matched loosely.
    Under the official reading (``-T reading=official``, the default) the reply may leave items out (they
    leave the case's denominator) and may add keys the rubric does not have (``extra``: competency, key,
    met; counted, as the official counter counts whatever keys the evaluator returns)."""

    verdicts: dict[str, dict[str, Any]]
    reasoning: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    extra: list[dict[str, Any]] = Field(default_factory=list)


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a reply, the model's own (last) first."""
    found = extract_json_all(text, dict)
    if not found:
        raise ValueError(f"no JSON object in the evaluator reply: {text[:160]!r}")
    return [f.value for f in reversed(found)]


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
            parser=lambda text: self.read_evaluation(text, items, "official"),
            strict=lambda text: self.read_evaluation(text, items, "strict"),
        )

    def read_evaluation(self, text: str, items: Sequence[RubricItem], rule: str | None = None) -> Evaluation:
        """``strict``: every item id judged exactly once (missing ids make the reply unreadable:
        ``ValueError``). ``official`` (default): every key under ``items`` counts, as the official counter
        counts whatever keys the evaluator returns: a rubric id is that item's verdict, another key whose
        prefix is a competency (``PC.12``) is counted under it (``extra``), others are noted and not
        counted; left-out items leave the denominator. A reply with no verdict at all is unreadable."""
        if (rule or reading()) == "strict":
            reply = EVALUATOR.using(evaluator_reply([i.id for i in items])).read_json(text)[0]
            verdicts = reply.items.model_dump()
            return Evaluation(verdicts={i.id: verdicts[i.id] for i in items}, reasoning=reply.reasoning)
        ids = {i.id.upper(): i.id for i in items}
        for obj in _objects(text):
            block = obj.get("items")
            if not isinstance(block, dict) or not block:
                continue
            found: dict[str, dict[str, Any]] = {}
            extra: list[dict[str, Any]] = []
            notes: list[str] = []
            for key, value in block.items():
                key_text = str(key).strip()
                if not key_text:
                    continue
                met = coerce_bool(value.get("met") if isinstance(value, dict) else value)
                evidence = as_text(value.get("evidence")) if isinstance(value, dict) else ""
                item_id = ids.get(key_text.upper())
                competency = key_text.split(".")[0].strip().upper()
                if item_id is not None:
                    found[item_id] = {"met": met, "evidence": evidence}
                elif competency in COMPETENCIES:
                    extra.append({"key": key_text, "competency": competency, "met": met})
                    notes.append(f"{key_text}: not in the rubric, counted under {competency} (official counter)")
                else:
                    notes.append(f"{key_text}: not in the rubric and no competency, not counted")
            missing = [i.id for i in items if i.id not in found]
            if missing:
                notes.append(f"{len(missing)} rubric item(s) not judged, left out of the denominator: {missing[:10]}")
            if found or extra:
                return Evaluation(verdicts=found, reasoning=text_list(obj.get("reasoning")), notes=notes, extra=extra)
        raise ValueError(f"no rubric verdict under 'items' in the evaluator reply: {text[:160]!r}")


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
            parser=lambda text: self.read_evaluation(text, items, "official"),
            strict=lambda text: self.read_evaluation(text, items, "strict"),
        )

    def read_evaluation(self, text: str, items: Sequence[RubricItem], rule: str | None = None) -> Evaluation:
        """Items keyed by their verbatim text under their competency. A key is matched to its item exactly,
        else with whitespace normalised, else under another competency (noted). ``strict``: items the reply
        leaves out make it unreadable (``ValueError``). ``official`` (default): as the official counter,
        left-out items leave the denominator and every other key under a competency is counted there
        (``extra``); a reply with no verdict at all is unreadable."""
        official = (rule or reading()) != "strict"
        reply = EVALUATOR.using(OfficialEvaluatorReply).read_json(text)[0]
        squash = lambda t: " ".join(str(t).split())  # noqa: E731
        verdicts: dict[str, dict[str, Any]] = {}
        notes: list[str] = []
        for item in items:
            own: dict[str, bool] = getattr(reply, item.competency)
            value = own.get(item.text, own.get(item.text.strip()))
            if value is None:
                value = next((v for k, v in own.items() if squash(k) == squash(item.text)), None)
            if value is None:
                for c in COMPETENCIES:
                    other = next((v for k, v in getattr(reply, c).items() if squash(k) == squash(item.text)), None)
                    if other is not None:
                        value = other
                        notes.append(f"{item.id} judged under {c}")
                        break
            if value is not None:
                verdicts[item.id] = {"met": bool(value), "evidence": ""}
        missing = [i.id for i in items if i.id not in verdicts]
        if missing and not official:
            raise ValueError(f"{len(missing)} rubric item(s) not judged: {missing[:10]}")
        extra: list[dict[str, Any]] = []
        if official:
            used = {squash(i.text) for i in items if i.id in verdicts}
            for c in COMPETENCIES:
                for k, met in getattr(reply, c).items():
                    if squash(k) and squash(k) not in used:
                        extra.append({"key": k, "competency": c, "met": bool(met)})
                        notes.append(f"{k[:60]!r}: not in the rubric, counted under {c} (official counter)")
            if missing:
                notes.append(f"{len(missing)} rubric item(s) not judged, left out of the denominator: {missing[:10]}")
            if not verdicts and not extra:
                raise ValueError("no rubric verdict in the evaluator reply")
        return Evaluation(verdicts=verdicts, reasoning=reply.reasoning, notes=notes, extra=extra)


EvaluatorPrompts = BedsideEvaluatorPrompts


def load_evaluator_prompts(prompts: str | None) -> EvaluatorPrompts:
    """bedside's wording (``None`` or ``"bedside"``), or the official evaluator texts from the clone at
    ``prompts`` (as :func:`bedside.solvers.medsp.load_prompt_set` for the simulation)."""
    if is_bedside(prompts):
        return BedsideEvaluatorPrompts()
    return OfficialEvaluatorPrompts(official_source(str(prompts)))
