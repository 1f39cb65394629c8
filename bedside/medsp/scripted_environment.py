"""Scripted MedSP1000 environment controller and evaluator for ``bedside/scripted`` (see
:mod:`bedside.providers.scripted` and the conventions in :mod:`bedside.medsp.scripted`, whose
``Options`` they share). Both read their call's situation (``SITUATIONS``), never the prompt: the
environment materials (the scenario, sample metadata) and the clinician's speech and actions (the
encounter's turns so far); the rubric items (the evaluator's reply schema, or the scenario's whole rubric
under the official prompts) and the encounter's transcript (``MedSPStore``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from inspect_ai.model import ChatMessage

from bedside.medsp.records import COMPETENCIES, MedSPStore
from bedside.medsp.scripted import (
    Options,
    assistant_texts,
    bullets,
    own_replies,
    said_to_patient,
    scenario,
    section,
    stems,
)
from bedside.providers.scripts import Call, noisy

__all__ = ["Options", "HANDLERS", "SITUATIONS", "action_results", "scenario_states", "timed_events"]


# ---------------------------------------------------------------------------------------------
# environment controller

RESULT_LINE = re.compile(r"^\*\*(?P<keys>.+?)\*\*\s*(?P<tags>(?:\[[a-z ]+\]\s*)*):\s*(?P<text>.+)$", re.I)
TIMED_LINE = re.compile(r"^\*\*T\+(?P<k>\d+)(?:\s+unless\s+(?P<unless>.+?))?\*\*\s*:\s*(?P<text>.+)$", re.I)
STATE_LINE = re.compile(r"^\*\*(?P<label>[a-z0-9_]+)\*\*\s*:\s*(?P<text>.+)$", re.I)
STATUS = re.compile(r"\s*\(status:\s*(?P<status>.+?)\)\s*$", re.I)


@dataclass
class Outcome:
    keys: list[str]
    text: str
    status: str | None
    ends: bool
    pending: bool


def _split_status(text: str) -> tuple[str, str | None]:
    m = STATUS.search(text)
    return (text[: m.start()].strip(), m.group("status").strip()) if m else (text.strip(), None)


def action_results(materials: str) -> list[Outcome]:
    out = []
    for line in bullets(section(materials, "action result")):
        m = RESULT_LINE.match(line)
        if m:
            text, status = _split_status(m.group("text"))
            keys = [k.strip().lower() for k in m.group("keys").split("/") if k.strip()]
            tags = m.group("tags").lower()
            out.append(
                Outcome(keys=keys, text=text, status=status, ends="ends encounter" in tags, pending="pending" in tags)
            )
    return out


def timed_events(materials: str) -> list[tuple[int, str | None, str, str | None]]:
    out = []
    for line in bullets(section(materials, "timed event")):
        m = TIMED_LINE.match(line)
        if m:
            text, status = _split_status(m.group("text"))
            out.append((int(m.group("k")), (m.group("unless") or "").strip().lower() or None, text, status))
    return out


def scenario_states(materials: str) -> list[tuple[str, str, str | None]]:
    """(label, what is observed on entering it, patient status) of ``## Scenario states``, in order; one
    ``initial_assessment`` state when the materials list none."""
    out: list[tuple[str, str, str | None]] = []
    for line in bullets(section(materials, "scenario state")):
        m = STATE_LINE.match(line)
        if m:
            text, status = _split_status(m.group("text"))
            out.append((m.group("label"), text, status))
    return out or [("initial_assessment", "", None)]


def mentions(text: str, phrase: str) -> bool:
    return re.search(r"\b" + re.escape(phrase.lower()), text.lower()) is not None


def environment(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if attempt < o.medsp_env_malformed_attempts:
        return "The nurse nods and waits."
    ctx = situation
    materials = ctx["materials"]
    previous = own_replies(messages)
    k = len(assistant_texts(messages)) + 1
    eos = bool(ctx["eos"])
    actions = [str(a) for a in ctx["actions"] or []]
    speech = said_to_patient(ctx["speech"])
    states = scenario_states(materials)
    last = previous[-1] if previous else {}
    index = int(last.get("progress_index", 0) or 0)
    label = last.get("state_label") or states[min(index, len(states) - 1)][0]
    on_request = bullets(section(materials, "available on request"))
    if last:
        actors = dict(last.get("actors_present") or {})
    else:
        actors = {
            r: "Listed as present at the start in the materials."
            for r in bullets(section(materials, "present at start"))
        }
    status = last.get("patient_status") or section(materials, "initial patient status", "initial status")
    feedback: list[str] = []
    assessments: list[dict[str, str]] = []
    ends = False
    for action in actions:
        outcome = next((oc for oc in action_results(materials) if any(mentions(action, key) for key in oc.keys)), None)
        role = next((r for r in on_request if mentions(action, r.split("(")[0].strip())), None)
        if outcome is not None:
            feedback.append(outcome.text)
            status = outcome.status or status
            ends = ends or outcome.ends
            state = "pending" if outcome.pending else "executed"
            assessments.append(
                {
                    "raw": action,
                    "interpreted_action": outcome.keys[0],
                    "status": state,
                    "rationale": f"Listed under action results ({outcome.keys[0]}).",
                }
            )
        elif role is not None:
            assessments.append(
                {
                    "raw": action,
                    "interpreted_action": f"call {role}",
                    "status": "executed",
                    "rationale": f"{role} is available on request.",
                }
            )
        else:
            assessments.append(
                {
                    "raw": action,
                    "interpreted_action": action.lower(),
                    "status": "unsupported",
                    "rationale": "Not among this scenario's action results.",
                }
            )
        if role is not None and role not in actors:
            actors[role] = "Called by the clinician; listed as available on request."
            feedback.append(f"{role}: I'm here. How can I help?")
    for role in on_request:  # named in speech ("Nurse, ..." / "can we call the pharmacist")
        if role not in actors and mentions(speech, role.split("(")[0].strip()):
            actors[role] = "Called by the clinician; listed as available on request."
            feedback.append(f"{role}: I'm here. How can I help?")
    all_actions = [str(a) for a in ctx["all_actions"]]
    reported = {e for p in previous for e in p.get("events", [])}
    events: list[str] = []
    for due, unless, text, new_status in timed_events(materials):
        if due > k or text in reported:
            continue
        if unless and any(mentions(a, unless) for a in all_actions):
            continue
        events.append(text)
        status = new_status or status
    should_end, reason = ends, "The handover point of the scenario was reached." if ends else ""
    if eos or (o.medsp_env_advance_turn and k == o.medsp_env_advance_turn):
        if index + 1 < len(states):
            index += 1
            label, text, new_status = states[index]
            if text:
                feedback.append(text)
            status = new_status or status
        elif eos:
            should_end, reason = True, f"No scenario state after {label}."
    if o.medsp_env_end_turn and k >= o.medsp_env_end_turn:
        should_end, reason = True, reason or "The scenario's end point was reached."
    if o.medsp_env_drop_last_assessment and assessments:
        assessments = assessments[:-1]
    if o.medsp_env_unnamed_assessments:
        assessments = [{**a, "raw": ""} for a in assessments]
    return json.dumps(
        {
            "feedback": feedback or ["No new findings."],
            "events": events,
            "actors_present": actors,
            "action_assessments": assessments,
            "patient_status": status,
            "progress_index": index,
            "state_label": label,
            "should_end": should_end,
            "completion_reason": reason,
        },
        ensure_ascii=False,
    )


# ---------------------------------------------------------------------------------------------
# evaluator


def examinee_contributions(transcript: list[dict[str, Any]]) -> str:
    """Everything the examinee said or did, from the encounter's transcript entries."""
    parts = []
    for entry in transcript:
        if entry.get("role") in ("examinee", "examinee_actions"):
            content = entry.get("content")
            parts.append(" ".join(content) if isinstance(content, list) else str(content or ""))
    return "\n".join(parts)


