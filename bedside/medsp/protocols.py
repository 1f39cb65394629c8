"""MedSP1000 reply protocols (prompts in ``prompts/medsp/``): one pydantic model per reply.

The reply formats are those of the official code (MAGIC-AI4Med/MedSP1000, ``src/simulate``): the
examinee's ``{"speak", "actions", "eos"}``, the SP's ``{"speak": [...], "actors_present": {...}}``, the
environment controller's feedback, events, per-action assessments and scenario progress, the
best-of-N selector's ``{"choice", "rationale"}`` and the panel's ``{"agree", "advice"}`` vote. Every
model lists all its fields as required (that is what a grammar or structured output asks for) but
reads replies as leniently as the official normalisation does (``agents.py``
``normalize_examinee_payload`` and the SP/environment equivalents): a missing field takes its empty
value, a bare string where a list is expected becomes a one-item list, booleans are read from
``true``/``"yes"``/``1``. A reply with no JSON object at all is unreadable (retried by the caller).

The evaluator's model depends on the rubric: :func:`evaluator_reply` builds it per call with exactly
the call's item ids (bedside prompts); :func:`official_evaluator_reply` reads the official frozen-
rubric format (items keyed by their verbatim text under their competency), used with ``prompts=PATH``.

"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model, field_validator, model_validator

from bedside.jsonreply import ReplyText, as_text
from bedside.medsp.rubric import COMPETENCIES, RubricItem
from bedside.panel import Ballot, Verdicts, agreeing
from bedside.protocols import Protocol, Reply, ReplyParseError, json_objects, plain_text, reading
from bedside.simulator_checker import checker_protocol

TRUE_WORDS = ("1", "true", "yes", "y")
STATUSES = ("executed", "pending", "unsupported")


def coerce_bool(value: Any) -> bool:
    """The official ``_coerce_bool``: ``true``, non-zero numbers and ``"1"/"true"/"yes"/"y"``
    (any case) are true; everything else (``None``, other strings) is false."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return False


