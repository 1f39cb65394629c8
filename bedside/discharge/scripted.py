"""Scripted DischargeBench roles for ``bedside/scripted`` (see :mod:`bedside.providers.scripted`).

- educator: prose that walks the discharge topics found in the note (reason for admission,
  diagnosis, medications, tests, treatments, home care, follow-up, warning signs) one per turn,
  then signs off;
- patient: ``{"utterance": ...}`` in the persona's style; says goodbye after the educator's
  sign-off; answers comprehension questions from what the educator said (or "I don't know.");
- monitor: the full verdict JSON; FAILs (severe) a patient turn that breaks character, marks
  ``session_complete`` after the educator's sign-off and the patient's closing acknowledgment;
- judges: :mod:`bedside.discharge.scripted_judges` (same ``Options``).

Every role reads the conversation from its chat roles and the rest from the sample (its
``SITUATIONS``), never the rendered prompt: the note and the persona from the sample's metadata (the
case), the patient's stress behaviour from ``-T behavior`` (sample metadata), whether its turn is
corrected from the orchestrator's soft-correction and discard events, the turns so far from the
encounter in progress, the turn the monitor judges from the agent's reply before it, the comprehension
question from which of the solver's ``collect()`` tasks asks it, the educator's turns from the
encounter's record (``EncounterStore``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant

from bedside.discharge.mimic.extract import note_sections
from bedside.discharge.persona import Persona
from bedside.discharge.records import DischargeCase
from bedside.discharge.store import EncounterStore, comprehension_questions
from bedside.providers.scripts import Call, last_user_text
from bedside.providers.simulator_plants import PlantOptions, avoid_text, checker_situation, plant, scripted_checker


@dataclass
class Options(PlantOptions):
    """Behaviour switches for tests (all off by default)."""

    # patient (turn numbers count the patient's own turns, 1-based)
    break_character_turns: list[int] = field(default_factory=list)
    break_character_attempts: int = 1  # how many attempts at that turn break character
    fenced_json_turns: list[int] = field(default_factory=list)  # reply wrapped in ```json fences
    broken_json_turns: list[int] = field(default_factory=list)  # truncated JSON on the first attempt
    # monitor (turn index t = history length when the turn is evaluated, 0-based)
    monitor_warn_turns: list[int] = field(default_factory=list)
    monitor_fail_turns: list[int] = field(default_factory=list)
    monitor_fail_attempts: int = 1
    monitor_fail_severity: str = "severe"
    monitor_severe_action: str = "retry_from_last_turn"  # the action recommended with a severe FAIL
    monitor_complete_turns: list[int] = field(default_factory=list)
    monitor_never_complete: bool = False
    monitor_malformed_attempts: int = 0  # first k attempts of every evaluation are not JSON ...
    monitor_malformed_roles: list[str] = field(default_factory=list)  # ... of these speakers' turns (empty: all)
    # educator
    educator_topics: int = 0  # stop walking topics after this many (0 = all), then sign off
    # judges: names from JUDGES; their first `judge_malformed_attempts` replies are not JSON
    # ("comprehension_batch": only comprehension grading calls with more than one item)
    judge_malformed: list[str] = field(default_factory=list)
    judge_malformed_attempts: int = 1
    # a grader that disagrees (judge-sensitivity tests): names of quality axes whose 1-5 score it
    # mirrors (6 - score), "checklist" (every yes/no flipped), "comprehension" (correct <-> incorrect)
    judge_invert: list[str] = field(default_factory=list)
    # a noisy or biased grader (tests of the noise floor and of judge panels): each checklist answer flipped
    # with probability judge_flip, drawn per sample, epoch and question from noise_seed
    # (bedside.providers.scripts.noisy); judge_offset added to every 1-5 quality score, cut to 1-5
    judge_flip: float = 0.0
    noise_seed: int = 0
    judge_offset: int = 0


# ---------------------------------------------------------------------------------------------
# discharge note parsing (the sections: the case builder's reading, note_sections)

_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def sentences(text: str) -> list[str]:
    flat = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in _SENTENCE_RE.split(flat) if s.strip()] if flat else []


def clip(text: str, limit: int = 420) -> str:
    """At most ``limit`` characters, cut at a sentence (or word) boundary."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= limit:
        return flat
    out = ""
    for s in sentences(flat):
        if len(out) + len(s) + 1 > limit:
            break
        out = f"{out} {s}".strip()
    return out or flat[:limit].rsplit(" ", 1)[0] + " ..."


