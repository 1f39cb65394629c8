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
  Numbers are digit strings (``40``, ``1,000``, ``0.5``) and numbers in words with a unit (``eighty
  milligrams``; a number word of the grounding, ``two`` or ``twice``, counts as its digits); drug names are found
  by ``drug-named-entity-recognition`` (DrugBank, MeSH and brand names resolved to one name: ``Lasix`` and
  ``furosemide`` are one drug; a combination's parts are grounded), less the everyday substances of
  :data:`NOT_DRUGS`;
- ``persona_break``: an AI or role-play self-disclosure, or talk about the role-play from outside it
  (:data:`DISCLOSURE`); an assistant's register or stage directions (:data:`ASSISTANT_REGISTER`); words above
  the persona's reading level (Flesch-Kincaid grade of all the patient's words, at least :data:`MIN_WORDS`,
  above the transcript's ``reading_ceiling``); speech in another writing system than the persona's; a
  poor-recall persona reciting :data:`RECALL_LIMIT` or more facts of the history it should have forgotten;
- ``role_reversal``: the patient teaches, prescribes, diagnoses or quizzes instead of the clinician: the
  clinician's part in the first person, a diagnosis in the clinician's terms, a teach-back put to the clinician,
  the clinician's body or treatment in the second person (:data:`REVERSAL`); in a sentence that is not a
  question (a patient's request or worry is one), a modal of obligation with a treating verb addressed to the
  clinician (:data:`DIRECTIVE`) or an imperative order of a treatment (:data:`ORDER`); or it writes the
  clinician's lines;
- ``early_end``: the patient stalls (:data:`STALL_RUN` identical turns in a row of :data:`STALL_WORDS` words or
  more, an empty turn where the benchmark allows none, a control token instead of words) or ends the encounter
  early (a farewell before the session's last two turns, :func:`early_farewell`, or the benchmark's own rule,
  ``early_end``).

The rules decide only what they can decide; they miss what needs the materials' meaning (a fact in words
without digits or a drug name, a drug class, a persona's drift in its own voice, a reading level over a few
words) that the LLM checker is there for. Their recall and false alarms are measured on scripted patients with
planted errors by the tests, and on the bedside corpus of simulated-patient errors
(``tests/corpus/simulator_errors``, ``python -m bench.simulator_corpus``; docs/reports.md, "The simulator's own
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
#: "okay", "yes", is a backchannel real patients repeat; a Chinese, Japanese or Korean character counts as a word)
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
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "thousand": 1000,
    "half": 0.5,
}

_NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?")
_WORD = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*")
_NUMBER_WORD = "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
#: a number in words, compounds included ("twenty-two", "one hundred and twenty", "a thousand")
_SPOKEN_NUMBER = re.compile(rf"\b(?:a |an )?(?:{_NUMBER_WORD})(?:(?:[- ]| and )(?:{_NUMBER_WORD}))*\b", re.IGNORECASE)
#: the units that make a number in words a dose or a measurement the patient states ("eighty milligrams")
_UNIT = re.compile(
    r"\s*(mg|milligrams?|mcg|micrograms?|units?|ml|milliliters?|millilitres?|pounds?|lbs?|kilos?|kilograms?|kg"
    r"|percent|degrees?|puffs?)\b",
    re.IGNORECASE,
)

#: an AI or role-play self-disclosure in a patient's words, or talk about the role-play from outside it
DISCLOSURE = re.compile(
    r"\bas an ai\b|\blanguage model\b|\bi['’]?m an (ai|assistant)\b|\bi am an (ai|assistant)\b|\bai assistant\b"
    r"|\brole[- ]?play(ing)?\b|\b(my|the) script (says|said|tells|told|has|gives)\b|\bsimulated patient\b"
    r"|\bstandardi[sz]ed patient\b|\bmy (materials|prompt|system prompt)\b|\bmy character\b"
    r"|\b(in|out of) character\b|\bnot a real patient\b|\ba real patient (would|might|could)\b|\bbackstory\b"
    r"|\b(training|practice|simulated|simulation) (scenario|exercise|session|encounter|case)\b"
    r"|\b(this|the) (simulation|role[- ]?play)\b",
    re.IGNORECASE,
)
#: a patient's turn in an assistant's register or with stage directions: a numbered list, an assistant's
#: offer ("let me know if you'd like more detail"), an action in asterisks, a narrator's parenthesis
ASSISTANT_REGISTER = re.compile(
    r"(?:^|\s)1\.\s[^\n]+?(?:^|\s)2\.\s"
    r"|\blet me know if you['’]?d like (more|any|further|me to)\b|\bi hope (this|that) helps\b"
    r"|\bfeel free to (ask|let me know|reach out)\b|\bhappy to (help|assist|elaborate|provide)\b"
    r"|\*(sighs|shrugs|smiles|laughs|nods|pauses|coughs|winces|looks|leans|frowns|shakes|grimaces)\b[^*]*\*"
    r"|[(\[](the patient|patient|sighs|shrugs|smiles|laughs|nods|pauses)\b[^)\]]*[)\]]",
    re.IGNORECASE | re.MULTILINE,
)
#: a patient who teaches, prescribes, diagnoses or examines (the clinician's part), in any sentence: the
#: clinician's part in the first person ("as your doctor", "I'd order", "I'll tell you what to look for"), a
#: diagnosis in the clinician's terms ("meets the criteria", "first-line"), a teach-back or quiz put to the
#: clinician ("in your own words", "what would you tell a patient"), and the clinician's body or treatment in
#: the second person, as a patient speaks of its own ("your urine", "your insulin": teaching with a generic "you")
REVERSAL = re.compile(
    r"\b(as|i['’]?m|i am) your (doctor|nurse|physician|clinician|educator|provider|pharmacist)\b"
    r"|\bi(['’]d| would)? (recommend|prescribe|advise) (that )?you\b|\bi['’]?ll prescribe\b|\bi will prescribe\b"
    r"|\bi(['’]d| would) (order|prescribe|titrate|taper|refer)\b"
    r"|\bmy (recommendation|advice|diagnosis) (for you )?(is|would be)\b"
    r"|\byour diagnosis is\b|\byou (most likely|probably) have\b"
    r"|\b(meets|meet|fits|fulfils|fulfills) (all )?(the )?([\w-]+ )?criteria\b|\b(first|second)[- ]line\b"
    r"|\bpathognomonic\b|\bdifferential diagnosis\b"
    r"|\blet me explain (your|how your|why your|what your|how this works)\b|\blet me (teach|show) you (how|what)\b"
    r"|\bi['’]?ll (tell|show|teach) you (what|how) to\b|\bi will (tell|show|teach) you (what|how) to\b"
    r"|\b(tell|say|explain|repeat|give) (it|that|this|them|those) back to me\b|\bin your own words\b"
    r"|\b(let me|i want to|i['’]?ll) (check|make sure|see) (that |if |whether )?you(['’]ve| have| understand"
    r"| understood| know| got)\b"
    r"|\byou(['’]d| would) (tell|teach|advise|warn) (a|your|the) patients?\b"
    r"|\bwhat would you do if you (?!were\b)"
    r"|\bwhat i want you to (remember|know|do)\b|\bi want you to (remember|repeat)\b"
    r"|\bthat['’]?s (how|why) you (avoid|prevent|keep|know)\b|\bteaching point\b|\btake[- ]home (message|point)\b"
    r"|(?:^|[.!?]\s+)remember (that|this)\s*[.!]"
    r"|\b(tell|teach|warn|remind|advise) (people|patients|everyone|your patients) (to|that|about)\b"
    r"|\byour (own )?(body|urine|pee|stools?|bowels|ankles|blood sugars?|sugars|sugar levels?|blood pressure"
    r"|incisions?|wounds?|lungs|kidneys|liver|insulin|long[- ]acting|basal|anticoagulation|blood thinner"
    r"|water pill)\b"
    r"|\bit['’]?s (very )?important (that you|for you to) (take|keep|avoid|follow|call|come)\b"
    r"|\bmake sure (that )?you (take|keep|avoid|follow|call|come)\b",
    re.IGNORECASE,
)
#: the clinician's acts told to the clinician, in a sentence that is not a question: a modal of obligation
#: with a treating, ordering, examining or teaching verb ("you need to bump that up", "you should consider")
DIRECTIVE = re.compile(
    r"\byou (really |also |definitely |probably |just )?(should|need to|must|have to|ought to|['’]ve got to|gotta"
    r"|might want to|may want to) (also |really |just |then )?(take|start|stop|continue|avoid|reduce|increase|limit"
    r"|keep taking|bump|raise|lower|decrease|double|halve|cut|add|switch|change|prescribe|order|consider|cover"
    r"|treat|titrate|taper|refer|admit|examine|check for|rule out|ask me about|warn|teach|educate|counsel)\b",
    re.IGNORECASE,
)
#: words that open a clause before an imperative ("yeah just put me on ...", "Doctor, switch ...")
_LEAD = r"(?:(?:yeah|yes|ok|okay|so|now|well|just|please|doc|doctor|honey|look|instead|then|but)\b[\s,]*)*"
#: an order for a treatment addressed to the clinician, in a sentence that is not a question: an imperative at
#: a clause's start (or after a bare "you", "I'd rather you", "I want you to"), with a prescribing verb; its
#: clause names a treatment (:data:`TREATMENT` or a drug name) unless the verb is a prescribing idiom with "me"
#: ("put me on", "start me on", "switch me to"). Refusals (stop, skip, cancel) are a patient's right, not orders.
ORDER = re.compile(
    r"(?:^|[.!:;,—–]\s*|\b(?:you|i['’]d rather you|i would rather you|i['’]d prefer you|i want you to"
    r"|i need you to)\s+)" + _LEAD + r"(?P<idiom>(put|start|switch|move) me (on|onto|over|to|back on)\b)?"
    r"(?P<verb>(write|give|prescribe) me\b|(double|halve|triple|increase|decrease|raise|lower|bump|reduce|add|switch"
    r"|change|order|prescribe|titrate|taper) (the|that|this|those|these|my|it|a|an|some|me)\b)?",
    re.IGNORECASE,
)
#: what an order prescribes: a dose, a prescription, a drug by its class or a form of treatment, a test
TREATMENT = re.compile(
    r"\b(doses?|dosage|prescriptions?|scripts?|refills?|medications?|medicines?|meds|pills?|tablets?|capsules?"
    r"|drugs?|injections?|infusions?|drip|insulin|antibiotics?|steroids?|therapy|treatment|courses?|burst|pump"
    r"|x-?rays?|scans?|mri|ct|ultrasound|ecg|ekg|labs|bloodwork|blood tests?|d-dimer|biopsy|referral"
    r"|[a-z]+(olones?|triptans?|statins?|sartans?|prazoles?|mycins?|cillins?|cyclines?|floxacins?|azepines?|azepams?)"
    r"|beta[- ]?blockers?|blood thinners?|water pills?|diuretics?|opioids?|painkillers?|muscle relaxants?"
    r"|sleeping pills?|ace inhibitors?|ssris?|ppis?|nsaids?|anticoagulants?|antidepressants?|antihistamines?)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_CLAUSE_END = re.compile(r"[.!?:;—–]|,\s*(?:and|but|then)\b")
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


def _spoken_value(phrase: str) -> float:
    """The value of a number in words: ``twenty-two`` 22, ``one hundred and twenty`` 120, ``a thousand`` 1000."""
    total, current = 0.0, 0.0
    for word in re.split(r"[- ]+", phrase.lower()):
        if word in ("a", "an", "and") or word not in NUMBER_WORDS:
            continue
        value = NUMBER_WORDS[word]
        if value == 100:
            current = max(current, 1) * 100
        elif value == 1000:
            total, current = total + max(current, 1) * 1000, 0.0
        else:
            current += value
    return total + current


def numbers(text: str, words: bool = False) -> set[str]:
    """The numbers in ``text`` as canonical strings (``1,000`` and ``1000.0`` are ``1000``), and numbers in
    words with a unit (``eighty milligrams`` is ``80``); with ``words``, every number word and number in words
    (``twice`` is ``2``, ``twenty-two`` is ``22`` and ``20`` and ``2``: the grounding's side)."""
    found = {_canonical_number(m.group(0)) for m in _NUMBER.finditer(text)}
    for m in _SPOKEN_NUMBER.finditer(text):
        if words or _UNIT.match(text, m.end()):
            found.add(f"{_spoken_value(m.group(0)):g}")
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
        self.numbers = set(COMMON_NUMBERS)
        self.drugs: set[str] = set()
        self.words: set[str] = set()
        self.add("\n".join(script.values()))

    def add(self, text: str) -> None:
        """Ground what ``text`` states; a combination's parts each count (``amoxicillin-clavulanate`` grounds
        ``amoxicillin``)."""
        parts = text.replace("-", " ")
        self.numbers |= numbers(text, words=True)
        self.drugs |= drug_names(text) | drug_names(parts)
        self.words |= {w.lower() for w in _WORD.findall(text) + _WORD.findall(parts)}

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
        Finding(t.index, "persona_break", check, m.group(0).strip())
        for t in turns
        for check, pattern in (("rules:disclosure", DISCLOSURE), ("rules:assistant_register", ASSISTANT_REGISTER))
        if (m := pattern.search(t.message))
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
    """Patient turns that write the clinician's line, or teach, prescribe, diagnose or order (:data:`REVERSAL`;
    in a sentence that is not a question, :data:`DIRECTIVE` and :data:`ORDER`); words the clinician said before
    are an echo, not the patient's part ("... if any of these happen: your blood sugar?")."""
    out = []
    said = ""
    for t in view.turns:
        if t.role == view.patient_role and t.index >= view.checked_from:
            if m := CLINICIAN_LINE.search(t.message):
                out.append(Finding(t.index, "role_reversal", "rules:clinician_line", m.group(0).strip()))
            elif evidence := reversal(t.message, said):
                out.append(Finding(t.index, "role_reversal", "rules:reversal_phrase", evidence))
        if t.role != view.patient_role:
            said += " " + _normal(t.message)
    return out


def reversal(text: str, said: str = "") -> str | None:
    """The words of ``text`` in which the patient takes the clinician's part, unless the clinician said them
    (``said``: the clinician's words so far, as :func:`_normal` gives them); None: none."""

    def own(words: str) -> bool:
        return bool(_normal(words)) and f" {_normal(words)} " not in f" {said} "

    found = [m.group(0).strip(" .!?") for m in REVERSAL.finditer(text)]
    for sentence in (s.strip() for s in _SENTENCE.findall(text)):
        if sentence.endswith("?"):
            continue  # a question is a patient's: "should I double it?", "can you put me on something?"
        found += [m.group(0) for m in DIRECTIVE.finditer(sentence)]
        for m in ORDER.finditer(sentence):
            if not (m.group("idiom") or m.group("verb")):
                continue
            clause = _CLAUSE_END.split(sentence[m.start("idiom") if m.group("idiom") else m.start("verb") :], 1)[0]
            if m.group("idiom") or TREATMENT.search(clause) or drug_names(clause):
                found.append(clause.strip())
    return next((words for words in found if own(words)), None)


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def word_count(text: str) -> int:
    """Words of ``text``; each character of a Chinese, Japanese or Korean word counts as one."""
    return sum(len(w) if writing_system(w) == "CJK" else 1 for w in _WORD.findall(text))


#: a patient's farewell ("bye", "see you later", "I'll see myself out", "we're done here")
FAREWELL = re.compile(
    r"\b(good ?bye|bye( bye| now| for now)?|see you (later|around|soon)|take care(?! of)|farewell"
    r"|i (have|need|got|gotta) to (go|leave)|i['’]?m leaving|i['’]?ll see myself out|i['’]?m off home"
    r"|i['’]?m going to go( now)?(?= *[,.!]|$)|i['’]?ll (just )?(go|leave|head out)( now)?(?= *[,.!]|$)"
    r"|we['’]?re done( here)?(?= *[,.!]|$)|i['’]?m done(?= *[,.!]|$))|再见|拜拜",
    re.IGNORECASE,
)


def early_farewell(
    turns: Sequence[SpokenTurn], patient_role: str = "patient", checked_from: int = 0
) -> tuple[int, str] | None:
    """The first patient farewell (:data:`FAREWELL`) before the last two turns of the session: its index and the
    reason; or None."""
    farewell = next(
        (t for t in turns[:-2] if t.role == patient_role and t.index >= checked_from and FAREWELL.search(t.message)),
        None,
    )
    if farewell is None:
        return None
    return farewell.index, f"farewell before the session ended: {farewell.message[:80]!r}"


#: a simulator's control token instead of words ("###STOP###", "[END]", "<TRANSFER>"): the patient leaves
CONTROL_TOKEN = re.compile(r"^\s*(#{2,}|\[|<)\s*[A-Z][A-Z_ -]*[A-Z]\s*(#{2,}|\]|>)\s*$")


def stalls(view: PatientTranscript) -> list[Finding]:
    """Empty patient turns (where the benchmark allows none), a control token instead of words
    (:data:`CONTROL_TOKEN`), :data:`STALL_RUN` identical turns in a row
    (one finding, at the turn that completes the run), and the benchmark's early end."""
    out = []
    run: list[SpokenTurn] = []
    for t in view.patient_turns:
        if CONTROL_TOKEN.match(t.message):
            out.append(Finding(t.index, "early_end", "rules:control_token", t.message.strip()))
            run = []
            continue
        if not _normal(t.message):
            if not view.empty_allowed:
                out.append(Finding(t.index, "early_end", "rules:empty_turn", repr(t.message)))
            run = []
            continue
        run = [*run, t] if run and _normal(run[-1].message) == _normal(t.message) else [t]
        if len(run) == STALL_RUN and word_count(t.message) >= STALL_WORDS:
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
