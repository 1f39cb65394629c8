"""Checks of the simulated patient over its transcript: how often the patient side (a virtual patient, a
standardized patient, a continuation patient) broke its own script.

A benchmark describes what its patient was given and said as a :class:`PatientTranscript` (its module
``bedside/<benchmark>/simulator.py``, named by its parts' ``simulator``); the ``simulator_check``
scorer (:mod:`bedside.scorers.simulator`) runs :func:`rule_findings` on it, and the LLM checker
(:mod:`bedside.simulator_checker`) when its role is bound. Each finding is one patient turn and one of
:data:`KINDS`:

- ``unsupported_fact``: the turn states a number or a drug name that is neither in the patient's
  materials (its script) nor said earlier in the conversation (by anyone: a patient repeating the
  clinician is not an error, nor is a patient repeating itself, whose first mention is the finding).
  Numbers are digit strings (``40``, ``1,000``, ``0.5``; a number word of the grounding, ``two`` or
  ``twice``, counts as its digits); drug names are found by ``drug-named-entity-recognition`` (DrugBank,
  MeSH and brand names resolved to one name: ``Lasix`` and ``furosemide`` are one drug), less the
  everyday substances of :data:`NOT_DRUGS`;
- ``persona_break``: an AI or role-play self-disclosure (:data:`DISCLOSURE`); words above the persona's
  reading level (Flesch-Kincaid grade of all the patient's words, at least :data:`MIN_WORDS`, above the
  transcript's ``reading_ceiling``); speech in another writing system than the persona's; a poor-recall
  persona reciting :data:`RECALL_LIMIT` or more facts of the history it should have forgotten;
- ``role_reversal``: the patient teaches, prescribes or diagnoses instead of the clinician
  (:data:`REVERSAL` phrases), or writes the clinician's lines;
- ``early_end``: the patient stalls (:data:`STALL_RUN` identical turns in a row of :data:`STALL_WORDS` words or
  more, or an empty turn where the benchmark allows none) or ends the encounter early (the benchmark's own
  rule, ``early_end``).

The rules decide only what they can decide; they miss paraphrases (a role reversal in words of its own, a
fact without digits or a drug name) that the LLM checker is there for. Their recall and false alarms on
scripted patients with planted errors are measured by the tests (docs/reports.md, "The simulator's own
error rate").
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

#: the kinds of simulator error, in the order the score shows them
KINDS = ("unsupported_fact", "persona_break", "role_reversal", "early_end")

#: the fewest words of the patient's a reading-level check reads (Flesch-Kincaid is noise below it)
MIN_WORDS = 50
#: facts of the history a poor-recall persona may recite before it breaks its persona
RECALL_LIMIT = 2
#: identical patient turns in a row that make a stall, and the fewest words such a turn has (a shorter one,
#: "okay", "yes", is a backchannel real patients repeat)
STALL_RUN = 3
STALL_WORDS = 3

#: substances the drug dictionary knows that patients name as food, drink or air, never as a prescription
NOT_DRUGS = frozenset(
    {"water", "oxygen", "salt", "sugar", "alcohol", "benzyl alcohol", "ethanol", "caffeine", "coffee", "nicotine"}
    | {"sodium", "sodium chloride", "glucose", "sucrose", "air", "tea", "milk", "honey", "iron", "calcium"}
)
#: numbers anyone knows without a script (an emergency number)
COMMON_NUMBERS = frozenset({"911", "999", "112", "24/7"})

NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "once": 1,
    "two": 2,
    "twice": 2,
    "three": 3,
    "thrice": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "hundred": 100,
    "thousand": 1000,
    "half": 0.5,
}

_NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?")
_WORD = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*")

#: an AI or role-play self-disclosure in a patient's words
DISCLOSURE = re.compile(
    r"\bas an ai\b|\blanguage model\b|\bi['’]?m an (ai|assistant)\b|\bi am an (ai|assistant)\b|\bai assistant\b"
    r"|\brole[- ]?play(ing)?\b|\b(my|the) script\b|\bsimulated patient\b|\bstandardi[sz]ed patient\b"
    r"|\bmy (materials|instructions|prompt)\b",
    re.IGNORECASE,
)
#: a patient who teaches, prescribes or diagnoses (the clinician's part)
REVERSAL = re.compile(
    r"\b(as|i['’]?m|i am) your (doctor|nurse|physician|clinician|educator|provider|pharmacist)\b"
    r"|\bi(['’]d| would)? (recommend|prescribe|advise) (that )?you\b|\bi['’]?ll prescribe\b|\bi will prescribe\b"
    r"|\bmy (recommendation|advice|diagnosis) (for you )?(is|would be)\b"
    r"|\byour diagnosis is\b|\byou (most likely|probably) have\b"
    r"|\byou (should|need to|must|have to) (take|start|stop|continue|avoid|reduce|increase|limit|keep taking)\b"
    r"|\blet me explain (your|the|how|what|why)\b"
    r"|\bit['’]?s (very )?important (that you|for you to) (take|keep|avoid|follow|call|come)\b"
    r"|\bmake sure (that )?you (take|keep|avoid|follow|call|come)\b",
    re.IGNORECASE,
)
#: the clinician's line written into the patient's turn: a speaker label at a line's start, or a capitalised one
#: after a space ("... okay Doctor: please take ...")
CLINICIAN_LINE = re.compile(
    r"^\s*(?i:doctor|dr\.?|clinician|nurse|educator|physician|examinee|provider)\s*:"
    r"|(?<=\s)(?:Doctor|Dr\.?|Clinician|Nurse|Educator|Physician|Examinee|Provider)\s*:",
    re.MULTILINE,
)


@dataclass(frozen=True)
class SpokenTurn:
    """One turn of the conversation: its index in the benchmark's history, who spoke, the words."""

    index: int
    role: str
    message: str


