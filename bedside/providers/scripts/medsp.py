"""Scripted MedSP1000 roles for ``bedside/scripted`` (see :mod:`bedside.providers.scripted`).

Every reply is grounded in the packet text found in the prompt (between the ``=== NAME ===`` and
``=== END OF NAME ===`` lines of ``prompts/medsp/*.j2``) and is deterministic:

- examinee (and the MDT integrator): greets, asks history questions, orders the items of its
  packet's resource list (``## Available resources`` or any heading with resources/actions/orders)
  a few per turn, then explains and ends (``eos``) on its last planned turn;
- patient: answers from its script: the opening statement first, then the ``- topic: answer``
  facts whose words overlap the clinician's question most ("I'm not sure." when none does);
- environment: resolves each action declaratively against its materials' ``## Action results``
  (``- **key / synonym**: result (status: ...)``, ``[ends encounter]`` after the keys), calls a
  ``## Team available on request`` member when named, reports everything else as unsupported,
  and fires ``## Timed events`` (``- **T+k**`` or ``- **T+k unless <action>**``) when due;
- MDT specialist: prose advice naming the packet resources not ordered yet;
- evaluator: marks each rubric item met when at least half of its content words occur in what
  the examinee said or did in the trajectory (keyword overlap), with the matched words as the
  justification.

``Options`` switch on faults and behaviours for tests (all prefixed ``medsp_``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageUser

from bedside.protocols import last_user_text, system_text


@dataclass
class Options:
    """Behaviour switches for tests (all off by default)."""

    # examinee (turn numbers count the examinee's own turns, 1-based)
    medsp_examinee_plan: int = 4  # planned turns; the last one ends the encounter (eos)
    medsp_examinee_never_end: bool = False  # keep asking, never set eos (reaches the turn cap)
    medsp_examinee_extra_action: str = ""  # added to the first turn (e.g. an out-of-scope action)
    medsp_examinee_prose_turns: list[int] = field(default_factory=list)  # reply in prose at these turns
    medsp_examinee_malformed_attempts: int = 0  # first k attempts of every turn are truncated JSON
    medsp_examinee_deviant_seeds: list[int] = field(default_factory=list)  # samples with these seeds deviate
    # environment
    medsp_env_malformed_attempts: int = 0  # first k attempts of every call are prose (no JSON)
    medsp_env_end_turn: int = 0  # should_end once this many examinee turns are resolved (0 = never forced)
    # evaluator
    medsp_evaluator_malformed_attempts: int = 0  # first k attempts are prose (no JSON)
    medsp_evaluator_missing_item_attempts: int = 0  # first k attempts omit the last rubric item

    def __post_init__(self) -> None:  # "-M medsp_examinee_deviant_seeds=3,6" arrives as a string or int
        if not isinstance(self.medsp_examinee_deviant_seeds, list):
            self.medsp_examinee_deviant_seeds = [int(v) for v in str(self.medsp_examinee_deviant_seeds).split(",") if v.strip()]
        for name in ("medsp_examinee_plan", "medsp_examinee_malformed_attempts", "medsp_env_malformed_attempts",
                     "medsp_env_end_turn", "medsp_evaluator_malformed_attempts", "medsp_evaluator_missing_item_attempts"):
            setattr(self, name, int(getattr(self, name)))
        self.medsp_examinee_never_end = str(self.medsp_examinee_never_end).lower() in ("1", "true", "yes")


# ---------------------------------------------------------------------------------------------
# reading packets out of prompts

STOPWORDS = frozenset(
    """a about after again all also am an and any anything are as at be been before being but by can
    could did do does doing for from had has have having he her here hers him his how i if in into is it
    its just me more most my no nor not now of off on once only or other our out over own please same she
    so some such tell than that the their them then there these they this those through to today too
    under until up very was we were what when where which while who why will with would you your yours
    yourself going like okay thank thanks hello hi dr doctor clinician patient""".split()
)


def between(text: str, name: str) -> str:
    m = re.search(rf"^=== {re.escape(name)} ===\n(.*?)\n=== END OF {re.escape(name)} ===$", text, re.S | re.M)
    return m.group(1) if m else ""


def sections(packet: str) -> dict[str, str]:
    """``## heading`` (lower-cased) → body."""
    out: dict[str, str] = {}
    parts = re.split(r"^##\s+(.+?)\s*$", packet, flags=re.M)
    for i in range(1, len(parts) - 1, 2):
        out.setdefault(parts[i].strip().lower(), parts[i + 1].strip())
    return out