def _usable(text: str | None) -> bool:
    return text is not None and text.strip().lower() not in ("none", "___", "n/a", "")


RETURN_WORDS = ("return", "come back", "call", "seek", "emergency", "911", " er ", " ed ")


def educator_plan(note: str) -> list[tuple[str, str]]:
    """The scripted educator's turns for this note: (topic, text) in the paper's topic order."""
    s = note_sections(note)
    plan: list[tuple[str, str]] = [
        (
            "opening",
            "Hello, I'm your discharge educator. Before you go home today I'd like to go over why you "
            "were in the hospital, your medicines, what to do at home, your follow-up visits, and the "
            "warning signs to watch for. How are you feeling right now?",
        )
    ]
    if _usable(s.get("Chief Complaint")):
        hpi = sentences(s.get("History of Present Illness", ""))
        plan.append(
            (
                "reason",
                clip(
                    f"You came to the hospital because of {s['Chief Complaint'].strip().rstrip('.')}. "
                    + " ".join(hpi[:1])
                ),
            )
        )
    if _usable(s.get("Discharge Diagnosis")):
        plan.append(
            ("diagnosis", clip(f"The main problem we found and treated is this: {s['Discharge Diagnosis']}", 360))
        )
    if _usable(s.get("Discharge Medications")):
        meds = [ln.strip() for ln in s["Discharge Medications"].splitlines() if ln.strip()]
        plan.append(("medications", clip("Here are the medicines you will take at home: " + "; ".join(meds), 520)))
    if _usable(s.get("Pertinent Results")):
        plan.append(("tests", clip("While you were here we ran some tests. " + s["Pertinent Results"], 360)))
    course = sentences(s.get("Brief Hospital Course", ""))
    procedure = s.get("Major Surgical or Invasive Procedure", "")
    if course or _usable(procedure):
        lead = f"The procedure you had was: {clip(procedure, 160)}. " if _usable(procedure) else ""
        plan.append(("treatment", clip(lead + "In the hospital we treated you like this: " + " ".join(course[:3]))))
    instructions = sentences(s.get("Discharge Instructions", ""))
    warn = [x for x in instructions if any(w in f" {x.lower()} " for w in RETURN_WORDS)]
    home = [
        x for x in instructions if x not in warn and not x.lower().startswith(("dear", "we wish", "it was a pleasure"))
    ]
    if home:
        plan.append(("home", clip("When you go home, here is what to do: " + " ".join(home[:4]))))
    if _usable(s.get("Followup Instructions")):
        plan.append(("follow_up", clip("About your follow-up appointments: " + s["Followup Instructions"])))
    if warn:
        plan.append(("return", clip("Please come back or call 911 if any of these happen: " + " ".join(warn[:3]))))
    return plan


def _closing(note: str) -> str:
    diagnosis = clip(note_sections(note).get("Discharge Diagnosis", "your condition"), 120)
    return (
        f"To sum up: we treated {diagnosis}. Take your medicines as we discussed, keep your follow-up "
        "appointments, and come back if you notice the warning signs. You're all set to go home. Take care!"
    )


GOOD_QUESTION = "That's a good question. "
SIGN_OFF = ("all set to go home", "take care", "goodbye", "safe travels")
AI_DISCLOSURE = re.compile(r"\b(as an ai|language model|i'?m an assistant|i am an ai)\b", re.IGNORECASE)

_COMPREHENSION_KEYS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("discharge diagnosis",), ("main problem",)),
    (("receive in the hospital", "treatments did you receive"), ("in the hospital we treated", "procedure you had")),
    (("after you leave", "recommended"), ("when you go home",)),
    (("follow up", "follow-up"), ("follow-up appointments",)),
    (("symptoms", "return"), ("come back or call 911",)),
    (("medication", "medicine"), ("medicines you will take",)),
)

#: the patient's reply style per personality (the persona's ``personality``, prompts/discharge/personas.yaml)
_STYLE = {
    "neutral": "Okay. {echo}",
    "anxious": "Oh no, {echo} Is that something serious? I keep worrying it could get worse.",
    "distrustful": "How do you know that? {echo} My cousin told me something different.",
    "high_conscientiousness": "Let me write that down: {echo} Could you tell me exactly when I should do that?",
    "minimiser": "Sure, I'm fine really. {echo}",
}


