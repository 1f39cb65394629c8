"""The LLM checker of the simulated patient, its contract: a model bound as the role ``simulator_checker`` reads
the patient's materials and the transcript and names the patient turns that break the script, one of the kinds
of :mod:`bedside.simulator_checks` each, for what the rules cannot decide (a fact in words, a paraphrased role
reversal, a persona drift). The call itself is the ``simulator_check`` scorer's (:mod:`bedside.scorers.simulator`).

It runs only when the role is bound (``--model-role simulator_checker=<model>``): an unbound checker
does not fall back to the model under test (a model would judge the patient it converses with). One call
per transcript at temperature 0 (prompt ``prompts/simulator_checker.j2``); an unreadable reply (not JSON,
a kind that is not one of the four, a turn that is not a checked patient turn) is asked again
``retries`` times, then counted as unparsed and the transcript's flags that the rules did not raise are
unscored (NaN), never 0. Each benchmark declares the call as ``<benchmark>.simulator_checker``
(:func:`checker_protocol`).

**A person as the checker** (the realism rating): bound to the role (``--model-role
simulator_checker=bedside/human``, or afterwards ``bedside rescore LOGS --simulator-checker bedside/human``),
a person rates every checked patient turn on a form (:func:`rating_protocol`: one row per patient turn, with
its words and, above them in small grey, the turn they answer) as ``realistic``, off-script
(``unsupported_fact``, ``persona_break`` or ``early_end``: the checker's kinds, so that the rating is read as a
model's findings are) or ``role_reversal``, with an optional comment. Each turn not rated realistic becomes a
finding of check ``person`` (:func:`bedside.scorers.simulator.person_findings`) in the same place as the LLM
checker's, so the report reads both alike and ``bedside agreement --people`` compares the two per patient turn
(:mod:`bedside.reporting.simulator_agreement`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bedside.protocols import Protocol
from bedside.simulator_checks import PatientTranscript, SpokenTurn

ROLE = "simulator_checker"
#: the kinds of :data:`bedside.simulator_checks.KINDS` (a test keeps them equal)
Kind = Literal["unsupported_fact", "persona_break", "role_reversal", "early_end"]
#: a person's rating of one patient turn: realistic, one of the three off-script kinds, or a role reversal
Rating = Literal["realistic", "unsupported_fact", "persona_break", "early_end", "role_reversal"]
#: the word beside each choice on a row of the form (the three off-script kinds say so)
CHOICES = {"unsupported_fact": "off-script", "persona_break": "off-script", "early_end": "off-script"}
#: the check name of a person's findings (the LLM checker's are ``llm:<model>``, the rules' ``rules:<rule>``)
PERSON = "person"
#: what each rating means, as the person's form shows it beside the choice (the checker prompt's definitions)
RATINGS: dict[str, str] = {
    "realistic": "what this patient could say",
    "unsupported_fact": "off-script: states a fact about the patient (a number, a medicine, a diagnosis, an event, "
    "a result) that is neither in the materials nor said earlier",
    "persona_break": "off-script: speaks out of the persona (words far above or below its education, another "
    "personality, recall it should not have, says it is an AI or an actor)",
    "early_end": "off-script: ends or tries to end the conversation before the clinician is done, or stalls",
    "role_reversal": "teaches, explains, prescribes or diagnoses as the clinician would, or speaks the "
    "clinician's lines",
}


class CheckerFinding(BaseModel):
    model_config = ConfigDict(extra="ignore")

    turn: int
    kind: Kind
    evidence: str = ""


class CheckerReply(BaseModel):
    """The checker's answer: every patient turn that breaks the script (an empty list: none)."""

    model_config = ConfigDict(extra="ignore")

    findings: list[CheckerFinding] = Field(default_factory=list)


def checker_protocol(benchmark: str) -> Protocol:
    """The checker's call in benchmark ``benchmark`` (declared in its protocols module)."""
    return Protocol(f"{benchmark}.{ROLE}", reply=CheckerReply, max_tokens=1024, unreadable="unscored")


class TurnRating(BaseModel):
    """A person's rating of one patient turn (a row of the form, in the order of the checked turns)."""

    model_config = ConfigDict(extra="ignore")

    rating: Rating
    comment: str = ""


class RealismRating(BaseModel):
    """A person's realism rating of a transcript: one row per checked patient turn, in order."""

    model_config = ConfigDict(extra="ignore")

    turns: list[TurnRating]


def row_label(index: int, message: str, limit: int = 400) -> str:
    """A form row: the patient turn's number in the transcript and its words (cut at ``limit`` characters)."""
    words = " ".join(message.split())
    return f"[{index}] {words if len(words) <= limit else words[: limit - 1] + '…'}"


def answered(view: PatientTranscript) -> list[SpokenTurn | None]:
    """The turn just before each checked patient turn, whoever spoke it (None: the patient opens the conversation):
    what the patient answers, which "said earlier", a role reversal or an off-script reply is judged against."""
    checked = {id(t) for t in view.patient_turns}
    return [before for before, turn in zip((None, *view.turns), view.turns) if id(turn) in checked]


def rating_protocol(benchmark: str, view: PatientTranscript) -> Protocol:
    """The checker's call answered by a person: the same protocol name (``<benchmark>.simulator_checker``)
    with the rating reply and a form of one row per checked patient turn of ``view``: its number and words,
    and above them the turn it answers (:func:`answered`; the page shows it smaller and folds a long one)."""
    form = {
        "turns": {
            "label": "Each patient turn",
            "rows": [row_label(t.index, t.message) for t in view.patient_turns],
            "row_names": [f"turn {t.index}" for t in view.patient_turns],
            "row_context": [
                None if t is None else {"who": f"[{t.index}] {t.role}", "text": t.message} for t in answered(view)
            ],
            "help": "Rate every patient turn (its number is the conversation's, in the prompt beside):\n"
            + "\n".join(f"- {kind.replace('_', ' ')}: {meaning}" for kind, meaning in RATINGS.items())
            + "\nA patient who repeats or asks about what the clinician said, is unsure, or forgets is realistic. "
            "The comment is optional: the words that show it.",
        },
        "turns/rating": {"choices": {kind: CHOICES.get(kind, "") for kind in RATINGS}},
        "turns/comment": {"label": "(optional)"},
    }
    return checker_protocol(benchmark).using(reply=RealismRating, form=form)


def read_rating(reply: RealismRating, turns: list[int]) -> list[tuple[int, str, str]]:
    """(turn index, rating, comment) of each checked patient turn; ``ValueError`` when the rows are not one per
    turn."""
    if len(reply.turns) != len(turns):
        raise ValueError(f"{len(turns)} ratings expected, one per patient turn; the reply has {len(reply.turns)}")
    return [(index, row.rating, row.comment.strip()) for index, row in zip(turns, reply.turns)]