def section(packet: str, *words: str) -> str:
    """The body of the first heading containing ``words[0]``, else ``words[1]``, ..."""
    found = sections(packet)
    for w in words:
        for head, body in found.items():
            if w in head:
                return body
    return ""


def bullets(body: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^\s*[-*]\s+(.+)$", body, re.M)]


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z][a-z0-9'-]*", text.lower()) if w not in STOPWORDS and len(w) > 2]


def stem(word: str) -> str:
    return word[:5]


def stems(text: str) -> set[str]:
    return {stem(w) for w in words(text)}


def assistant_texts(messages: list[ChatMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ChatMessageAssistant)]


def user_texts(messages: list[ChatMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ChatMessageUser)]


# ---------------------------------------------------------------------------------------------
# examinee (and MDT integrator)

QUESTIONS = (
    "Do you have any allergies, and which medications do you take?",
    "What is your past medical history, and has anything like this happened before?",
    "What worries you most about this, and what do you understand about what is going on?",
    "Is there anything else you would like to tell me?",
)


def resources(packet: str) -> list[str]:
    body = section(packet, "resource", "available", "equipment", "orders", "actions")
    return bullets(body)


def plan(packet: str, turns: int) -> list[tuple[str, list[str], bool]]:
    """The scripted examinee's turns: (speech, actions, eos)."""
    items = resources(packet)
    turns = max(1, turns)
    ordering_turns = max(1, turns - 1)
    per = math.ceil(len(items) / ordering_turns) if items else 0
    chunks = [items[i * per : (i + 1) * per] for i in range(ordering_turns)] if per else [[] for _ in range(ordering_turns)]
    out: list[tuple[str, list[str], bool]] = [
        (
            "Hello, I'm Dr. Rivera, the clinician looking after you today. Can you tell me what has been "
            "happening and when it started?",
            chunks[0],
            turns == 1,
        )
    ]
    for k in range(1, ordering_turns):
        out.append((QUESTIONS[(k - 1) % len(QUESTIONS)], chunks[k], False))
    if turns > 1:
        out.append(
            (
                "Thank you. Let me explain what I think is going on and what we are doing about it; "
                "I will keep you updated as results come in. Do you have any questions?",
                [],
                True,
            )
        )
    return out


def examinee(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    packet = between(system_text(messages), "SCENARIO PACKET")
    k = len(assistant_texts(messages)) + 1
    if attempt < o.medsp_examinee_malformed_attempts:
        return '{"speak": "Hello, I'
    steps = plan(packet, o.medsp_examinee_plan)
    if k <= len(steps):
        speak, actions, eos = steps[k - 1]
    else:
        speak, actions, eos = QUESTIONS[-1], [], True
    if o.medsp_examinee_never_end:
        eos = False
    if k == 1 and o.medsp_examinee_extra_action:
        actions = [*actions, o.medsp_examinee_extra_action]
    if attempt in o.medsp_examinee_deviant_seeds:
        speak, actions, eos = "Let's just wait a little and see how things go.", ["Wait and observe"], False
    if k in o.medsp_examinee_prose_turns:
        return speak
    return json.dumps({"speak": speak, "actions": actions, "eos": eos}, ensure_ascii=False)


def specialist(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    system = system_text(messages)
    packet = between(system, "SCENARIO PACKET")
    specialty = re.search(r"Your specialty is (.+?); your focus", system)
    done = set()
    for text in assistant_texts(messages):
        try:
            done |= {a for a in json.loads(text).get("actions", [])}
        except (json.JSONDecodeError, AttributeError):
            continue
    pending = [r for r in resources(packet) if r not in done][:2]
    name = specialty.group(1) if specialty else "specialist"
    if not pending:
        return f"- {name}: the planned work-up is done; explain the plan to the patient and close the encounter."
    return f"- {name}: next, " + "; then ".join(pending) + "."


# ---------------------------------------------------------------------------------------------
# patient

FACT_LINE = re.compile(r"^([^:]{2,60}):\s*(.+)$")


def facts(script: str) -> list[tuple[str, str]]:
    out = []
    for line in bullets(script):
        m = FACT_LINE.match(line)
        if m:
            out.append((m.group(1).strip(), m.group(2).strip()))
    return out


def opening_statement(script: str) -> str:
    body = section(script, "opening")
    return body.strip().strip('"').strip() if body else "Hello."


def patient(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    script = between(system_text(messages), "SP SCRIPT")
    heard = last_user_text(messages)
    speech = " ".join(m.group(1) for m in re.finditer(r"^\[Clinician\] (.*)$", heard, re.M))
    n = len(assistant_texts(messages)) + 1
    asked = stems(speech)
    scored = []
    for i, (topic, answer) in enumerate(facts(script)):
        score = 2 * len(asked & stems(topic)) + len(asked & stems(answer))
        if score:
            scored.append((-score, i, answer))
    best = [a for _, _, a in sorted(scored)[:2]]
    if n == 1:
        utterance = " ".join([opening_statement(script), *best[:1]])
    elif best:
        utterance = " ".join(best)
    else:
        utterance = "I'm not sure."
    return json.dumps({"utterance": utterance}, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# environment controller

RESULT_LINE = re.compile(r"^\*\*(?P<keys>.+?)\*\*\s*(?P<ends>\[ends encounter\])?\s*:\s*(?P<text>.+)$", re.I)
TIMED_LINE = re.compile(r"^\*\*T\+(?P<k>\d+)(?:\s+unless\s+(?P<unless>.+?))?\*\*\s*:\s*(?P<text>.+)$", re.I)
STATUS = re.compile(r"\s*\(status:\s*(?P<status>.+?)\)\s*$", re.I)


@dataclass
class Outcome:
    keys: list[str]
    text: str
    status: str | None
    ends: bool


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
            out.append(Outcome(keys=keys, text=text, status=status, ends=bool(m.group("ends"))))
    return out


def timed_events(materials: str) -> list[tuple[int, str | None, str, str | None]]:
    out = []
    for line in bullets(section(materials, "timed event")):
        m = TIMED_LINE.match(line)
        if m:
            text, status = _split_status(m.group("text"))
            out.append((int(m.group("k")), (m.group("unless") or "").strip().lower() or None, text, status))
    return out


def mentions(text: str, phrase: str) -> bool:
    return re.search(r"\b" + re.escape(phrase.lower()), text.lower()) is not None


def examinee_blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(turn, speech, actions) of every ``[Examinee turn k]`` block in a message."""
    out = []
    pattern = r"^\[Examinee turn (\d+)\]\nSays: ((?:.|\n)*?)\n(Actions: \(none\)|Actions:\n((?:- .*\n?)*))"
    for m in re.finditer(pattern, text, re.M):
        actions = [a[2:].strip() for a in (m.group(4) or "").splitlines() if a.startswith("- ")]
        out.append((int(m.group(1)), m.group(2), actions))
    return out


def environment(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if attempt < o.medsp_env_malformed_attempts:
        return "The nurse nods and waits."
    materials = between(system_text(messages), "ENVIRONMENT MATERIALS")
    previous: list[dict[str, Any]] = []
    for text in assistant_texts(messages):
        try:
            previous.append(json.loads(text))
        except json.JSONDecodeError:
            continue
    blocks = [b for text in user_texts(messages) for b in examinee_blocks(text)]
    on_request = bullets(section(materials, "available on request"))
    if not blocks:  # opening scene
        return json.dumps(
            {
                "feedback": section(materials, "opening scene") or "The scene is set.",
                "events": [],
                "patient_status": section(materials, "initial patient status", "initial status"),
                "actors_present": bullets(section(materials, "present at start")),
                "unsupported": [],
                "should_end": False,
            },
            ensure_ascii=False,
        )
    k, speech, actions = blocks[-1]
    outcomes = action_results(materials)
    actors = list(previous[-1].get("actors_present", [])) if previous else []
    status = previous[-1].get("patient_status", "") if previous else ""
    feedback: list[str] = []
    unsupported: list[dict[str, str]] = []
    ends = False
    for action in actions:
        outcome = next((oc for oc in outcomes if any(mentions(action, key) for key in oc.keys)), None)
        role = next((r for r in on_request if mentions(action, r.split("(")[0].strip())), None)
        if outcome is not None:
            feedback.append(outcome.text)
            status = outcome.status or status
            ends = ends or outcome.ends
        elif role is None:
            unsupported.append({"action": action, "rationale": "This action is not available in this simulation."})
        if role is not None and role not in actors:
            actors.append(role)
            feedback.append(f"{role} joins the team at the bedside.")
    for role in on_request:  # named in speech ("Nurse, ..." / "can we call the pharmacist")
        if role not in actors and mentions(speech, role.split("(")[0].strip()):
            actors.append(role)
            feedback.append(f"{role} joins the team at the bedside.")
    all_actions = [a for _, _, acts in blocks for a in acts]
    reported = {e for p in previous for e in p.get("events", [])}
    events: list[str] = []
    for due, unless, text, new_status in timed_events(materials):
        if due > k or text in reported:
            continue
        if unless and any(mentions(a, unless) for a in all_actions):
            continue
        events.append(text)
        status = new_status or status
    should_end = ends or bool(o.medsp_env_end_turn and k >= o.medsp_env_end_turn)
    return json.dumps(
        {
            "feedback": " ".join(feedback) or "No new findings.",
            "events": events,
            "patient_status": status,
            "actors_present": actors,
            "unsupported": unsupported,
            "should_end": should_end,
        },
        ensure_ascii=False,
    )


# ---------------------------------------------------------------------------------------------
# evaluator

ITEM_LINE = re.compile(r"^- \[([A-Z]+\.\d+)\] (.+)$", re.M)


def examinee_contributions(trajectory: str) -> str:
    """Everything the examinee said or did, from the evaluator's trajectory text."""
    out = []
    for block in re.split(r"\n\s*\n", trajectory):
        if re.match(r"^\[T\d+ · examinee\]", block):
            out.append(block.split("\n", 1)[1] if "\n" in block else "")
    return "\n".join(out)


def evaluator(messages: list[ChatMessage], attempt: int, o: Options) -> str:
    if attempt < o.medsp_evaluator_malformed_attempts:
        return "Overall the examinee did well; most items are met."
    request = last_user_text(messages)
    items = ITEM_LINE.findall(request)
    did = stems(examinee_contributions(between(request, "TRAJECTORY")))
    judged = []
    for item_id, text in items:
        need = stems(text)
        hit = sorted(need & did)
        met = bool(need) and len(hit) * 2 >= len(need)
        why = f"examinee's speech or actions match: {', '.join(hit)}" if met else "no matching examinee statement or action"
        judged.append({"id": item_id, "met": met, "justification": why})
    if attempt < o.medsp_evaluator_missing_item_attempts and judged:
        judged = judged[:-1]
    return json.dumps({"items": judged}, ensure_ascii=False)


HANDLERS = {
    "medsp.examinee": examinee,
    "medsp.panel_integrator": examinee,
    "medsp.panel_specialist": specialist,
    "medsp.patient": patient,
    "medsp.environment": environment,
    "medsp.evaluator": evaluator,
}