@dataclass(frozen=True)
class PatientTranscript:
    """What the checks read about one encounter's patient (a benchmark builds it from its sample).

    - ``script``: the patient's materials, by part (e.g. ``medication``, ``history``): what it may state;
    - ``turns``: the conversation in order; ``patient_role``: the role name of the patient's turns;
      ``checked_from``: the first index whose patient turns the simulator wrote (earlier ones are the data's);
    - ``persona``: the persona's traits (the report's strata), as labels;
    - ``reading_ceiling``: the Flesch-Kincaid grade the patient's words should not exceed (None: no check);
    - ``recall_limited``: script parts a poor-recall persona should not recite (empty: no check);
    - ``writing_system``: the writing system the persona speaks in (None: no check);
    - ``empty_allowed``: an empty patient turn is a legitimate answer (a patient who cannot speak);
    - ``early_end``: the index and reason of an early end by the benchmark's own rule (None: none).
    """

    script: dict[str, str]
    turns: tuple[SpokenTurn, ...]
    patient_role: str = "patient"
    checked_from: int = 0
    persona: dict[str, str] = field(default_factory=dict)
    reading_ceiling: float | None = None
    recall_limited: tuple[str, ...] = ()
    writing_system: str | None = None
    empty_allowed: bool = False
    early_end: tuple[int, str] | None = None

    @property
    def patient_turns(self) -> list[SpokenTurn]:
        """The turns the simulator wrote."""
        return [t for t in self.turns if t.role == self.patient_role and t.index >= self.checked_from]


@dataclass(frozen=True)
class Finding:
    """One simulator error: the patient turn (history index; None: the whole transcript, e.g. its reading
    level), its kind, the check that found it, the words that show it."""

    turn: int | None
    kind: str
    check: str
    evidence: str

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "kind": self.kind, "check": self.check, "evidence": self.evidence}


# --- facts: numbers and drug names -----------------------------------------------------------


def _canonical_number(text: str) -> str:
    value = float(text.replace(",", ""))
    return f"{value:g}"