def text_list(value: Any) -> list[str]:
    """A list of non-empty stripped strings; a bare string is one item, ``None`` none."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [t for t in (as_text(v) for v in items) if t]


def actors(value: Any) -> dict[str, str]:
    """``actors_present``: role title -> evidence. A list of titles is accepted (evidence empty)."""
    if isinstance(value, dict):
        return {as_text(k): as_text(v) for k, v in value.items() if as_text(k)}
    return {t: "" for t in text_list(value)}


# ---------------------------------------------------------------------------------------------
# examinee (and the panel's integrator)


class ExamineeReply(BaseModel):
    """One examinee turn: what it says to the patient, its non-verbal actions, and ``eos`` = "everything
    that should be done at the current state has been done" (the environment then advances the
    scenario by one state or ends it; ``eos`` never ends the session by itself)."""

    model_config = ConfigDict(extra="ignore")

    speak: str
    actions: list[str]
    eos: bool

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        v = v if isinstance(v, dict) else {}
        return {
            "speak": as_text(v.get("speak")),
            "actions": text_list(v.get("actions")),
            "eos": coerce_bool(v.get("eos")),
        }


# ---------------------------------------------------------------------------------------------
# SP (patient side)

#: ``RoleName: utterance`` (half- or full-width colon), as the official SP agent checks prefixes
PREFIX = re.compile(r"^([^\s:：][^:：]{0,20})\s*[:：]\s*(.*)$", re.S)


class PatientReply(BaseModel):
    """The SP's turn: a list of utterances (the patient's without prefix, other patient-side roles'
    as ``RoleName: utterance``) and the patient-side roles present, with evidence."""

    model_config = ConfigDict(extra="ignore")

    speak: list[str]
    actors_present: dict[str, str]

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        v = v if isinstance(v, dict) else {}
        return {"speak": text_list(v.get("speak")), "actors_present": actors(v.get("actors_present"))}

    def prefix_warnings(self) -> list[str]:
        """Prefixed utterances whose role is not in ``actors_present`` (recorded, never enforced,
        as in the official code)."""
        out = []
        for line in self.speak:
            m = PREFIX.match(line)
            if m and m.group(1).strip() not in self.actors_present:
                out.append(f"speaker {m.group(1).strip()!r} is not in actors_present")
        return out


# ---------------------------------------------------------------------------------------------
# environment controller


class ActionAssessment(BaseModel):
    model_config = ConfigDict(extra="ignore")

    raw: str
    interpreted_action: str
    status: Literal["executed", "pending", "unsupported"]
    rationale: str

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        v = v if isinstance(v, dict) else {"raw": as_text(v)}
        status = as_text(v.get("status", "unsupported")).lower()
        return {
            "raw": as_text(v.get("raw")),
            "interpreted_action": as_text(v.get("interpreted_action")),
            "status": status if status in STATUSES else "unsupported",
            "rationale": as_text(v.get("rationale")),
        }


class EnvironmentReply(BaseModel):
    """The environment controller's turn. In-story fields (the examinee sees them): ``feedback``,
    ``events``, ``patient_status``. Evaluation-side fields (never shown to the examinee):
    ``action_assessments`` (status and rationale per action), ``actors_present`` (medical-team roles
    on scene, with evidence), ``progress_index``/``state_label`` (the scenario state), ``should_end``
    and ``completion_reason``. ``progress_index`` is None when the reply gave no usable integer (the
    state is then kept); a negative one is read as 0."""

    model_config = ConfigDict(extra="ignore")

    feedback: list[str]
    events: list[str]
    actors_present: dict[str, str]
    action_assessments: list[ActionAssessment]
    patient_status: str
    progress_index: int | None
    state_label: str
    should_end: bool
    completion_reason: str

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        v = v if isinstance(v, dict) else {}
        index = v.get("progress_index")
        if isinstance(index, str) and index.strip().lstrip("-").isdigit():
            index = int(index.strip())
        if isinstance(index, bool) or not isinstance(index, int):
            index = None
        assessments = v.get("action_assessments")
        return {
            "feedback": text_list(v.get("feedback")),
            "events": text_list(v.get("events")),
            "actors_present": actors(v.get("actors_present")),
            "action_assessments": assessments if isinstance(assessments, list) else [],
            "patient_status": as_text(v.get("patient_status")),
            "progress_index": None if index is None else max(0, index),
            "state_label": as_text(v.get("state_label")),
            "should_end": coerce_bool(v.get("should_end")),
            "completion_reason": as_text(v.get("completion_reason")),
        }


# ---------------------------------------------------------------------------------------------
# evaluator


def strict_bool(value: Any) -> Any:
    """A rubric verdict: a JSON boolean, ``"true"``/``"false"``/``"yes"``/``"no"`` or 1/0; anything
    else is left to pydantic, which rejects it (the reply is then unreadable and retried)."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    return value


class ItemVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")

    met: Annotated[bool, BeforeValidator(strict_bool)]
    evidence: ReplyText = ""


def _reasoning(v: Any) -> list[str]:
    return text_list(v)


class EvaluatorReply(BaseModel):
    """The bedside evaluator's reply: brief reasoning and a verdict per rubric item id."""

    model_config = ConfigDict(extra="ignore")

    reasoning: list[str] = Field(default_factory=list)
    items: dict[str, ItemVerdict]

    @field_validator("reasoning", mode="before")
    @classmethod
    def _r(cls, v: Any) -> Any:
        return _reasoning(v)


def evaluator_reply(ids: list[str]) -> type[BaseModel]:
    """The evaluator's reply model for one call: ``items`` with exactly these ids (each required)."""
    fields: dict[str, Any] = {i: (ItemVerdict, ...) for i in ids}
    items = create_model("RubricItems", __config__=ConfigDict(extra="ignore"), **fields)
    return create_model(
        "RubricJudgement",
        __base__=EvaluatorReply,
        items=(items, ...),
    )


