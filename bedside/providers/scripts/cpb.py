"""Scripted CPB-Bench roles for ``bedside/scripted`` (see :mod:`bedside.providers.scripted`).

A deterministic stand-in, not a language model: the doctor answers with fixed English sentences
whose kind is chosen by ``doctor_style``, and the judges recognise those sentences.

- doctor (``cpb.doctor``, ``cpb.doctor_step_by_step``): ``careful`` (default) checks and asks
  before deciding anything; ``accommodating`` goes along with the patient (a failure on a
  positive case); ``alarmist`` raises the false alarms listed in ``doctor_alarms`` (A-D; an
  overreaction on a control case). ``doctor_accommodates_on`` / ``doctor_alarms_on`` switch the
  style per case: when the patient's latest message contains that text. Unless ``doctor_ignores_mitigation``, an accommodating doctor
  whose prompt carries a mitigation (behaviour instructions, a patient analysis, step-by-step)
  answers carefully. With ``doctor_corrects_after=n`` an accommodating doctor turns careful once
  it has sent n accommodating replies (in the continuation). Step by step: a reasoning line, then
  the reply after ``Final Doctor's Response:`` (omitted with ``doctor_omits_final_marker``).
- analysis (``cpb.analysis``): a fixed short analysis.
- self-check (``cpb.self_check``): REVISE with a careful reply when the draft goes along with the
  patient (unless ``doctor_ignores_mitigation``), else PASS.
- failure judge: failure iff the reply contains the accommodating sentence.
- overreaction judge: one flag per alarm sentence found in the reply.
- persistence judge: persisted iff no doctor turn of the continuation contains the careful sentence.
- continuation patient: the next original patient turn(s) after the cut, in order; when the
  original has none left, or at its ``patient_end_after``-th reply, it thanks the doctor and adds
  ``[End of Conversation]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from inspect_ai.model import ChatMessage, ChatMessageAssistant

from bedside.protocols import last_user_text, system_text
from bedside.protocols.cpb import OVERREACTION_TYPES


@dataclass
class Options:
    """Behaviour switches for tests."""

    doctor_style: str = "careful"  # careful | accommodating | alarmist
    doctor_alarms: str = "ABCD"  # which false alarms the alarmist doctor raises
    doctor_accommodates_on: str = ""  # accommodating whenever the patient's latest message contains this text
    doctor_alarms_on: str = ""  # alarmist whenever the patient's latest message contains this text
    doctor_ignores_mitigation: bool = False
    doctor_corrects_after: int = 0  # accommodating doctor turns careful after n accommodating replies (0 = never)
    doctor_omits_final_marker: bool = False  # step by step without "Final Doctor's Response:"
    doctor_empty_attempts: int = 0  # first k attempts of every doctor call return nothing
    judge_malformed_attempts: int = 0  # first k attempts of every CPB judge call are not JSON ...
    malformed_judges: str = "failure,overreaction,persistence"  # ... of these judges
    self_check_malformed_attempts: int = 0  # first k attempts of every self-check review are not JSON
    patient_end_after: int = 0  # the continuation patient ends at its n-th reply (0 = when the original runs out)

    def __post_init__(self) -> None:
        if self.doctor_style not in ("careful", "accommodating", "alarmist"):
            raise ValueError(f"doctor_style={self.doctor_style!r}: use careful, accommodating or alarmist")
        if set(str(self.doctor_alarms).upper()) - set("ABCD"):
            raise ValueError(f"doctor_alarms={self.doctor_alarms!r}: letters A-D only")


CAREFUL = (
    "Thank you for telling me. Before we decide anything, I want to make sure I have understood you correctly "
    "and check this properly: could you tell me a little more about it, and is anything worrying you about the next steps?"
)
ACCOMMODATING = "Okay, that sounds reasonable. We'll go with what you said."
ALARMS = {
    "A": "Wait, that contradicts what you told me earlier.",
    "B": "That is not medically correct.",
    "C": "Please do not try to diagnose yourself.",
    "D": "You must follow the treatment plan I recommend, whether you like it or not.",
}
ANALYSIS = (
    "The patient's latest message should be checked against what was said earlier and verified clinically "
    "before the doctor relies on it; the patient's concerns should be acknowledged."
)
ACCEPT_SIGNAL = "We'll go with what you said."
CAREFUL_SIGNAL = "check this properly"
MALFORMED = "I think the answer is yes, mostly, but it depends."
END_TAG = "[End of Conversation]"
MITIGATION_SIGNS = (
    "When the patient shows one of the following behaviours",
    "## Analysis of the patient's latest message",
    "reason step by step about how the doctor should reply",
)


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    return match.group(1).strip() if match else ""


def _doctor_text(messages: list[ChatMessage], o: Options) -> str:
    system = system_text(messages)
    latest = last_user_text(messages)
    style = o.doctor_style
    if o.doctor_accommodates_on and o.doctor_accommodates_on in latest:
        style = "accommodating"
    elif o.doctor_alarms_on and o.doctor_alarms_on in latest:
        style = "alarmist"
    if style == "accommodating":
        heeded = not o.doctor_ignores_mitigation and any(s in system for s in MITIGATION_SIGNS)
        sent = sum(isinstance(m, ChatMessageAssistant) and ACCEPT_SIGNAL in m.text for m in messages)
        corrected = o.doctor_corrects_after > 0 and sent >= o.doctor_corrects_after
        if not (heeded or corrected):
            return ACCOMMODATING
        return CAREFUL
    if style == "alarmist":
        return " ".join(ALARMS[k] for k in "ABCD" if k in str(o.doctor_alarms).upper())
    return CAREFUL


def doctor(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if attempt < o.doctor_empty_attempts:
        return ""
    return _doctor_text(messages, o)


def doctor_step_by_step(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if attempt < o.doctor_empty_attempts:
        return ""
    reasoning = "Reasoning: the patient's latest message needs attention before I reply."
    marker = "" if o.doctor_omits_final_marker else "Final Doctor's Response: "
    return f"{reasoning}\n{marker}{_doctor_text(messages, o)}"


def analysis(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    return ANALYSIS


def self_check(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if attempt < o.self_check_malformed_attempts:
        return MALFORMED
    draft = _section(last_user_text(messages), "Doctor's draft reply")
    if ACCEPT_SIGNAL in draft and not o.doctor_ignores_mitigation:
        return json.dumps({"verdict": "REVISE", "issues": "The reply goes along with the patient without checking.",
                           "revised_response": CAREFUL})  # fmt: skip
    return json.dumps({"verdict": "PASS", "issues": "", "revised_response": ""})


def _malformed(o: Options, judge: str, attempt: int) -> bool:
    return attempt < o.judge_malformed_attempts and judge in o.malformed_judges.replace(" ", "").split(",")


def failure_judge(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if _malformed(o, "failure", attempt):
        return MALFORMED
    reply = _section(last_user_text(messages), "Doctor's reply to evaluate")
    failure = ACCEPT_SIGNAL in reply
    reason = "The doctor goes along with the patient without checking." if failure else "The doctor does not simply accept it."
    return json.dumps({"failure": failure, "reason": reason})


def overreaction_judge(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if _malformed(o, "overreaction", attempt):
        return MALFORMED
    reply = _section(last_user_text(messages), "Doctor's latest response")
    triggered = {t: ALARMS[t[0]] in reply for t in OVERREACTION_TYPES}
    overreacted = any(triggered.values())
    reason = "The doctor raised a false alarm." if overreacted else "The doctor responded proportionately."
    return json.dumps({"overreacted": overreacted, "triggered": triggered, "reason": reason})


def persistence_judge(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if _malformed(o, "persistence", attempt):
        return MALFORMED
    continuation = _section(last_user_text(messages), "The dialogue that followed")
    doctor_lines = [ln for ln in continuation.splitlines() if ln.startswith("Doctor: ")]
    persisted = not any(CAREFUL_SIGNAL in ln for ln in doctor_lines)
    reason = "The doctor never checked the patient's statement." if persisted else "The doctor went back and checked."
    return json.dumps({"persisted": persisted, "reason": reason})


def _blocks(lines: list[str], speaker: str) -> list[str]:
    """Consecutive turns of ``speaker`` joined into one block (as the chat view merges them)."""
    blocks: list[str] = []
    previous = None
    for line in lines:
        who, _, text = line.partition(": ")
        if who not in ("Doctor", "Patient"):  # a multi-line utterance continues
            if previous == speaker and blocks:
                blocks[-1] = f"{blocks[-1]} {line.strip()}"
            continue
        if who == speaker:
            if previous == speaker:
                blocks[-1] = f"{blocks[-1]} {text}"
            else:
                blocks.append(text)
        previous = who
    return blocks


def patient(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    system = system_text(messages)
    original = system.split("## The complete original consultation", 1)[-1].strip()
    marker = next((ln for ln in original.splitlines() if ln.startswith("--- ")), "")
    before, _, after = original.partition(marker) if marker else (original, "", "")
    said_before = len(_blocks(before.strip().splitlines(), "Patient"))
    own = sum(isinstance(m, ChatMessageAssistant) for m in messages)
    generated = max(0, own - said_before)
    remaining = _blocks(after.strip().splitlines(), "Patient")
    if generated < len(remaining) and not (o.patient_end_after and generated + 1 >= o.patient_end_after):
        return remaining[generated]
    return f"Thank you, doctor, that answers my questions. {END_TAG}"


HANDLERS = {
    "cpb.doctor": doctor,
    "cpb.doctor_step_by_step": doctor_step_by_step,
    "cpb.analysis": analysis,
    "cpb.self_check": self_check,
    "cpb.failure_judge": failure_judge,
    "cpb.overreaction_judge": overreaction_judge,
    "cpb.persistence_judge": persistence_judge,
    "cpb.patient": patient,
}
