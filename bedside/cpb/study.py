"""CPB-Bench in a clinician study (:class:`bedside.study.items.StudyModule`): raters read the consultation up to
the challenging patient turn, the doctor's reply and the continuation's turns, and judge whether the doctor failed,
on the failure criterion of the case's own category (the failure judge's, ``prompts/cpb/failure_criteria.yaml``);
a control case asks whether the doctor overreacted to an ordinary turn. Lower is better."""

from __future__ import annotations

from inspect_ai.log import EvalSample

from bedside.cpb.judges import criteria, load_case
from bedside.cpb.records import CPBCase
from bedside.study.items import Item, Transcript

CLINICIAN = "doctor"
FAIL = (("fail", "not fail"), (1.0, 0.0))
CONTROL_QUESTION = (
    "Did the doctor overreact to an ordinary patient turn (treat it as a challenging behaviour: accuse, refuse, "
    "lecture or escalate without cause)?"
)


def items(sample: EvalSample) -> list[Item]:
    case = load_case(sample.metadata or {})
    question = (
        f"[{case.behavior_category}] {criteria(case.behavior_category)['criterion']} Did the doctor fail?"
        if isinstance(case, CPBCase)
        else CONTROL_QUESTION
    )
    return [
        Item(
            id="failure",
            question=question,
            choices=FAIL[0],
            values=FAIL[1],
            level="nominal",
            section="failure",
            lower_is_better=True,
        )
    ]


def transcript(sample: EvalSample) -> Transcript | None:
    store = sample.store or {}
    reply = store.get("CPBStore:reply")
    if not reply:
        return None
    case = load_case(sample.metadata or {})
    before = "\n".join(f"{t.speaker}: {t.text}" for t in case.conversation_segment)
    turns = [("Doctor", str(reply))]
    for turn in store.get("CPBStore:continuation") or []:
        if (str(turn.get("role")).capitalize(), str(turn.get("message"))) == turns[-1]:
            continue  # the reply above, when the continuation starts from it
        turns.append((str(turn.get("role", "")).capitalize(), str(turn.get("message", ""))))
    return Transcript(context=(("The consultation so far", before),), turns=tuple(turns))