class OfficialEvaluatorReply(BaseModel):
    """The official frozen-rubric evaluator's reply (``prompts=PATH``): ``reasoning`` and, per
    competency, item text -> boolean, normalised as the official ``_normalize_evaluation_payload``
    reads it (a non-object competency is empty; a value is true only for ``true``, 1 or
    ``"1"/"true"/"yes"/"y"``)."""

    model_config = ConfigDict(extra="ignore")

    reasoning: list[str] = Field(default_factory=list)
    PC: dict[str, bool] = Field(default_factory=dict)
    MK: dict[str, bool] = Field(default_factory=dict)
    SBP: dict[str, bool] = Field(default_factory=dict)
    ICS: dict[str, bool] = Field(default_factory=dict)
    PBLI: dict[str, bool] = Field(default_factory=dict)
    PROF: dict[str, bool] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        v = v if isinstance(v, dict) else {}
        out: dict[str, Any] = {"reasoning": _reasoning(v.get("reasoning"))}
        for c in COMPETENCIES:
            block = v.get(c)
            out[c] = {str(k): coerce_bool(x) for k, x in block.items()} if isinstance(block, dict) else {}
        return out


# ---------------------------------------------------------------------------------------------
# the evaluator's reply, read (bedside's format: items keyed by id; the official format: items keyed by
# their verbatim text under their competency)


class Evaluation(BaseModel):
    """One evaluator reply, read: item id -> {met, evidence}, the reasoning, and items matched loosely.
    Under the official reading (``-T reading=official``, the default) the reply may leave items out (they
    leave the case's denominator) and may add keys the rubric does not have (``extra``: competency, key,
    met; counted, as the official counter counts whatever keys the evaluator returns)."""

    verdicts: dict[str, dict[str, Any]]
    reasoning: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    extra: list[dict[str, Any]] = Field(default_factory=list)


#: a key the rubric does not have, counted under its competency (``Evaluation.extra``), as a ballot's item
EXTRA = "extra:"


def evaluation_votes(evaluation: Evaluation) -> Verdicts:
    """A judge panel's reading of an evaluator reply (:mod:`bedside.panel`): each rubric item met or not, and each
    extra key counted under its competency."""
    return {
        **{item: bool(v["met"]) for item, v in evaluation.verdicts.items()},
        **{EXTRA + x["key"]: bool(x["met"]) for x in evaluation.extra},
    }


def evaluation_carry(answers: list[Evaluation], verdict: Verdicts) -> Evaluation:
    """The panel's verdict on every item some judge gave, with the evidence of a judge who gave it; the first
    judge's reasoning and notes."""
    verdicts: dict[str, dict[str, Any]] = {}
    extra: list[dict[str, Any]] = []
    for item, met in verdict.items():
        source = agreeing(answers, evaluation_votes, item, met)
        if item.startswith(EXTRA):
            extra.append({**next(x for x in source.extra if EXTRA + x["key"] == item), "met": met})
        else:
            verdicts[item] = {**source.verdicts[item], "met": met}
    return Evaluation(verdicts=verdicts, reasoning=answers[0].reasoning, notes=answers[0].notes, extra=extra)


#: the rubric items' verdicts count toward ``micro`` (all items pooled); ``macro`` and ``scenario_mean`` follow
EVALUATION_BALLOT = Ballot(votes=evaluation_votes, carry=evaluation_carry, key="micro")


