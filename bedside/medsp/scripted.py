"""Scripted MedSP1000 roles for ``bedside/scripted`` (see :mod:`bedside.providers.scripted`), keyed by protocol.

Every reply is grounded in what the role reads about its call from the sample (``SITUATIONS``), never in
the prompt text: the packet texts of the scenario (sample metadata; the examinee's scenario packet, the SP
script, the environment materials; the same under the bedside and the official prompts), the clinician's
words and actions (the encounter's turns so far), the panel's specialties (``MedSPStore``) and which
specialist a call of the panel's ``collect()`` is, the candidates and votes of this turn (their replies in
the transcript), the rubric items (the evaluator's reply schema, or the scenario's rubric) and the
encounter's transcript (``MedSPStore``); and in the role's own earlier replies (its chat). Replies are
deterministic. The demo set's conventions are described in ``datasets/medsp/demo/README.md``.

- examinee (and the panel's integrator): greets, asks history questions, orders the items of its packet's
  resource list (``## Available resources``) a few per turn, then explains and says ``eos`` on its last
  planned turn; in every later state it repeats the vital signs and says ``eos`` again. The integrator also
  adds the actions the panel's revision advice names (``Also: <action>``);
- SP: answers from its script: the opening statement first, then the ``- topic: answer`` facts whose words
  overlap the clinician's words most ("I'm not sure." when none does), as a list of utterances; a person of
  ``## Patient-side people present`` marked ``(answers for the patient)`` speaks, prefixed with the role;
- environment (:mod:`bedside.medsp.scripted_environment`): resolves each action declaratively
  against its materials' ``## Action results`` (``- **key / synonym**: result (status: ...)``;
  ``[ends encounter]`` or ``[pending]`` after the keys) with a status per action (executed / pending /
  unsupported), calls a ``## Team available on request`` member when named, fires ``## Timed events``
  (``- **T+k**`` or ``- **T+k unless <action>**``) when due, and on ``eos`` moves to the next of its
  ``## Scenario states`` (``- **label**: what is observed (status: ...)``) or, when none is left, sets
  ``should_end``;
- panel: specialties as one line; a specialist's prose recommendation; votes that agree (unless told
  otherwise); the best-of-N selector picks the first candidate of the largest group of identical turns;
- evaluator (:mod:`bedside.medsp.scripted_environment`): marks each rubric item met when at
  least half of its content words occur in what the examinee said or did (keyword overlap), with the
  matched words as evidence; answers in the bedside format (items by id) or, under the official prompts
  (a reply schema without ``items``), in the official format (items by text per competency; the whole
  rubric, as the official evaluator is asked: ``-T judge_batch_size`` with the official prompts is not
  scripted).

``Options`` switch on faults and behaviours for tests (all prefixed ``medsp_``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant

from bedside.medsp.records import MedSPStore, Scenario
from bedside.providers.scripts import Call
from bedside.providers.simulator_plants import PlantOptions, avoid_text, checker_situation, plant, scripted_checker


@dataclass
class Options(PlantOptions):
    """Behaviour switches for tests (all off by default)."""

    # examinee (turn numbers count the examinee's own turns, 1-based)
    medsp_examinee_plan: int = 4  # planned turns of the first state; the last one says eos
    medsp_examinee_never_end: bool = False  # never say eos (reaches the turn cap)
    medsp_examinee_extra_action: str = ""  # added to the first turn (e.g. an out-of-scope action)
    medsp_examinee_prose_turns: list[int] = field(default_factory=list)  # first try of these turns in prose
    medsp_examinee_malformed_attempts: int = 0  # first k attempts of every turn are truncated JSON
    medsp_examinee_deviant_seeds: list[int] = field(default_factory=list)  # samples with these seeds deviate
    # best-of-N selector and panel
    medsp_selector_choice: int = -1  # >= 0: always choose this index (out of range tests the fallback)
    medsp_selector_malformed_attempts: int = 0
    medsp_panel_domains: list[str] = field(default_factory=list)  # the specialties named (default list if empty)
    medsp_panel_disagree: str = ""  # this specialty disagrees with every proposal, advising an extra action
    medsp_panel_advice_action: str = "Repeat vital signs"
    # SP
    medsp_patient_stray_speaker: bool = False  # add a line by a patient-side role that is not present
    # environment
    medsp_env_malformed_attempts: int = 0  # first k attempts of every call are prose (no JSON)
    medsp_env_end_turn: int = 0  # should_end once this many examinee turns are resolved (0 = never forced)
    medsp_env_advance_turn: int = 0  # move to the next state at this turn even without eos (0 = never)
    medsp_env_unnamed_assessments: bool = False  # assessments without "raw" (mapped by order)
    medsp_env_drop_last_assessment: bool = False  # no assessment for the turn's last action
    # evaluator
    medsp_evaluator_malformed_attempts: int = 0  # first k attempts are prose (no JSON)
    medsp_evaluator_missing_item_attempts: int = 0  # first k attempts omit the last rubric item
    # a noisy evaluator: each rubric item's verdict flipped with probability judge_flip, drawn per sample,
    # epoch and item from noise_seed (bedside.providers.scripts.noisy; the other benchmarks' judges take them too)
    judge_flip: float = 0.0
    noise_seed: int = 0

    def __post_init__(self) -> None:  # "-M medsp_examinee_deviant_seeds=3,6" arrives as a string or int
        for name in ("medsp_examinee_deviant_seeds", "medsp_examinee_prose_turns"):
            value = getattr(self, name)
            if not isinstance(value, list):
                setattr(self, name, [int(v) for v in str(value).split(",") if v.strip()])
        if not isinstance(self.medsp_panel_domains, list):
            self.medsp_panel_domains = [v.strip() for v in str(self.medsp_panel_domains).split(",") if v.strip()]
        self.medsp_panel_domains = [str(v) for v in self.medsp_panel_domains]
        for name in (
            "medsp_examinee_plan",
            "medsp_examinee_malformed_attempts",
            "medsp_selector_choice",
            "medsp_selector_malformed_attempts",
            "medsp_env_malformed_attempts",
            "medsp_env_end_turn",
            "medsp_env_advance_turn",
            "medsp_evaluator_malformed_attempts",
            "medsp_evaluator_missing_item_attempts",
        ):
            setattr(self, name, int(getattr(self, name)))
        for name in (
            "medsp_examinee_never_end",
            "medsp_patient_stray_speaker",
            "medsp_env_unnamed_assessments",
            "medsp_env_drop_last_assessment",
        ):
            setattr(self, name, str(getattr(self, name)).lower() in ("1", "true", "yes"))


# ---------------------------------------------------------------------------------------------
# reading packets (the scenario's packet texts)

STOPWORDS = frozenset(
    """a about after again all also am an and any anything are as at be been before being but by can
    could did do does doing for from had has have having he her here hers him his how i if in into is it
    its just me more most my no nor not now of off on once only or other our out over own please same she
    so some such tell than that the their them then there these they this those through to today too
    under until up very was we were what when where which while who why will with would you your yours
    yourself going like okay thank thanks hello hi dr doctor clinician patient""".split()
)


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


def own_replies(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out = []
    for text in assistant_texts(messages):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def said_to_patient(speech: Any) -> str:
    """The clinician's words this turn (the situation's ``speech``), up to the first blank line."""
    return str(speech or "").split("\n\n", 1)[0].strip()


# ---------------------------------------------------------------------------------------------
# examinee (and panel integrator)

QUESTIONS = (
    "Do you have any allergies, and which medications do you take?",
    "What is your past medical history, and has anything like this happened before?",
    "What worries you most about this, and what do you understand about what is going on?",
    "Is there anything else you would like to tell me?",
)
REASSESS = ("Let me check how you are doing now and go over what happens next.", ["Repeat vital signs"])


def resources(packet: str) -> list[str]:
    body = section(packet, "resource", "available", "equipment", "orders", "actions")
    return bullets(body)


def plan(packet: str, turns: int) -> list[tuple[str, list[str], bool]]:
    """The scripted examinee's turns in the first state: (speech, actions, eos)."""
    items = resources(packet)
    turns = max(1, turns)
    ordering_turns = max(1, turns - 1)
    per = math.ceil(len(items) / ordering_turns) if items else 0
    chunks = (
        [items[i * per : (i + 1) * per] for i in range(ordering_turns)] if per else [[] for _ in range(ordering_turns)]
    )
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