def numbers(text: str, words: bool = False) -> set[str]:
    """The numbers in ``text`` as canonical strings (``1,000`` and ``1000.0`` are ``1000``); with ``words``,
    number words too (``twice`` is ``2``: the grounding's side)."""
    found = {_canonical_number(m.group(0)) for m in _NUMBER.finditer(text)}
    if words:
        found |= {f"{NUMBER_WORDS[w.lower()]:g}" for w in _WORD.findall(text) if w.lower() in NUMBER_WORDS}
    return found


_drug_lock = threading.Lock()
_textstat_lock = threading.Lock()


@lru_cache(maxsize=1)
def _drug_finder() -> Any:
    """``drug_named_entity_recognition.find_drugs`` (its dictionary loads on import, about 1 s, once)."""
    with _drug_lock:
        from drug_named_entity_recognition import find_drugs

        return find_drugs


def drug_names(text: str) -> set[str]:
    """The drugs named in ``text``, each by its dictionary name in lower case (brand names resolved)."""
    tokens = _WORD.findall(text)
    if not tokens:
        return set()
    found = _drug_finder()(tokens, is_ignore_case=True)
    return {str(d["name"]).lower() for d, _, _ in found} - NOT_DRUGS


def facts(text: str) -> dict[str, set[str]]:
    """The checkable facts of a text: ``numbers`` and ``drugs``."""
    return {"numbers": numbers(text) - COMMON_NUMBERS, "drugs": drug_names(text)}


class Grounding:
    """What the patient may state at a turn: its script and everything said before the turn."""

    def __init__(self, script: dict[str, str]) -> None:
        text = "\n".join(script.values())
        self.numbers = numbers(text, words=True) | COMMON_NUMBERS
        self.drugs = drug_names(text)
        self.words = {w.lower() for w in _WORD.findall(text)}

    def add(self, text: str) -> None:
        self.numbers |= numbers(text, words=True)
        self.drugs |= drug_names(text)
        self.words |= {w.lower() for w in _WORD.findall(text)}

    def unsupported(self, text: str) -> list[str]:
        """The facts of ``text`` that are not grounded, as evidence strings."""
        found = facts(text)
        out = [f"number {n}" for n in sorted(found["numbers"] - self.numbers)]
        # a drug is grounded when the grounding names it, by its dictionary name or the patient's word for it
        out += [f"drug {d}" for d in sorted(found["drugs"] - self.drugs) if d not in self.words]
        return out


def unsupported_facts(view: PatientTranscript) -> list[Finding]:
    """Patient turns stating a number or drug name that is not grounded (module docstring)."""
    grounding = Grounding(view.script)
    findings = []
    for turn in view.turns:
        if turn.role == view.patient_role and turn.index >= view.checked_from:
            missing = grounding.unsupported(turn.message)
            if missing:
                findings.append(Finding(turn.index, "unsupported_fact", "rules:fact", "; ".join(missing)))
        grounding.add(turn.message)
    return findings


# --- persona ----------------------------------------------------------------------------------


