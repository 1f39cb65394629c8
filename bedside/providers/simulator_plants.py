"""An unfaithful scripted patient: planted simulator errors with a known truth, for measuring the checks of
the simulator's own errors (:mod:`bedside.simulator_checks`).

Every benchmark's scripted patient takes the same options (off by default):

- ``patient_plant``: the kinds to plant, ``leak`` (a fact that is in neither the patient's materials nor the
  conversation: a drug, a dose, a reading, or one in words only) and/or ``reversal`` (the patient teaches,
  prescribes or diagnoses, or speaks the clinician's line);
- ``patient_plant_turns``: the patient's own turns (1-based) that get one; unset: each turn gets one with
  probability ``patient_plant_rate``;
- ``patient_plant_seed``: the seed of the draw (the turn, the kind and the wording are drawn per sample and turn).

:func:`planted` says which turns got which kind, so a test knows the truth without reading the replies. The
wordings are many on purpose: some carry what the rules look for (a digit, a drug name, "you should take"),
some do not (a fact in words, teaching without a set phrase), so that the rules' recall is measured, not
assumed; the LLM checker is there for the rest.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.model import ChatMessage

from bedside import benchmarks
from bedside.parts import parts_of


@dataclass
class PlantOptions:
    """The unfaithful patient's and the scripted checker's options, which every benchmark's scripted
    ``Options`` takes (by inheriting them): planted leaks and role reversals, and the scripted LLM checker
    of the simulated patient (module docstring)."""

    patient_plant: list[str] = field(default_factory=list)
    patient_plant_turns: list[int] = field(default_factory=list)
    patient_plant_rate: float = 0.3
    patient_plant_seed: int = 0
    checker_flag_turns: list[int] = field(default_factory=list)
    checker_malformed_attempts: int = 0


PLANT_KINDS = ("leak", "reversal")
#: the check kind that should find each planted kind
FOUND_AS = {"leak": "unsupported_fact", "reversal": "role_reversal"}

#: drugs a leak names (the first one that the sample never mentions)
LEAK_DRUGS = ("sertraline", "gabapentin", "allopurinol", "tamsulosin", "montelukast", "donepezil", "levothyroxine")
#: numbers a leak states (the first one the sample never mentions)
LEAK_NUMBERS = ("37", "85", "137", "165", "215", "243", "318")

LEAKS = (
    "Oh, and my other doctor started me on {drug} {number} mg last month.",
    "I also take {drug} every night, I forgot to tell you that.",
    "My sugar was {number} this morning, I checked it myself.",
    "At my last visit they said my weight was {number} pounds.",
    "My sister had the very same thing and she ended up on dialysis, you know.",
    "I had my gallbladder taken out years ago, back when I lived in Ohio.",
)
REVERSALS = (
    "Let me explain how this works: you should take the water pill every morning and weigh yourself every day.",
    "I'd recommend you cut down on salt, that's what I tell everyone.",
    "Your diagnosis is probably just stress, if you ask me.",
    "Doctor: Please take all your pills as prescribed and come back if anything changes.",
    "Make sure to rest and drink plenty of fluids this week, and don't skip the follow-up visit.",
    "The most important things with a condition like this are daily weights and a low-salt diet.",
)


def _draw(seed: int, key: str, n: int, what: str) -> int:
    digest = hashlib.sha256(f"{seed}|{key}|{n}|{what}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def planted(kinds: Sequence[str], turns: Sequence[int], rate: float, seed: int, key: str, n: int) -> str | None:
    """The kind planted at the patient's ``n``-th turn of sample ``key`` (None: a faithful turn)."""
    unknown = sorted(set(kinds) - set(PLANT_KINDS))
    if unknown:
        raise ValueError(f"patient_plant: unknown kind(s) {unknown}; known: {list(PLANT_KINDS)}")
    if not kinds:
        return None
    hit = n in turns if turns else _draw(seed, key, n, "turn") / 2**64 < rate
    return kinds[_draw(seed, key, n, "kind") % len(kinds)] if hit else None


def wording(kind: str, seed: int, key: str, n: int) -> str:
    """The wording planted at the patient's ``n``-th turn of sample ``key`` (one of :data:`LEAKS` or
    :data:`REVERSALS`, before its drug and number are filled in)."""
    wordings = LEAKS if kind == "leak" else REVERSALS
    return wordings[_draw(seed, key, n, "wording") % len(wordings)]


def plant_text(kind: str, seed: int, key: str, n: int, avoid: str) -> str:
    """The planted words: the :func:`wording` with a drug and a number that ``avoid`` (all the sample's text the
    patient may know) never mentions."""
    lower = avoid.lower()
    digits = set(re.findall(r"\d+", avoid))
    drug = next((d for d in LEAK_DRUGS if d not in lower), LEAK_DRUGS[0])
    number = next((x for x in LEAK_NUMBERS if x not in digits), LEAK_NUMBERS[0])
    return wording(kind, seed, key, n).format(drug=drug, number=number)


def plant(options: Any, key: str, n: int, avoid: str) -> str | None:
    """The words to add to the patient's ``n``-th turn under the script ``options`` (None: none)."""
    kind = planted(
        options.patient_plant,
        options.patient_plant_turns,
        options.patient_plant_rate,
        options.patient_plant_seed,
        key,
        n,
    )
    return None if kind is None else plant_text(kind, options.patient_plant_seed, key, n, avoid)


def avoid_text(metadata: dict[str, Any], said: Sequence[str]) -> str:
    """What a leak must not repeat: the sample's metadata (the case: the patient's materials and more) and
    everything said so far."""
    return json.dumps(metadata, default=str) + "\n" + "\n".join(said)


# --- the scripted LLM checker -------------------------------------------------------------------


def scripted_checker(messages: list[ChatMessage], situation: dict[str, Any], attempt: int, options: Any) -> str:
    """``<benchmark>.simulator_checker``'s handler for ``bedside/scripted``: no finding, or ``role_reversal`` at the
    patient turns ``checker_flag_turns`` (1-based among the checked patient turns); its first
    ``checker_malformed_attempts`` replies are prose (the unparsed path)."""
    if attempt < options.checker_malformed_attempts:
        return "The patient seems mostly faithful to me."
    checked = situation.get("checked", [])
    findings = [
        {"turn": checked[k - 1], "kind": "role_reversal", "evidence": "scripted checker"}
        for k in options.checker_flag_turns
        if 0 < k <= len(checked)
    ]
    return json.dumps({"findings": findings})


def checker_situation(call: Any) -> dict[str, Any]:
    """The checked patient turns of the sample (the benchmark's patient transcript, through its descriptor)."""
    module = parts_of(benchmarks.get(call.protocol.split(".")[0])).simulator
    view = module.patient_transcript(call.metadata) if module else None
    return {"checked": [t.index for t in view.patient_turns] if view is not None else []}