def examinee_turn(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> dict[str, Any]:
    packet = situation["packet"]
    previous = own_replies(messages)
    k = len(assistant_texts(messages)) + 1
    if any(p.get("eos") is True for p in previous):  # a later state: reassess and close it
        speak, actions, eos = REASSESS[0], list(REASSESS[1]), True
    else:
        steps = plan(packet, o.medsp_examinee_plan)
        speak, actions, eos = steps[k - 1] if k <= len(steps) else (QUESTIONS[-1], [], True)
    if o.medsp_examinee_never_end:
        eos = False
    if k == 1 and o.medsp_examinee_extra_action:
        actions = [*actions, o.medsp_examinee_extra_action]
    if attempt in o.medsp_examinee_deviant_seeds:
        speak, actions, eos = "Let's just wait a little and see how things go.", ["Wait and observe"], False
    return {"speak": speak, "actions": list(actions), "eos": eos, "k": k}


def examinee(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if attempt < o.medsp_examinee_malformed_attempts:
        return '{"speak": "Hello, I'
    turn = examinee_turn(messages, situation, attempt, o)
    if turn["k"] in o.medsp_examinee_prose_turns and attempt == 0:
        return turn["speak"]
    return json.dumps({f: turn[f] for f in ("speak", "actions", "eos")}, ensure_ascii=False)


def integrator(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    turn = examinee_turn(messages, situation, attempt, o)
    advice = situation.get("advice") or {}
    advised = [a for text in advice.values() for a in re.findall(r"Also: (.+?)\s*$", str(text), re.M)]
    actions = turn["actions"] + [a for a in advised if a not in turn["actions"]]
    return json.dumps({"speak": turn["speak"], "actions": actions, "eos": turn["eos"]}, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# test-time scaling

DOMAINS = (
    "Emergency Medicine",
    "Critical Care",
    "Internal Medicine",
    "Clinical Pharmacology",
    "Nursing",
    "Pediatrics",
    "Surgery",
)


def selector(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    if attempt < o.medsp_selector_malformed_attempts:
        return "Candidate two looks best to me."
    found = situation["candidates"]
    keys = [(json.dumps(c.get("actions") or [], ensure_ascii=False), bool(c.get("eos"))) for c in found]
    if o.medsp_selector_choice >= 0:
        choice = o.medsp_selector_choice
    else:
        best = max((keys.count(k) for k in keys), default=0)
        choice = next((int(found[i]["index"]) for i, k in enumerate(keys) if keys.count(k) == best), 0)
    return json.dumps({"choice": choice, "rationale": "It matches the plan most candidates agree on."})


def domains(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    """Every specialty of :data:`DOMAINS` (the reader keeps the panel's first ``panel_size``)."""
    names = o.medsp_panel_domains or list(DOMAINS)
    return "Specialties: " + " | ".join(names)


def specialist(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    name = str(situation.get("domain") or "the specialty").strip()
    items = resources(situation["packet"])
    step = items[0].lower() if items else "a focused reassessment"
    return f"From the {name} perspective, the key next step is {step}, explained to the patient in plain words."


def vote(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    name = str(situation.get("domain") or "").strip()
    if o.medsp_panel_disagree and name.lower() == o.medsp_panel_disagree.lower():
        return json.dumps({"agree": False, "advice": f"Also: {o.medsp_panel_advice_action}"})
    return json.dumps({"agree": True, "advice": ""})


# ---------------------------------------------------------------------------------------------
# SP

FACT_LINE = re.compile(r"^([^:]{2,60}):\s*(.+)$")
PROXY = "(answers for the patient)"


def facts(script: str) -> list[tuple[str, str]]:
    out = []
    for line in bullets(section(script, "facts") or script):
        m = FACT_LINE.match(line)
        if m:
            out.append((m.group(1).strip(), m.group(2).strip()))
    return out


def opening_statement(script: str) -> str:
    body = section(script, "opening")
    return body.strip().strip('"').strip() if body else "Hello."


def patient_side(script: str) -> tuple[dict[str, str], str | None]:
    """(actors present, the role answering for the patient or None) from ``## Patient-side people present``."""
    present = {"Patient": "The patient is present from the start."}
    proxy = None
    for line in bullets(section(script, "patient-side")):
        m = FACT_LINE.match(line)
        if not m:
            continue
        role, evidence = m.group(1).strip(), m.group(2).strip()
        if PROXY in evidence:
            proxy = role
            evidence = evidence.replace(PROXY, "").strip()
        present[role] = evidence
    return present, proxy


def patient(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, o: Options) -> str:
    script = situation["script"]
    speech = said_to_patient(situation["speech"])
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
    present, proxy = patient_side(script)
    speak = [f"{proxy}: {utterance}"] if proxy else [utterance]
    if o.medsp_patient_stray_speaker:
        speak.append("Neighbour: I just came to see if everyone is all right.")
    if situation.get("plant_key") is not None and (extra := plant(o, situation["plant_key"], n, situation["avoid"])):
        speak.append(extra)
    return json.dumps({"speak": speak, "actors_present": present}, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# what each role reads about its call (bedside.providers.scripts; module docstring)


def scenario(call: Call) -> Scenario:
    return Scenario.model_validate(call.metadata["scenario_record"])


def _domain(call: Call) -> str:
    """The panel's specialist this call is: the panel asks each in a task of its own, in its order."""
    assert call.task is not None, f"{call.protocol}: the panel asks its specialists in a collect()"
    return call.store(MedSPStore).panel_domains[call.task - 1]


def examinee_situation(call: Call) -> dict[str, Any]:
    return {"packet": scenario(call).examinee.text()}


def integrator_situation(call: Call) -> dict[str, Any]:
    """The advice of the panel's last round of votes this turn (the votes after the latest synthesis)."""
    votes: dict[int, Any] = {}
    for earlier in call.replies("medsp.panel_vote", "medsp.panel_integrator", this_span=True):
        if earlier.protocol == "medsp.panel_integrator":
            votes = {}
        elif earlier.task is not None:
            votes[earlier.task] = earlier.read()
    names = call.store(MedSPStore).panel_domains
    advice = {
        names[task - 1]: vote.data["advice"]
        for task, vote in sorted(votes.items())
        if vote is not None and not vote.data["agree"] and vote.data["advice"]
    }
    return {"packet": scenario(call).examinee.text(), "advice": advice}


def selector_situation(call: Call) -> dict[str, Any]:
    """The candidates of this turn: the last reply of each candidate's task, those that are readable,
    numbered in the order of their tasks."""
    last: dict[int, Any] = {}
    for earlier in call.replies("medsp.examinee", this_span=True):
        if earlier.task is not None:
            last[earlier.task] = earlier.read()
    readable = [reply for _, reply in sorted(last.items()) if reply is not None]
    fields = ("speak", "actions", "eos")
    return {"candidates": [{"index": k, **{f: r.data[f] for f in fields}} for k, r in enumerate(readable)]}


def specialist_situation(call: Call) -> dict[str, Any]:
    return {"domain": _domain(call), "packet": scenario(call).examinee.text()}


def vote_situation(call: Call) -> dict[str, Any]:
    return {"domain": _domain(call)}


def patient_situation(call: Call) -> dict[str, Any]:
    """The SP's script and the clinician's words of this turn (the examinee's turn just accepted)."""
    return {
        "script": scenario(call).sp_actor.text(),
        "speech": call.turns[-1].data["speak"],
        "plant_key": scenario(call).key,
        "avoid": avoid_text(call.metadata, [t.message for t in call.turns]),
    }


SITUATIONS = {
    "medsp.examinee": examinee_situation,
    "medsp.panel_integrator": integrator_situation,
    "medsp.panel_specialist": specialist_situation,
    "medsp.panel_vote": vote_situation,
    "medsp.bon_selector": selector_situation,
    "medsp.patient": patient_situation,
    "medsp.simulator_checker": checker_situation,
}


HANDLERS = {
    "medsp.simulator_checker": scripted_checker,
    "medsp.examinee": examinee,
    "medsp.panel_integrator": integrator,
    "medsp.panel_specialist": specialist,
    "medsp.panel_domains": domains,
    "medsp.panel_vote": vote,
    "medsp.bon_selector": selector,
    "medsp.patient": patient,
}
