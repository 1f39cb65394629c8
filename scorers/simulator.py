"""``simulator_check``: the simulated patient's own errors, per transcript (:mod:`bedside.simulator_checks`),
for every benchmark whose parts name its simulated patient (``simulator`` of ``bedside/<name>/parts.py``: its
patient's :class:`PatientTranscript`).

Keys (each 1 when the transcript has at least one finding of that kind, else 0; NaN when the transcript has
no simulated patient turn, e.g. a single-turn sample):

- ``simulator_error``: any finding; ``unsupported_fact``, ``persona_break``, ``role_reversal``,
  ``early_end``: by kind;
- ``patient_grade``: Flesch-Kincaid grade of all the patient's words (NaN below the checks' minimum of words);
- ``checker_unparsed`` (health): the LLM checker's reply stayed unreadable (or its call failed): the kinds
  the rules did not flag are then unscored (NaN), never 0.

The LLM checker (:mod:`bedside.simulator_checker`) runs only when its role is bound
(``--model-role simulator_checker=<model>``): an unbound checker does not fall back to the model under test
(a model would judge the patient it converses with). One call per transcript at temperature 0 (prompt
``prompts/simulator_checker.j2``); an unreadable reply (not JSON, a kind that is not one of the four, a turn
that is not a checked patient turn) is asked again ``judge_retries`` times, then counted as unparsed.

The metadata keeps every finding (turn, kind, check, evidence), who checked (``rules`` and, when the role
``simulator_checker`` is bound, ``llm:<model>``, or ``person`` when a person rates the turns on
``bedside/human``'s page: then also ``ratings``, every checked turn's rating and comment), the persona and the
patient's word count. Run it with
``-T simulator_check=true`` (every bedside task that has a simulated patient; a task's scorers include it then, or
when the checker's role is bound: :func:`wanted`), or on an existing log with
``inspect score LOG --scorer bedside/simulator_check -S benchmark=<name> --action append``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from inspect_ai.model import GenerateConfig, Model
from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState

from bedside import benchmarks
from bedside.calls import Answer, ask
from bedside.intervals import BINARY, COUNT, UNBOUNDED
from bedside.parts import parts_of
from bedside.prompts import render
from bedside.protocols import Reading
from bedside.roles import role_is_bound, role_model
from bedside.score_keys import ScoreKey, declares
from bedside.scorers.metrics import summary_of
from bedside.scorers.rescore import rescorable
from bedside.simulator_checker import PERSON, ROLE, checker_protocol, rating_protocol, read_rating
from bedside.simulator_checks import KINDS, Finding, PatientTranscript, rule_findings, sort

NAN = float("nan")

KEYS = (
    ScoreKey("simulator_error", BINARY, role="summary", lower_is_better=True, label="simulator error"),
    *(ScoreKey(kind, BINARY, role="summary", lower_is_better=True) for kind in KINDS),
    ScoreKey("patient_grade", UNBOUNDED, label="patient reading grade"),
    ScoreKey("checker_unparsed", COUNT, role="health", health="count", lower_is_better=True),
)


def checker_bound() -> bool:
    return role_is_bound(ROLE)


def wanted(arguments: Mapping[str, Any]) -> bool:
    """Whether a run with the task's ``arguments`` is checked: ``-T simulator_check=true`` or the checker's role
    bound. A task whose run may simulate no patient rejects ``simulator_check=true`` there itself; with the
    checker's role bound, such a run's samples score as having no simulated patient turn (NaN, no call)."""
    return bool(arguments["simulator_check"]) or checker_bound()


def checker_prompt(view: PatientTranscript, person: bool = False) -> str:
    script = "\n\n".join(f"## {part}\n{text}" for part, text in view.script.items() if text.strip())
    turns = "\n".join(f"[{t.index}] {t.role}: {t.message}" for t in view.turns)
    checked = [t.index for t in view.patient_turns]
    return render(
        "simulator_checker.j2",
        script=script,
        turns=turns,
        patient_role=view.patient_role,
        checked=", ".join(str(i) for i in checked),
        persona="; ".join(f"{k}: {v}" for k, v in view.persona.items()) or "not stated",
        person=person,
    )


async def checker_findings(
    view: PatientTranscript, benchmark: str, retries: int
) -> tuple[list[Finding], Answer[Any], str, list[dict[str, Any]]]:
    """The checker's findings on ``view``, its :class:`~bedside.calls.Answer` (``value`` None: unreadable
    after the retries, or the call failed), the checker's name (``llm:<model>``; ``person`` for a person on
    ``bedside/human``'s page) and a person's rating of every checked turn (empty for a model)."""
    model, _ = role_model(ROLE, GenerateConfig(temperature=0.0))
    if is_person(model):
        return await person_findings(view, benchmark, model, retries)
    allowed = {t.index for t in view.patient_turns}
    protocol = checker_protocol(benchmark)

    def read(text: str) -> Reading:
        reply, repaired = protocol.read_json(text)
        wrong = sorted({f.turn for f in reply.findings} - allowed)
        if wrong:
            raise ValueError(f"turns {wrong} are not checked patient turns ({sorted(allowed)})")
        return Reading(reply, repaired)

    answer = await ask(model, checker_prompt(view), protocol.using(parser=read), retries=retries)
    name = f"llm:{model}"
    if answer.value is None:
        return [], answer, name, []
    return [Finding(f.turn, f.kind, name, f.evidence) for f in answer.value.findings], answer, name, []


def is_person(model: Model) -> bool:
    """Whether the checker is a person (``bedside/human``): they rate every patient turn on a form."""
    return str(model) == "bedside/human"


async def person_findings(
    view: PatientTranscript, benchmark: str, model: Model, retries: int
) -> tuple[list[Finding], Answer[Any], str, list[dict[str, Any]]]:
    """A person's realism rating of every checked patient turn (:func:`bedside.simulator_checker.rating_protocol`):
    each turn not rated realistic is a finding of check ``person``, its comment the evidence."""
    protocol = rating_protocol(benchmark, view)
    indices = [t.index for t in view.patient_turns]

    def read(text: str) -> Reading:
        reply, repaired = protocol.read_json(text)
        return Reading(read_rating(reply, indices), repaired)

    answer = await ask(model, checker_prompt(view, person=True), protocol.using(parser=read), retries=retries)
    if answer.value is None:
        return [], answer, PERSON, []
    rated = answer.value
    findings = [
        Finding(i, kind, PERSON, comment or "rated so by a person") for i, kind, comment in rated if kind != "realistic"
    ]
    return findings, answer, PERSON, [{"turn": i, "rating": kind, "comment": comment} for i, kind, comment in rated]


def patient_transcript(benchmark: str, metadata: dict) -> PatientTranscript | None:
    """Benchmark ``benchmark``'s patient transcript of the sample being scored (None: no simulated patient)."""
    module = parts_of(benchmarks.get(benchmark)).simulator
    if module is None:
        raise ValueError(f"benchmark {benchmark!r} declares no simulated patient (its parts' simulator)")
    return module.patient_transcript(metadata)