def evaluator(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if attempt < o.medsp_evaluator_malformed_attempts:
        return "Overall the examinee did well; most items are met."
    ctx = situation
    did = stems(examinee_contributions(ctx["transcript"]))

    def judge(text: str) -> tuple[bool, str]:
        need = stems(text)
        hit = sorted(need & did)
        met = noisy(bool(need) and len(hit) * 2 >= len(need), o.judge_flip, o.noise_seed, situation, text)
        return met, (
            f"The examinee's words or actions match: {', '.join(hit)}." if met else "No matching statement or action."
        )

    rubric = [i for c in COMPETENCIES for i in ctx["items"] if i["competency"] == c]  # the prompt's order
    items = [(i["id"], i["text"]) for i in rubric]
    drop = attempt < o.medsp_evaluator_missing_item_attempts
    if not ctx.get("official"):
        judged = {item_id: dict(zip(("met", "evidence"), judge(text))) for item_id, text in items}
        if drop:
            judged.pop(items[-1][0])
        return json.dumps(
            {"reasoning": ["Keyword overlap with the examinee's words and actions."], "items": judged},
            ensure_ascii=False,
        )
    official: dict[str, Any] = {"reasoning": ["Keyword overlap with the examinee's words and actions."]}
    last_key = None
    for comp in COMPETENCIES:
        official[comp] = {}
        for item in rubric:
            if item["competency"] == comp:
                official[comp][item["text"]] = judge(item["text"])[0]
                last_key = (comp, item["text"])
    if drop and last_key:
        official[last_key[0]].pop(last_key[1])
    return json.dumps(official, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# what each role reads about its call (bedside.providers.scripts; module docstring)


def environment_situation(call: Call) -> dict[str, Any]:
    """The materials and the examinee's turn before the SP's (its words, actions and ``eos``), with every
    action of the examinee so far."""
    exam = call.turns[-2].data
    return {
        "materials": scenario(call).environment_controller.text(),
        "speech": exam["speak"],
        "actions": exam["actions"],
        "eos": exam["eos"],
        "all_actions": [a for t in call.turns if t.role == "examinee" for a in t.data["actions"]],
    }


def evaluator_situation(call: Call) -> dict[str, Any]:
    """The items asked (the ids of the reply schema; the whole rubric in the official format, whose schema
    names none) and the encounter's transcript."""
    rubric = scenario(call).rubric.items()
    keyed = (call.schema.get("properties") or {}).get("items")
    if keyed is not None:
        asked = set(keyed.get("properties") or {})
        rubric = [i for i in rubric if i.id in asked]
    return {
        "items": [i.model_dump() for i in rubric],
        "transcript": call.store(MedSPStore).sim_state.get("transcript", []),
        "official": keyed is None,
    }


SITUATIONS = {
    "medsp.environment": environment_situation,
    "medsp.evaluator": evaluator_situation,
}

HANDLERS = {
    "medsp.environment": environment,
    "medsp.evaluator": evaluator,
}