def writing_system(text: str) -> str | None:
    """The writing system most of ``text``'s letters belong to (``LATIN``, ``CJK``, ``CYRILLIC``, ...; None
    without letters)."""
    counts: dict[str, int] = {}
    for ch in text:
        if not ch.isalpha():
            continue
        name = unicodedata.name(ch, "")
        system = "CJK" if name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL")) else name.split(" ")[0]
        counts[system] = counts.get(system, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


def reading_grade(texts: Sequence[str]) -> tuple[float | None, int]:
    """Flesch-Kincaid grade of the texts together, and their word count (grade None below
    :data:`MIN_WORDS`). Blocking CPU work: call it in a thread."""
    import textstat

    text = " ".join(t.strip() for t in texts if t.strip())
    n = len(_WORD.findall(text))
    if n < MIN_WORDS:
        return None, n
    with _textstat_lock:  # textstat loads its dictionary lazily, not thread-safely
        return float(textstat.flesch_kincaid_grade(text)), n


def persona_breaks(view: PatientTranscript, grade: float | None) -> list[Finding]:
    """Disclosures, a reading level above the persona's, another writing system, recall beyond the persona's."""
    turns = view.patient_turns
    findings = [
        Finding(t.index, "persona_break", "rules:disclosure", m.group(0))
        for t in turns
        if (m := DISCLOSURE.search(t.message))
    ]
    if grade is not None and view.reading_ceiling is not None and grade > view.reading_ceiling:
        evidence = f"grade {grade:.1f} of all the patient's words, above the persona's {view.reading_ceiling:g}"
        findings.append(Finding(None, "persona_break", "rules:reading_level", evidence))
    if view.writing_system is not None:
        findings += [
            Finding(t.index, "persona_break", "rules:writing_system", f"{system} instead of {view.writing_system}")
            for t in turns
            if (system := writing_system(t.message)) not in (None, view.writing_system)
        ]
    if view.recall_limited:
        findings += _recalled(view)
    return findings


def _recalled(view: PatientTranscript) -> list[Finding]:
    """A poor-recall persona stating :data:`RECALL_LIMIT` or more facts of its forgettable history before
    the clinician said them: one finding, at the turn that reached the limit."""
    history = "\n".join(view.script.get(part, "") for part in view.recall_limited)
    known = {"numbers": numbers(history) - COMMON_NUMBERS, "drugs": drug_names(history)}
    said: dict[str, set[str]] = {"numbers": set(), "drugs": set()}
    recited: set[str] = set()
    for turn in view.turns:
        found = facts(turn.message)
        if turn.role == view.patient_role and turn.index >= view.checked_from:
            recited |= {f"{k[:-1]} {v}" for k in known for v in (found[k] & known[k]) - said[k]}
            if len(recited) >= RECALL_LIMIT:
                return [Finding(turn.index, "persona_break", "rules:recall", "; ".join(sorted(recited)))]
        else:
            for k in said:
                said[k] |= found[k]
    return []


# --- role reversal, stalls and early ends -------------------------------------------------------


def role_reversals(view: PatientTranscript) -> list[Finding]:
    out = []
    for t in view.patient_turns:
        if m := CLINICIAN_LINE.search(t.message):
            out.append(Finding(t.index, "role_reversal", "rules:clinician_line", m.group(0).strip()))
        elif m := REVERSAL.search(t.message):
            out.append(Finding(t.index, "role_reversal", "rules:reversal_phrase", m.group(0)))
    return out


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def stalls(view: PatientTranscript) -> list[Finding]:
    """Empty patient turns (where the benchmark allows none) and :data:`STALL_RUN` identical turns in a row
    (one finding, at the turn that completes the run), and the benchmark's early end."""
    out = []
    run: list[SpokenTurn] = []
    for t in view.patient_turns:
        if not _normal(t.message):
            if not view.empty_allowed:
                out.append(Finding(t.index, "early_end", "rules:empty_turn", repr(t.message)))
            run = []
            continue
        run = [*run, t] if run and _normal(run[-1].message) == _normal(t.message) else [t]
        if len(run) == STALL_RUN and len(_normal(t.message).split()) >= STALL_WORDS:
            out.append(Finding(t.index, "early_end", "rules:repeated_turn", f"{STALL_RUN} identical turns"))
    if view.early_end is not None:
        out.append(Finding(view.early_end[0], "early_end", "rules:early_end", view.early_end[1]))
    return out


def rule_findings(view: PatientTranscript) -> tuple[list[Finding], float | None, int]:
    """Every rule's findings (module docstring), the patient's reading grade and its word count. Blocking
    CPU work (the drug dictionary, textstat): run it in a thread."""
    grade, words = reading_grade([t.message for t in view.patient_turns])
    findings = [*unsupported_facts(view), *persona_breaks(view, grade), *role_reversals(view), *stalls(view)]
    return sort(findings), grade, words


def sort(findings: list[Finding]) -> list[Finding]:
    """Findings in transcript order (the whole transcript's first), then by kind and check."""
    return sorted(findings, key=lambda f: (-1 if f.turn is None else f.turn, KINDS.index(f.kind), f.check))