def flags(findings: list[Finding], unread: bool) -> dict[str, float]:
    """The transcript's keys from its findings; with ``unread`` (the LLM checker gave no answer) a kind
    without a finding is unscored."""
    kinds = {f.kind for f in findings}
    absent = NAN if unread else 0.0
    out = {kind: 1.0 if kind in kinds else absent for kind in KINDS}
    return {"simulator_error": 1.0 if kinds else absent, **out}


@declares(KEYS, when=wanted)
@scorer(metrics=summary_of(KEYS))
def simulator_check(benchmark: str, judge_retries: int = 2) -> Scorer:
    """The simulated patient's errors in benchmark ``benchmark``'s transcript (module docstring);
    ``judge_retries``: fresh samples asked of the LLM checker when its reply is unreadable."""

    async def score(state: TaskState, target: Target) -> Score:
        view = patient_transcript(benchmark, state.metadata)
        if view is None or not view.patient_turns:
            return Score(
                value={**{k.name: NAN for k in KEYS if k.name != "checker_unparsed"}, "checker_unparsed": 0.0},
                explanation="no simulated patient turn: nothing to check",
                metadata={"findings": [], "checked_by": []},
            )
        findings, grade, words = await anyio.to_thread.run_sync(rule_findings, view)
        checked_by = ["rules"]
        checker_error: str | None = None
        ratings: list[dict[str, Any]] = []
        if checker_bound():
            found, answer, name, ratings = await checker_findings(view, benchmark, judge_retries)
            checker_error = answer.error if answer.value is None else None
            checked_by.append(name)
            findings = sort([*findings, *found])
        unread = checker_error is not None
        value = {
            **flags(findings, unread),
            "patient_grade": NAN if grade is None else grade,
            "checker_unparsed": float(unread),
        }
        summary = "; ".join(
            f"{'transcript' if f.turn is None else f'turn {f.turn}'} {f.kind} ({f.check}: {f.evidence})"
            for f in findings
        )
        return Score(
            value=value,
            answer="simulator_error" if findings else "faithful",
            explanation=summary or f"no simulator error in {len(view.patient_turns)} patient turns",
            metadata={
                "findings": [f.as_dict() for f in findings],
                "checked_by": checked_by,
                "persona": view.persona,
                "patient_turns": [t.index for t in view.patient_turns],
                "patient_words": words,
                **({"checker_error": checker_error} if unread else {}),
                **({"ratings": ratings} if ratings else {}),
            },
        )

    return score


rescorable(simulator_check)
