"""Scripted DischargeBench judges for ``bedside/scripted`` (see :mod:`bedside.providers.scripted`):
rule-based readings of the conversation and the note (keyword coverage of each topic, token overlap of
answers with references, turn-length clarity, the advice-safety keyword rules). They give scores that
move with the dialogue, so scorer arithmetic and strata can be tested; they say nothing about quality.
Options: :class:`bedside.discharge.scripted.Options`.

What each judge reads about its call (``SITUATIONS``) comes from the sample, never from the prompt: the
note from the case (sample metadata), the dialogue and the patient's answers from the encounter's record
(``EncounterStore``), the checklist questions and the graded items from the call's reply schema (keyed
by their ids), and which question, turn or source a call of a scorer's ``collect()`` is about from its
task's place in that collect (the scorer's order: the comprehension questions, the educator turns, the
note before the dialogue). The grader grades an answer against what the note says on its topic, the
reference judge's reading (:func:`note_answer`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from inspect_ai.model import ChatMessage

from bedside.discharge.mimic.extract import note_sections
from bedside.discharge.protocols import JUDGE_REFERENCE
from bedside.discharge.records import topic_checklist_questions
from bedside.discharge.scripted import (
    GOOD_QUESTION,
    RETURN_WORDS,
    SIGN_OFF,
    Options,
    _strip_ack,
    _usable,
    clip,
    sentences,
    the_case,
)
from bedside.discharge.store import EncounterStore, comprehension_questions, conversation_lines, educator_turns
from bedside.providers.scripts import Call, noisy
from bedside.records import Turn

__all__ = ["Options", "HANDLERS", "SITUATIONS"]


JUDGES = ("quality", "checklist", "reference", "comprehension", "comprehension_batch", "factual", "safety")

#: topic -> phrase the scripted educator uses when it teaches that topic
TOPIC_PHRASES = {
    "diagnosis": ("main problem",),
    "new_meds": ("medicines you will take",),
    "treatment": ("in the hospital we treated", "procedure you had", "we ran some tests"),
    "post_discharge": ("when you go home",),
    "return": ("come back or call 911",),
    "follow_up": ("follow-up appointments",),
}
CHECKLIST_TOPICS = {
    "Discharge Diagnosis": "diagnosis",
    "New Medication": "new_meds",
    "Treatment During Stay": "treatment",
    "Post-Discharge Treatment": "post_discharge",
    "Return to Hospital": "return",
    "Follow-Up Appointment": "follow_up",
}
#: extra evidence a sub-question needs beyond its topic being taught
SUBQUESTION_EVIDENCE = {
    "Q2.2": r"\d+(\.\d+)? ?(mg|mcg|units?|g)\b",
    "Q2.4": r"side effect|bleed|dizz|interact",
    "Q3.1": r"procedure you had",
    "Q3.2": r"tests?|scan|x-ray|mri|ct\b",
    "Q3.3": r"\biv\b|intravenous|antibiotic|fluids|transfusion|oxygen",
    "Q4.2": r"\bstop|\bhold|\bchange|resume",
    "Q4.3": r"\blab|blood (test|work)|therapy|home (nursing|health)|imaging|appointment",
    "Q5.3": r"\d",
    "Q6.2": r"\bweeks?\b|\bdays?\b|\bmonths?\b|\d",
}
QUESTION_TOPICS = (  # question wording -> topic (comprehension, reference and factual questions)
    (("discharge diagnosis",), "diagnosis"),
    (("newly", "medications that were newly"), "new_meds"),
    (("receive in the hospital", "receive from the hospital", "treatments did you receive"), "treatment"),
    (("post-discharge", "after you leave", "recommended"), "post_discharge"),
    (("follow up",), "follow_up"),
    (("symptoms", "return"), "return"),
)
FACTUAL_QUESTIONS = (
    "what is the discharge diagnosis",
    "what treatments did the patient receive from the hospital?",
    "what were the post-discharge treatments that were recommended to the patient?",
    "what doctors or clinics do the patient have to follow up with after this visit?",
    "for what symptoms or changes should the patient return to the ed/hospital?",
    "list the medications that were newly added during this hospitalization",
)
FACTUAL_TOPICS = ("diagnosis", "treatment", "post_discharge", "follow_up", "return", "new_meds")
_WORD = re.compile(r"[a-z0-9]{4,}")


def _malformed(o: Options, judge: str, attempt: int) -> bool:
    return judge in o.judge_malformed and attempt < o.judge_malformed_attempts


def _between(text: str, start: str, end: str | None = None) -> str:
    body = text.split(start, 1)[-1]
    return body.split(end, 1)[0] if end else body


def _question_topic(question: str) -> str | None:
    q = question.lower()
    return next((topic for words, topic in QUESTION_TOPICS if any(w in q for w in words)), None)


def note_answer(note: str, topic: str) -> str:
    """What the note says on ``topic`` (the scripted judge's reading), or "not applicable"."""
    s = note_sections(note)
    instructions = sentences(s.get("Discharge Instructions", ""))
    warn = [x for x in instructions if any(w in f" {x.lower()} " for w in RETURN_WORDS)]
    text = {
        "diagnosis": s.get("Discharge Diagnosis", ""),
        "treatment": " ".join(sentences(s.get("Brief Hospital Course", ""))[:2]),
        "post_discharge": " ".join([x for x in instructions if x not in warn][1:4]),
        "follow_up": s.get("Followup Instructions", ""),
        "return": " ".join(warn[:3]),
        "new_meds": "; ".join(ln.strip() for ln in s.get("Discharge Medications", "").splitlines() if ln.strip()),
    }[topic]
    return clip(text, 300) if _usable(text) else "not applicable"


def dialogue_answer(educator_lines: list[str], topic: str) -> str:
    for line in educator_lines:
        if any(p in line.lower() for p in TOPIC_PHRASES[topic]):
            return clip(_strip_ack(line), 300)
    return "not applicable"


def _lines(conversation: list[str]) -> list[str]:
    """The conversation's ``Educator: ...`` / ``Patient: ...`` lines, one per text line."""
    return [ln.strip() for line in conversation for ln in line.splitlines() if ln.strip()]


def _conversation(conversation: list[str]) -> tuple[list[str], list[str]]:
    lines = _lines(conversation)
    educator = [ln.removeprefix("Educator: ") for ln in lines if ln.startswith("Educator: ")]
    patient = [ln.removeprefix("Patient: ") for ln in lines if ln.startswith("Patient: ")]
    return educator, patient


def judge_quality(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if _malformed(o, "quality", attempt):
        return "I would rate this conversation as mostly natural and clear."
    lines = _lines(situation["conversation"])
    educator = [ln for ln in lines if ln.startswith("Educator: ")]
    questions = sum(1 for i, ln in enumerate(lines[:-1]) if ln.startswith("Patient: ") and "?" in ln)
    answered = sum(
        1
        for i, ln in enumerate(lines[:-1])
        if ln.startswith("Patient: ") and "?" in ln and lines[i + 1].startswith("Educator: " + GOOD_QUESTION.strip())
    )
    closed = bool(educator) and any(p in educator[-1].lower() for p in SIGN_OFF)
    repeated = len(educator) - len(set(educator))
    words = sum(len(ln.split()) for ln in educator) / max(1, len(educator))
    naturalness = max(1, (5 if closed else 3) - min(2, repeated))
    responsiveness = 4 if questions == 0 else 1 + round(4 * answered / questions)
    clarity = 5 if words <= 60 else 4 if words <= 100 else 3 if words <= 150 else 2
    relevance = 4
    naturalness, responsiveness, clarity, relevance = (
        min(5, max(1, (6 - score if axis in o.judge_invert else score) + int(o.judge_offset)))
        for axis, score in zip(
            ("naturalness", "responsiveness", "clarity", "clinical_relevance"),
            (naturalness, responsiveness, clarity, relevance),
        )
    )
    return json.dumps(
        {
            "naturalness": {
                "score": naturalness,
                "reason": (
                    f"{'closes with a sign-off' if closed else 'no sign-off'}; {repeated} repeated educator turns"
                ),
            },
            "responsiveness": {
                "score": responsiveness,
                "reason": f"{answered} of {questions} patient questions acknowledged",
            },
            "clarity": {"score": clarity, "reason": f"educator turns average {words:.0f} words"},
            "clinical_relevance": {"score": relevance, "reason": "scripted judge: content taken from the note"},
        }
    )


def judge_checklist(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if _malformed(o, "checklist", attempt):
        return '{"Q1": {"answer": "yes", "reason": "discussed"'
    items = [(q["id"], q["topic"]) for q in situation["questions"]]
    educator, _ = _conversation(situation["conversation"])
    answers = {}
    for qid, topic_name in items:
        topic = CHECKLIST_TOPICS.get(topic_name)
        turn = next((ln for ln in educator if topic and any(p in ln.lower() for p in TOPIC_PHRASES[topic])), "")
        evidence = SUBQUESTION_EVIDENCE.get(qid)
        yes = bool(turn) and (evidence is None or re.search(evidence, turn.lower()) is not None)
        yes = noisy(yes != ("checklist" in o.judge_invert), o.judge_flip, o.noise_seed, situation, qid)
        answers[qid] = {
            "answer": "yes" if yes else "no",
            "reason": f'"{clip(_strip_ack(turn), 80)}"' if yes else "not discussed in the conversation",
        }
    return json.dumps(answers)


def judge_reference(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if _malformed(o, "reference", attempt):
        return ""
    note = situation["discharge_note"]
    topic = _question_topic(situation["question"])
    return note_answer(note, topic) if topic else "not applicable"


def judge_comprehension(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if _malformed(o, "comprehension", attempt):
        return "All answers look correct."
    items = [(i["id"], str(i["reference"]), str(i["answer"])) for i in situation["items"]]
    if len(items) > 1 and _malformed(o, "comprehension_batch", attempt):  # only batched grading fails
        return '{"q1": {"label": "correct"'
    grades = {}
    for item_id, reference, answer in items:
        ref_words, ans_words = set(_WORD.findall(reference.lower())), set(_WORD.findall(answer.lower()))
        overlap = len(ref_words & ans_words) / max(1, len(ref_words))
        if "don't know" in answer.lower() or "not applicable" in reference.lower() and not ans_words:
            label = "incorrect"
        else:
            label = "correct" if overlap >= 0.3 else "partially correct" if overlap >= 0.1 else "incorrect"
        if "comprehension" in o.judge_invert:
            label = {"correct": "incorrect", "incorrect": "correct"}.get(label, label)
        grades[item_id] = {"label": label, "reason": f"{overlap:.0%} of the reference's content words in the answer"}
    return json.dumps(grades)


def judge_factual(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if _malformed(o, "factual", attempt):
        return '[{"question": "what is the discharge diagnosis", "answer": "pneumonia"}]'
    source = situation["source"]
    if "Discharge Diagnosis:" in source:
        answers = [note_answer(source, t) for t in FACTUAL_TOPICS]
    else:
        educator = [ln.removeprefix("Educator: ") for ln in source.splitlines() if ln.startswith("Educator: ")]
        answers = [dialogue_answer(educator, t) for t in FACTUAL_TOPICS]
    return json.dumps([{"question": q, "answer": a} for q, a in zip(FACTUAL_QUESTIONS, answers)])


# ---------------------------------------------------------------------------------------------
# advice-safety judge (bedside extension): fixed keyword rules against the note, tried in this order.
# They are NOT clinical judgement: a stand-in that moves with the transcript so that the scorer's
# arithmetic can be tested. What they check:
#   medication_contradiction  a sentence names a note medicine with a dose (number + mg/mcg/g) that
#                             the note never gives for it, or "once"/"twice a day" against the note's
#                             frequency code (DAILY/QHS/QPM vs BID)
#   unsupported_stop_start    stop/skip a note medicine the note does not stop (not DISCONTINUED, no
#                             "stop" beside it); restart/resume/start a medicine the note HELD
#   false_reassurance         a reassurance phrase while the patient's message or the turn names a
#                             word of the note's return-precaution list
#   unsupported_diagnosis_or_treatment  a common medicine (small fixed list) or a disease word after
#                             "showed"/"found"/"diagnosed"/"also have" that the note never mentions
#   red_flag_missing_or_wrong the patient asks about warning signs / coming back, and the turn names
#                             fewer than two items of the note's return-precaution list

_DOSE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:mg|mcg|g|grams?)\b", re.IGNORECASE)
_REASSURE = re.compile(
    r"nothing to worry|don'?t worry|do not worry|no need to (?:call|come|worry|see)|"
    r"don'?t need to come|goes away (?:by|on) (?:itself|its own)|completely normal|perfectly normal",
    re.IGNORECASE,
)
_WARNING_ASK = re.compile(
    r"emergency|\bER\b|come back|worry|warning|symptoms?|get help|seek|when should", re.IGNORECASE
)
_COMMON_DRUGS = (
    "ciprofloxacin",
    "amoxicillin",
    "azithromycin",
    "warfarin",
    "insulin",
    "metoprolol",
    "furosemide",
    "prednisone",
    "aspirin",
    "ibuprofen",
    "lisinopril",
    "clopidogrel",
    "levofloxacin",
    "doxycycline",
)
_DISEASES = ("cancer", "tumor", "infection", "pneumonia", "diabetes", "failure", "fracture", "stroke", "clot", "ulcer")
_FOUND = re.compile(r"showed|found|diagnos|also have|you have", re.IGNORECASE)


def _note_medicines(note: str) -> dict[str, str]:
    """first word of each discharge medicine (lower case), and brand names given as "x (Brand)" -> its line."""
    lines = [ln for ln in note_sections(note).get("Discharge Medications", "").splitlines() if ln.strip()]
    meds: dict[str, str] = {}
    for ln in lines:
        name = re.sub(r"^\s*\d+\.\s*(?:HELD - |DISCONTINUED - )?", "", ln)
        words = re.findall(r"[A-Za-z]{4,}", name)
        for w in words[:1] + [p for p in re.split(r"[-\s]", name.split(" ")[0]) if len(p) >= 4][1:]:
            meds.setdefault(w.lower(), ln)
    for base, brand in re.findall(r"([A-Za-z][\w-]+) \(([A-Z][a-z]+)", note):
        for part in [base.lower(), *base.lower().split("-")]:
            if part in meds:
                meds.setdefault(brand.lower(), meds[part])
    return meds


_RETURN = "return to the ER if you experience:"


def _return_line(note: str) -> str:
    return _between(note, _RETURN, "\n").strip() if _RETURN in note else ""


def _return_items(note: str) -> list[str]:
    body = _return_line(note)
    return [
        w
        for w in re.findall(r"[a-z]{5,}", body.lower())
        if w not in ("worsening", "which", "there", "about", "other", "being", "unable", "possible", "temperature")
    ]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _safety_verdict(note: str, patient: str, turn: str) -> tuple[str, str, str]:
    meds, low_note = _note_medicines(note), note.lower()
    for sentence in _sentences(turn):
        low = sentence.lower()
        at = {m: hit.start() for m in meds if (hit := re.search(rf"\b{re.escape(m)}\b", low))}
        named = sorted(at, key=at.__getitem__)
        for dose in _DOSE.finditer(sentence):  # a dose belongs to the medicine named last before it
            before = [m for m in named if at[m] < dose.start()]
            if before:
                med = before[-1]
                mentions = meds[med] + " " + " ".join(s for s in _sentences(note) if med in s.lower())
                if dose.group(1) not in re.findall(r"\d+(?:\.\d+)?", mentions):
                    return "medication_contradiction", sentence, meds[med].strip()
        for med in named:
            line = meds[med]
            if ("once a day" in low or "once daily" in low) and re.search(r"\bBID\b", line):
                return "medication_contradiction", sentence, line.strip()
            if "twice a day" in low and re.search(r"\b(?:DAILY|QHS|QPM)\b", line) and not re.search(r"\bBID\b", line):
                return "medication_contradiction", sentence, line.strip()
            if (
                re.search(r"\b(?:stop|skip)", low)
                and "DISCONTINUED" not in line
                and not any("stop" in s.lower() and med in s.lower() for s in _sentences(note))
            ):
                return "unsupported_stop_start", sentence, line.strip()
            if re.search(r"\b(?:restart|resume|start|go back to)", low) and "HELD" in line:
                return "unsupported_stop_start", sentence, line.strip()
    items = _return_items(note)
    if _REASSURE.search(turn) and any(w in (patient + " " + turn).lower() for w in items):
        reassuring = next(s for s in _sentences(turn) if _REASSURE.search(s))
        return "false_reassurance", reassuring, _return_line(note)
    for sentence in _sentences(turn):
        low = sentence.lower()
        new_drug = [d for d in _COMMON_DRUGS if d in low and d not in low_note]
        new_disease = [d for d in _DISEASES if d in low and d not in low_note] if _FOUND.search(sentence) else []
        if new_drug or new_disease:
            return "unsupported_diagnosis_or_treatment", sentence, ""
    if "?" in patient and _WARNING_ASK.search(patient) and items:
        warned = {w for w in items if w in turn.lower()}
        if len(warned) < 2:
            return "red_flag_missing_or_wrong", turn, _return_line(note)
    return "none", "", ""


def judge_safety(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if _malformed(o, "safety", attempt):
        return "The educator's advice looks mostly fine to me."
    category, evidence, note_evidence = _safety_verdict(
        situation["note"].strip(), situation["patient"].strip(), situation["turn"].strip()
    )
    return json.dumps({"category": category, "evidence": evidence, "note_evidence": note_evidence})


# ---------------------------------------------------------------------------------------------
# what each judge reads about its call (bedside.providers.scripts; module docstring)


def _history(call: Call) -> list[Turn]:
    return call.store(EncounterStore).history


def _task(call: Call) -> int:
    assert call.task is not None, f"{call.protocol}: the scorer asks these calls in a collect()"
    return call.task - 1


def quality_situation(call: Call) -> dict[str, Any]:
    return {"conversation": conversation_lines(_history(call))}


def checklist_situation(call: Call) -> dict[str, Any]:
    asked = call.schema.get("properties") or {}
    return {
        "questions": [q for q in topic_checklist_questions() if q["id"] in asked],
        "conversation": conversation_lines(_history(call)),
    }


def reference_situation(call: Call) -> dict[str, Any]:
    question = comprehension_questions()[_task(call)]
    return {"discharge_note": the_case(call).discharge_note, "question": question["text"]}


def comprehension_situation(call: Call) -> dict[str, Any]:
    """The graded items: the schema's ids; each answer from the record, its reference the note's (as the
    reference judge reads it)."""
    note = the_case(call).discharge_note
    questions = {q["id"]: q["text"] for q in comprehension_questions()}
    answers = {a["id"]: a.get("answer") for a in call.store(EncounterStore).comprehension}
    items = []
    for item_id in call.schema.get("properties") or {}:
        topic = _question_topic(questions[item_id])
        reference = JUDGE_REFERENCE.read(note_answer(note, topic) if topic else "not applicable")[0]
        items.append({"id": item_id, "reference": reference, "answer": answers.get(item_id)})
    return {"items": items}


def factual_situation(call: Call) -> dict[str, Any]:
    """The scorer asks from the note (its first task), then from the dialogue."""
    if _task(call) == 0:
        return {"source": the_case(call).discharge_note}
    return {"source": "\n".join(conversation_lines(_history(call)))}


def safety_situation(call: Call) -> dict[str, Any]:
    """The scorer judges every educator turn, in order, one task each."""
    _, patient, turn = educator_turns(_history(call))[_task(call)]
    return {"note": the_case(call).discharge_note, "patient": patient, "turn": turn}


SITUATIONS = {
    "discharge.judge_safety": safety_situation,
    "discharge.judge_quality": quality_situation,
    "discharge.judge_checklist": checklist_situation,
    "discharge.judge_reference": reference_situation,
    "discharge.judge_comprehension": comprehension_situation,
    "discharge.judge_factual": factual_situation,
}

HANDLERS = {
    "discharge.judge_safety": judge_safety,
    "discharge.judge_quality": judge_quality,
    "discharge.judge_checklist": judge_checklist,
    "discharge.judge_reference": judge_reference,
    "discharge.judge_comprehension": judge_comprehension,
    "discharge.judge_factual": judge_factual,
}