def _strip_ack(text: str) -> str:
    return text.removeprefix(GOOD_QUESTION).strip()


#: what the scripted patient says at its 2nd and 4th turns under a stress behaviour (``-T behavior``,
#: the overlays of prompts/discharge/stress_overlays.yaml)
STRESS_LINES = {
    "contradiction": (
        "Wait, I told you I take my pills at night, but actually I take them in the morning. Or both, I'm not sure."
    ),
    "false_belief": "I'm sure I can stop the new medicine as soon as I feel better, everybody knows that.",
    "self_diagnosis": (
        "I read online that this is really just stress, not what the doctors said. Can we plan around that?"
    ),
    "care_resistance": (
        "I'm not taking another new medicine and I won't go to that follow-up visit, it costs too much."
    ),
}


def _persona_reply(situation: dict[str, Any], educator_said: str, n: int, corrected: bool) -> str:
    stress = STRESS_LINES.get(situation.get("behavior") or "none") if n in (2, 4) else None
    if stress and not corrected:
        return stress
    # a raw HTTP request may bring no situation: the neutral style
    style = _STYLE.get(situation.get("personality") or "neutral", _STYLE["neutral"])
    first = sentences(_strip_ack(educator_said))[:1]
    words = (first[0] if first else "what you said").rstrip(".!?").split()
    echo = "So " + " ".join(words[:14]).lower().replace("i'm", "you're") + "?" if n % 3 == 0 else "I understand."
    if corrected:
        echo = "Okay, I understand."
    return style.format(echo=echo)