def read_evaluation(text: str, items: Sequence[RubricItem], rule: str | None = None) -> Evaluation:
    """``strict``: every item id judged exactly once (missing ids make the reply unreadable:
    ``ValueError``). ``official`` (default): every key under ``items`` counts, as the official counter
    counts whatever keys the evaluator returns: a rubric id is that item's verdict, another key whose
    prefix is a competency (``PC.12``) is counted under it (``extra``), others are noted and not
    counted; left-out items leave the denominator. A reply with no verdict at all is unreadable."""
    if (rule or reading()) == "strict":
        reply = EVALUATOR.using(evaluator_reply([i.id for i in items])).read_json(text)[0]
        verdicts = reply.items.model_dump()
        return Evaluation(verdicts={i.id: verdicts[i.id] for i in items}, reasoning=reply.reasoning)
    ids = {i.id.upper(): i.id for i in items}
    for obj in json_objects(text):
        block = obj.get("items")
        if not isinstance(block, dict) or not block:
            continue
        found: dict[str, dict[str, Any]] = {}
        extra: list[dict[str, Any]] = []
        notes: list[str] = []
        for key, value in block.items():
            key_text = str(key).strip()
            if not key_text:
                continue
            met = coerce_bool(value.get("met") if isinstance(value, dict) else value)
            evidence = as_text(value.get("evidence")) if isinstance(value, dict) else ""
            item_id = ids.get(key_text.upper())
            competency = key_text.split(".")[0].strip().upper()
            if item_id is not None:
                found[item_id] = {"met": met, "evidence": evidence}
            elif competency in COMPETENCIES:
                extra.append({"key": key_text, "competency": competency, "met": met})
                notes.append(f"{key_text}: not in the rubric, counted under {competency} (official counter)")
            else:
                notes.append(f"{key_text}: not in the rubric and no competency, not counted")
        missing = [i.id for i in items if i.id not in found]
        if missing:
            notes.append(f"{len(missing)} rubric item(s) not judged, left out of the denominator: {missing[:10]}")
        if found or extra:
            return Evaluation(verdicts=found, reasoning=text_list(obj.get("reasoning")), notes=notes, extra=extra)
    raise ValueError(f"no rubric verdict under 'items' in the evaluator reply: {text[:160]!r}")


def read_official_evaluation(text: str, items: Sequence[RubricItem], rule: str | None = None) -> Evaluation:
    """Items keyed by their verbatim text under their competency. A key is matched to its item exactly,
    else with whitespace normalised, else under another competency (noted). ``strict``: items the reply
    leaves out make it unreadable (``ValueError``). ``official`` (default): as the official counter,
    left-out items leave the denominator and every other key under a competency is counted there
    (``extra``); a reply with no verdict at all is unreadable."""
    official = (rule or reading()) != "strict"
    reply = EVALUATOR.using(OfficialEvaluatorReply).read_json(text)[0]
    squash = lambda t: " ".join(str(t).split())  # noqa: E731
    verdicts: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for item in items:
        own: dict[str, bool] = getattr(reply, item.competency)
        value = own.get(item.text, own.get(item.text.strip()))
        if value is None:
            value = next((v for k, v in own.items() if squash(k) == squash(item.text)), None)
        if value is None:
            for c in COMPETENCIES:
                other = next((v for k, v in getattr(reply, c).items() if squash(k) == squash(item.text)), None)
                if other is not None:
                    value = other
                    notes.append(f"{item.id} judged under {c}")
                    break
        if value is not None:
            verdicts[item.id] = {"met": bool(value), "evidence": ""}
    missing = [i.id for i in items if i.id not in verdicts]
    if missing and not official:
        raise ValueError(f"{len(missing)} rubric item(s) not judged: {missing[:10]}")
    extra: list[dict[str, Any]] = []
    if official:
        used = {squash(i.text) for i in items if i.id in verdicts}
        for c in COMPETENCIES:
            for k, met in getattr(reply, c).items():
                if squash(k) and squash(k) not in used:
                    extra.append({"key": k, "competency": c, "met": bool(met)})
                    notes.append(f"{k[:60]!r}: not in the rubric, counted under {c} (official counter)")
        if missing:
            notes.append(f"{len(missing)} rubric item(s) not judged, left out of the denominator: {missing[:10]}")
        if not verdicts and not extra:
            raise ValueError("no rubric verdict in the evaluator reply")
    return Evaluation(verdicts=verdicts, reasoning=reply.reasoning, notes=notes, extra=extra)