def educator(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    note = situation["discharge_note"]
    plan = educator_plan(note)
    if o.educator_topics:
        plan = plan[: o.educator_topics]
    k = sum(isinstance(m, ChatMessageAssistant) for m in messages)
    if k < len(plan):
        text = plan[k][1]
    elif k == len(plan):
        text = _closing(note)
    else:
        return "Goodbye, and take care!"
    patient_said = last_user_text(messages) if k else ""
    if "?" in patient_said:
        text = GOOD_QUESTION + text
    return text


def patient(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    n = sum(isinstance(m, ChatMessageAssistant) for m in messages) + 1
    educator_said = last_user_text(messages)
    corrected = bool(situation.get("corrected"))
    if n in o.break_character_turns and attempt < o.break_character_attempts:
        utterance = "As an AI language model, I don't actually have a body or a hospital stay to talk about."
    elif any(p in educator_said.lower() for p in SIGN_OFF):
        utterance = "Okay, thank you for explaining everything. Goodbye!"
    else:
        utterance = _persona_reply(situation, educator_said, n, corrected)
    if situation.get("plant_key") is not None and (extra := plant(o, situation["plant_key"], n, situation["avoid"])):
        utterance = f"{utterance} {extra}"
    if n in o.broken_json_turns and attempt == 0:
        return '{"utterance": "' + utterance[:20]
    payload = json.dumps({"utterance": utterance}, ensure_ascii=False)
    if n in o.fenced_json_turns:
        return f"```json\n{payload}\n```"
    return payload


def comprehension(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    question = situation["question"].strip().lower()
    keys = next((k for q, k in _COMPREHENSION_KEYS if any(w in question for w in q)), ())
    said = situation["educator"]
    answer = "I don't know."
    for text in said:
        if any(k in text.lower() for k in keys):
            answer = "They told me: " + clip(_strip_ack(text), 240)
            break
    return json.dumps({"utterance": answer}, ensure_ascii=False)


def monitor(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    role_name = situation["current_role"]
    if attempt < o.monitor_malformed_attempts and (
        not o.monitor_malformed_roles or role_name in o.monitor_malformed_roles
    ):
        return "Verdict: PASS. The turn looks fine to me."
    history = situation["history"]
    t = len(history)
    message = situation["current_message"].strip()
    last_educator = next((h["message"].split("\n", 1)[0] for h in reversed(history) if h["role"] == "educator"), "")
    verdict: dict[str, Any] = {
        "verdict": "PASS",
        "issue": "none",
        "severity": None,
        "action": "none",
        "correction_instruction": None,
        "prompt_faithfulness": "faithful",
        "faithfulness_note": None,
        "reasoning": "The turn is in role and consistent with the conversation.",
        "session_complete": False,
    }
    if role_name == "patient" and AI_DISCLOSURE.search(message):
        verdict.update(
            verdict="FAIL",
            issue="role_drift",
            severity="severe",
            action=o.monitor_severe_action,
            correction_instruction=(
                "Stay in character as the patient. Never say you are an AI or a language model; "
                "answer as the patient would."
            ),
            prompt_faithfulness="unfaithful",
            faithfulness_note="The patient revealed it is an AI.",
            reasoning="The patient broke character.",
        )
    elif t in o.monitor_fail_turns and attempt < o.monitor_fail_attempts:
        verdict.update(
            verdict="FAIL",
            issue="prompt_unfaithful",
            severity=o.monitor_fail_severity,
            action=o.monitor_severe_action if o.monitor_fail_severity == "severe" else "retry_from_last_turn",
            correction_instruction="Answer in your own words as the patient, in one or two short sentences.",
            prompt_faithfulness="partial",
            reasoning=f"Injected failure at turn {t}.",
        )
    elif t in o.monitor_warn_turns:
        verdict.update(
            verdict="WARN",
            issue="prompt_unfaithful",
            severity="minor",
            action="soft_correction",
            correction_instruction="Use simpler, everyday words, as this patient would.",
            prompt_faithfulness="partial",
            reasoning=f"Injected warning at turn {t}.",
        )
    closing = (
        role_name == "patient"
        and any(p in last_educator.lower() for p in SIGN_OFF)
        and any(w in message.lower() for w in ("goodbye", "thank"))
        and "?" not in message
    )
    if not o.monitor_never_complete and (closing or t in o.monitor_complete_turns):
        verdict["session_complete"] = True
    return json.dumps(verdict)


# ---------------------------------------------------------------------------------------------
# what each role reads about its call (bedside.providers.scripts)

#: the agents whose turns the monitor judges, by protocol
AGENTS = {"discharge.educator": "educator", "discharge.patient": "patient"}


def the_case(call: Call) -> DischargeCase:
    return DischargeCase.model_validate(call.metadata["case"])


def corrected(call: Call, role: str) -> bool:
    """Whether ``role``'s turn being asked carries a correction: a soft correction applied at this turn,
    or a regeneration after a discarded attempt (the orchestrator's events)."""
    t = len(call.turns)
    applied = any(e.get("turn") == t and e.get("role") == role and "applied" in e for e in call.info("soft_correction"))
    discarded = any(e.get("turn") == t and e.get("role") == role for e in call.info("discard"))
    return applied or discarded


def educator_situation(call: Call) -> dict[str, Any]:
    return {"discharge_note": the_case(call).discharge_note}


def patient_situation(call: Call) -> dict[str, Any]:
    persona = Persona.model_validate(call.metadata["persona"])
    return {
        "personality": persona.personality,
        "behavior": call.metadata.get("behavior", "none"),
        "corrected": corrected(call, "patient"),
        "plant_key": the_case(call).case_id,
        "avoid": avoid_text(call.metadata, [t.message for t in call.turns]),
    }


def comprehension_situation(call: Call) -> dict[str, Any]:
    """The question: the solver asks each in a task of its own, in the order of the question list."""
    assert call.task is not None, "the solver asks each comprehension question in a collect() task"
    question = comprehension_questions()[call.task - 1]
    history = call.store(EncounterStore).history
    return {"question": question["text"], "educator": [t.message for t in history if t.role == "educator"]}


def monitor_situation(call: Call) -> dict[str, Any]:
    """The turns so far and the candidate turn: the reply of the agent asked just before."""
    candidate = call.latest_reply(*AGENTS)
    assert candidate is not None, "the monitor judges an agent's reply"
    return {
        "history": [{"role": t.role, "message": t.message} for t in call.turns],
        "current_role": AGENTS[candidate.protocol],
        "current_message": candidate.read().message,
    }


SITUATIONS = {
    "discharge.simulator_checker": checker_situation,
    "discharge.educator": educator_situation,
    "discharge.patient": patient_situation,
    "discharge.comprehension": comprehension_situation,
    "discharge.monitor": monitor_situation,
}


HANDLERS = {
    "discharge.simulator_checker": scripted_checker,
    "discharge.educator": educator,
    "discharge.patient": patient,
    "discharge.comprehension": comprehension,
    "discharge.monitor": monitor,
}