# ---------------------------------------------------------------------------------------------
# test-time scaling


class Selection(BaseModel):
    """Best-of-N self-critic selector: the chosen candidate's 0-based index."""

    model_config = ConfigDict(extra="ignore")

    choice: int
    rationale: ReplyText = ""

    @field_validator("choice", mode="before")
    @classmethod
    def _choice(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            return int(v.strip())
        return v


class Vote(BaseModel):
    """A panel specialist's vote on the integrator's proposal (a missing ``agree`` counts as agreeing,
    as in the official code)."""

    model_config = ConfigDict(extra="ignore")

    agree: bool
    advice: str

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        v = v if isinstance(v, dict) else {}
        agree = v.get("agree")
        # official ``_as_bool(vpayload.get("agree", True))``: a missing or null vote agrees
        return {"agree": True if agree is None else coerce_bool(agree), "advice": as_text(v.get("advice"))}


# ---------------------------------------------------------------------------------------------
# protocols


# ---------------------------------------------------------------------------------------------
# readers (each protocol's parser; ValueError = unreadable, retried by bedside.calls.ask)


def speech_text(speak: Any) -> str:
    """Utterances joined one per line (official ``_format_speak_for_prompt``)."""
    if isinstance(speak, list):
        return "\n".join(str(s).strip() for s in speak if str(s).strip())
    return "" if speak is None else str(speak).strip()


def _read(protocol: Protocol, text: str, what: str) -> tuple[Any, bool]:
    try:
        return protocol.read_json(text)
    except ValueError as ex:
        raise ReplyParseError(f"{what} reply is unreadable ({ex}): {text[:200]!r}") from ex


def read_examinee(text: str) -> Reply:
    """``{"speak", "actions", "eos"}``, read as leniently as the official normalisation (missing fields are
    empty, a bare string action is one action); a reply without a JSON object is unreadable (retried)."""
    value, repaired = _read(EXAMINEE, text, "examinee")
    return Reply(message=value.speak or "(no speech)", raw=text, data=value.model_dump(), repaired=repaired)


def read_patient(text: str) -> Reply:
    value, repaired = _read(PATIENT, text, "SP")
    data = {**value.model_dump(), "warnings": value.prefix_warnings()}
    return Reply(message=speech_text(value.speak) or "(no reply)", raw=text, data=data, repaired=repaired)


def read_environment(text: str) -> Reply:
    value, repaired = _read(ENVIRONMENT, text, "environment")
    data = value.model_dump()
    return Reply(message="; ".join(value.feedback) or "(no feedback)", raw=text, data=data, repaired=repaired)


def read_selection(text: str) -> Reply:
    value, repaired = _read(BON_SELECTOR, text, "selector")
    return Reply(message=str(value.choice), raw=text, data=value.model_dump(), repaired=repaired)


#: the padding of a short specialty list (official ``_parse_domains``)
DEFAULT_DOMAIN = "General Medicine"


def parse_domains(text: str, k: int) -> list[str]:
    """The specialties of the panel from the examinee's one-line answer (official ``_parse_domains``): the
    text after the first ``:``, split on ``|`` ``,`` ``;`` or new lines, stripped of list markers, deduplicated
    (case-insensitively), cut to ``k`` and padded with "General Medicine", "General Medicine <i>"."""
    line = (text or "").strip()
    if ":" in line:
        line = line.split(":", 1)[1]
    domains: list[str] = []
    for part in re.split(r"\s*[|,;\n]\s*", line):
        name = part.strip().strip("-*0123456789. ").strip()
        if name and name.lower() not in {d.lower() for d in domains}:
            domains.append(name)
        if len(domains) >= k:
            break
    while len(domains) < k:
        domains.append(DEFAULT_DOMAIN if not domains else f"{DEFAULT_DOMAIN} {len(domains) + 1}")
    return domains[:k]


def read_domains(text: str, k: int) -> Reply:
    """The panel's specialties (``data["domains"]``, :func:`parse_domains`); an empty reply is unreadable."""
    reply = plain_text(text)
    reply.data = {"domains": parse_domains(reply.raw, k)}
    return reply


def panel_domains(k: int) -> Protocol:
    """``medsp.panel_domains`` reading a list of ``k`` specialties."""
    return PANEL_DOMAINS.using(parser=lambda text: read_domains(text, k))


def read_vote(text: str) -> Reply:
    value, repaired = _read(PANEL_VOTE, text, "vote")
    return Reply(message=str(value.agree), raw=text, data=value.model_dump(), repaired=repaired)


# ---------------------------------------------------------------------------------------------
# protocols

#: a person playing the examinee on ``bedside/human``'s page: each field's meaning as the examinee's own
#: prompt states it (prompts/medsp/examinee.j2), ``eos`` starting as false
EXAMINEE_FORM: dict[str, dict[str, Any]] = {
    "speak": {"label": "what you say", "help": "only the words you say aloud to the patient (or a companion)"},
    "actions": {
        "label": "what you do",
        "help": "examinations, monitoring, investigations, medications, procedures and other management; "
        "one per line (history questions go in what you say)",
    },
    "eos": {
        "label": "end of this stage (eos)",
        "help": "yes once everything the current stage of the case requires has been done: the case then "
        "moves on to its next stage, or, at its last stage, ends; no (the default) to carry on in this stage",
        "default": False,
        "send": "Send — this stage is done (eos)",
    },
}
#: agents: an unreadable reply (after the retries) ends the encounter with ``error`` (not evaluated)
EXAMINEE = Protocol("medsp.examinee", ExamineeReply, 512, parser=read_examinee, unreadable="error", form=EXAMINEE_FORM)
PATIENT = Protocol("medsp.patient", PatientReply, 384, parser=read_patient, unreadable="error")
ENVIRONMENT = Protocol("medsp.environment", EnvironmentReply, 1024, parser=read_environment, unreadable="error")
#: keyed per call (the prompt set's ``evaluator_protocol``); unreadable: the case is unscored and counted
EVALUATOR = Protocol("medsp.evaluator", EvaluatorReply, 4096, ballot=EVALUATION_BALLOT)
#: test-time scaling: an unreadable selection falls back to candidate 0, an unreadable vote agrees (as
#: upstream), an unreadable domain list or opinion is replaced by a default (all recorded)
BON_SELECTOR = Protocol("medsp.bon_selector", Selection, 256, parser=read_selection, unreadable="recorded")
PANEL_DOMAINS = Protocol("medsp.panel_domains", None, 96, parser=plain_text, unreadable="recorded")
PANEL_SPECIALIST = Protocol("medsp.panel_specialist", None, 384, parser=plain_text, unreadable="recorded")
PANEL_INTEGRATOR = Protocol("medsp.panel_integrator", ExamineeReply, 512, parser=read_examinee, unreadable="error")
PANEL_VOTE = Protocol("medsp.panel_vote", Vote, 256, parser=read_vote, unreadable="recorded")

#: the LLM checker of the simulated patient (role ``simulator_checker``, :mod:`bedside.simulator_checker`)
SIMULATOR_CHECKER = checker_protocol("medsp")

PROTOCOLS = (
    SIMULATOR_CHECKER,
    BON_SELECTOR,
    PANEL_DOMAINS,
    PANEL_SPECIALIST,
    PANEL_INTEGRATOR,
    PANEL_VOTE,
    EXAMINEE,
    PATIENT,
    ENVIRONMENT,
    EVALUATOR,
)
