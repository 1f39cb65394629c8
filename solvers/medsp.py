"""The MedSP1000 closed loop (paper arXiv 2606.05112, Sections 2.1, 4 and 5.5) as an Inspect solver.

Three agents run on :func:`bedside.solvers.encounter.run_encounter`, round by round::

    environment (opening scene) → examinee → patient → environment → examinee → patient → ...

- **examinee** — the model under test. Each turn it replies ``{"speak": str, "actions": [str],
  "eos": bool}``; ``eos`` ends the encounter (end reason ``examinee_end``).
- **patient** — role ``patient``: the standardized-patient actor, from the ``sp_actor`` packet;
  answers ``{"utterance": ...}`` whenever the examinee said something this turn.
- **environment** — role ``environment``: the environment controller, from the
  ``environment_controller`` packet. It opens the encounter (opening scene, team present) and,
  after every examinee turn, resolves the actions and advances the scenario, returning the
  in-world fields ``feedback``, ``events``, ``patient_status``, ``actors_present`` plus
  ``unsupported`` (out-of-scope actions with a rationale) and ``should_end`` (end reason
  ``environment_end``), under the rules of the paper's Section 5.5.1 (``prompts/medsp/``).

Turn cap: ``max_turns`` (default 12) counts *examinee* turns (the paper's T1, T2, ...). After the
last allowed examinee turn the patient answers and the environment resolves the actions, then the
encounter ends with ``max_turns``. A model failure ends it with ``error`` (what was accepted is
kept and still evaluated). There is no supervisor (the paper has none for MedSP1000).

Visibility (paper Section 4: the assessed model sees its own packet and what is revealed during
the interaction, never privileged or future information):

- the examinee sees its own packet, the patient's utterances and the environment's rendered
  in-world fields (plus ``unsupported``) — never the environment materials, the SP script, the
  evaluator packet or the rubric; fields an environment model adds beyond the schema are dropped;
- the patient sees its own script, what the examinee said and did, and the environment's
  ``patient_status`` (to portray the current condition) — never the evaluator packet or the rubric;
- the environment sees its own materials, the examinee's speech and actions and the patient's
  utterances;
- the evaluator packet and the rubric reach only the evaluator (:mod:`bedside.scorers.medsp`).

Test-time scaling (paper Section 2.6), ``scaling=``:

- ``"best_of_n"`` — :class:`BestOfNExaminee`: ``n`` independent samples of each examinee turn,
  the turn chosen by self-consistency (majority vote over the normalised action set and ``eos``;
  within the winning group the reply whose speech agrees most with the others). The paper runs
  each *case* five times and votes; the per-turn form is bedside issue 4's specification, which
  keeps one trajectory to evaluate.
- ``"panel"`` — :class:`PanelExaminee`: a multidisciplinary team. ``panel_size`` specialist
  personas (``prompts/medsp/panel.yaml``; the case's specialty first) each advise on the turn with
  the examinee's view; an integrator, seeing the same view plus the advice, emits the turn.

Everything is left in ``state.store`` (:class:`MedSPStore`) and shows in ``inspect view`` (one span
per turn with its model calls, ``INFO`` events for unreadable replies, role fallbacks and the end
reason). ``state.messages`` is the examinee's own final view of the encounter.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageSystem, ModelOutput, get_model
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import StoreModel, collect, store_as
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bedside.jsonreply import extract_json, lenient_bool
from bedside.prompts import load_yaml, render
from bedside.records.medsp import Scenario
from bedside.roles import role_model
from bedside.solvers.encounter import (
    ERROR,
    MAX_TURNS,
    ChatAgent,
    GenerationError,
    Reply,
    ReplyParseError,
    Turn,
    attempt_config,
    generate_checked,
    looks_like_prose,
    parse_utterance,
    run_encounter,
    utterance_json,
)

EXAMINEE_END = "examinee_end"
ENVIRONMENT_END = "environment_end"
END_REASONS = (EXAMINEE_END, ENVIRONMENT_END, MAX_TURNS, ERROR)
SCALING = ("none", "best_of_n", "panel")


class MedSPStore(StoreModel):
    """What one MedSP1000 encounter produced (``sample.store`` keys ``MedSPStore:*``)."""

    scenario: str = ""
    scaling: str = "none"
    max_turns: int = 0
    history: list[dict] = Field(default_factory=list)
    end_reason: str = ""
    error: str | None = None
    examinee_turns: int = 0
    unsupported_actions: int = 0
    role_fallbacks: list[str] = Field(default_factory=list)
    agent_stats: dict[str, dict[str, int]] = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# reply schemas and parsers


class ExamineeTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    speak: str = ""
    actions: list[str] = Field(default_factory=list)
    eos: bool = False

    @field_validator("speak", mode="before")
    @classmethod
    def _speak(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("actions", mode="before")
    @classmethod
    def _actions(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str):
            return [v]
        return v

    @field_validator("actions")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return [a.strip() for a in v if a.strip()]

    @field_validator("eos", mode="before")
    @classmethod
    def _eos(cls, v: Any) -> Any:
        return lenient_bool(v)


class Unsupported(BaseModel):
    action: str
    rationale: str = ""


class EnvironmentOutput(BaseModel):
    """The environment controller's reply (paper 5.5.1). Keys outside the schema are dropped, so no
    extra state an environment model writes can reach the other agents."""

    model_config = ConfigDict(extra="ignore")

    feedback: str = ""
    events: list[str] = Field(default_factory=list)
    patient_status: str = ""
    actors_present: list[str] = Field(default_factory=list)
    unsupported: list[Unsupported] = Field(default_factory=list)
    should_end: bool = False

    @field_validator("feedback", "patient_status", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("events", "actors_present", mode="before")
    @classmethod
    def _list(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str) else v

    @field_validator("unsupported", mode="before")
    @classmethod
    def _unsupported(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, (str, dict)):
            v = [v]
        return [{"action": x, "rationale": ""} if isinstance(x, str) else x for x in v]

    @field_validator("should_end", mode="before")
    @classmethod
    def _bool(cls, v: Any) -> Any:
        return lenient_bool(v)


def _errors(ex: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '<reply>'}: {e['msg']}" for e in ex.errors())


def parse_examinee(text: str) -> Reply:
    """``{"speak", "actions", "eos"}`` → a turn. Fenced or wrapped JSON, a string ``actions`` or a
    ``"true"`` ``eos`` are repaired (counted); a reply in plain prose is kept as speech with no
    actions (counted as repaired); a reply with nothing to say, do or end is unreadable (retried)."""
    found = extract_json(text, dict)
    if found is None:
        if looks_like_prose(text):
            turn = ExamineeTurn(speak=text.strip())
            return Reply(message=turn.speak, raw=text, data=turn.model_dump(), repaired=True)
        raise ReplyParseError(f"examinee reply is neither JSON nor prose: {text[:200]!r}")
    try:
        turn = ExamineeTurn.model_validate(found.value)
    except ValidationError as ex:
        raise ReplyParseError(f"examinee reply does not match the schema: {_errors(ex)}") from ex
    if not (turn.speak.strip() or turn.actions or turn.eos):
        raise ReplyParseError(f"examinee reply says nothing, takes no action and does not end: {text[:200]!r}")
    repaired = found.repaired or isinstance(found.value.get("actions"), str) or isinstance(found.value.get("eos"), str)
    reply = Reply(message=turn.speak.strip() or "(no speech)", raw=text, data=turn.model_dump(), repaired=repaired)
    if turn.eos:
        reply.ends_session = True
        reply.data["end_reason"] = EXAMINEE_END
    return reply


def parse_environment(text: str) -> Reply:
    """The environment controller's JSON (schema: :class:`EnvironmentOutput`); no prose fallback:
    its fields drive the simulation, so an unreadable reply is retried, then the encounter errors."""
    found = extract_json(text, dict)
    if found is None:
        raise ReplyParseError(f"environment reply has no JSON object: {text[:200]!r}")
    try:
        out = EnvironmentOutput.model_validate(found.value)
    except ValidationError as ex:
        raise ReplyParseError(f"environment reply does not match the schema: {_errors(ex)}") from ex
    if not (out.feedback.strip() or out.events or out.patient_status.strip() or out.unsupported or out.should_end):
        raise ReplyParseError(f"environment reply is empty: {text[:200]!r}")
    return Reply(message=out.feedback.strip() or "(no feedback)", raw=text, data=out.model_dump(), repaired=found.repaired)


# ---------------------------------------------------------------------------------------------
# views: how each agent sees the others' turns

ENV_FIELDS = tuple(EnvironmentOutput.model_fields)
EXAMINEE_FIELDS = ("speak", "actions", "eos")


def examinee_json(turn: Turn) -> str:
    return json.dumps({k: turn.data.get(k) for k in EXAMINEE_FIELDS}, ensure_ascii=False)


def environment_json(turn: Turn) -> str:
    return json.dumps({k: turn.data.get(k) for k in ENV_FIELDS}, ensure_ascii=False)


def environment_report(data: dict[str, Any], heading: str) -> str:
    """The in-world fields (and unsupported actions) as the examinee reads them."""
    lines = [heading, f"Feedback: {data.get('feedback') or '(nothing new)'}"]
    if data.get("events"):
        lines += ["Events:"] + [f"- {e}" for e in data["events"]]
    if data.get("patient_status"):
        lines.append(f"Patient status: {data['patient_status']}")
    lines.append(f"Team present: {', '.join(data.get('actors_present') or []) or 'none'}")
    if data.get("unsupported"):
        lines += ["Unsupported actions:"] + [
            f"- {u['action']}" + (f" ({u['rationale']})" if u.get("rationale") else "") for u in data["unsupported"]
        ]
    return "\n".join(lines)


def env_heading(turn: Turn) -> str:
    after = turn.data.get("after_turn", 0)
    return "[Environment: opening scene]" if not after else f"[Environment after your turn {after}]"


def examinee_sees(turn: Turn) -> str:
    if turn.role == "environment":
        return environment_report(turn.data, env_heading(turn))
    return f"[Patient] {turn.message}"


def patient_visible(turn: Turn) -> bool:
    return turn.role != "environment" or bool(turn.data.get("patient_status"))


def patient_sees(turn: Turn) -> str:
    if turn.role == "environment":
        return f"(Your current condition: {turn.data['patient_status']})"
    speak, actions = turn.data.get("speak") or "", turn.data.get("actions") or []
    parts = [f"[Clinician] {speak}" if speak else "[Clinician] (says nothing)"]
    if actions:
        parts.append(f"(The clinician's actions: {'; '.join(actions)})")
    return "\n".join(parts)


def examinee_block(turn: Turn, heading: str | None = None) -> str:
    actions = turn.data.get("actions") or []
    heading = heading or f"[Examinee turn {turn.data.get('turn', '?')}]"
    lines = [heading, f"Says: {turn.data.get('speak') or '(nothing)'}"]
    lines += ["Actions:"] + [f"- {a}" for a in actions] if actions else ["Actions: (none)"]
    if turn.data.get("eos"):
        lines.append("(The examinee ends the encounter.)")
    return "\n".join(lines)


def environment_sees(turn: Turn) -> str:
    if turn.role == "examinee":
        return examinee_block(turn)
    return f"[Patient] {turn.message}"


def examinee_turns(history: Sequence[Turn]) -> int:
    return sum(t.role == "examinee" for t in history)


def trajectory_text(history: Sequence[Turn]) -> str:
    """The full trajectory, every role, for the evaluator."""
    blocks: list[str] = []
    current = 0
    for turn in history:
        if turn.role == "examinee":
            current = turn.data.get("turn", current + 1)
            blocks.append(examinee_block(turn, f"[T{current} · examinee]"))
        elif turn.role == "patient":
            blocks.append(f"[T{current} · patient] {turn.message}")
        else:
            after = turn.data.get("after_turn", 0)
            heading = "[Opening scene · environment]" if not after else f"[T{after} · environment]"
            blocks.append(environment_report(turn.data, heading))
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------------------------------
# agents


def scenario_prompt(template: str, scenario: Scenario, role: str, **extra: Any) -> str:
    return render(template, packet=scenario.packet(role).text(), **extra)


@dataclass
class ExamineeAgent(ChatAgent):
    """The model under test; numbers its turns (``data["turn"]``) for the other agents' views."""

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        reply = await self.decide(history, correction, attempt)
        reply.data["turn"] = examinee_turns(history) + 1
        return reply

    async def decide(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        return await self.ask(self.messages(history, correction), attempt)


def normalise_action(action: str) -> str:
    """Lower case, punctuation dropped except inside doses and rates (``0.5``, ``mg/kg``, ``5%``)."""
    tokens = re.sub(r"[^a-z0-9.%/+-]+", " ", action.lower()).split()
    return " ".join(t for t in (tok.strip(".-/+") for tok in tokens) if t)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _agreement(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def self_consistency(candidates: Sequence[dict[str, Any]]) -> tuple[int, dict[str, int]]:
    """Index of the majority candidate and the vote count of every group.

    Candidates are grouped by their normalised action set and ``eos``; the largest group wins (a
    tie goes to the group that appeared first: candidate 0 is the model's default sample). Within
    it, the candidate whose speech agrees most with the group's other candidates (word Jaccard) is
    chosen (ties: the earliest)."""
    keys = [
        (tuple(sorted({normalise_action(a) for a in c.get("actions") or []})), bool(c.get("eos")))
        for c in candidates
    ]
    counts = Counter(keys)
    best = max(counts.values())
    winner = next(k for k in keys if counts[k] == best)
    members = [i for i, k in enumerate(keys) if k == winner]

    def support(i: int) -> float:
        return sum(_agreement(candidates[i].get("speak") or "", candidates[j].get("speak") or "") for j in members if j != i)

    chosen = max(members, key=lambda i: (support(i), -i))
    votes = {json.dumps({"actions": list(k[0]), "eos": k[1]}): v for k, v in counts.items()}
    return chosen, votes


@dataclass
class BestOfNExaminee(ExamineeAgent):
    """Best-of-N with a self-consistency choice (paper 2.6; per turn, see module docstring).

    Candidate ``i`` of attempt ``a`` is sampled with ``seed = (a * n + i) * (parse_retries + 1)``
    (candidate 0 of the first attempt with the model's own config), so candidates and their
    parse retries never share a seed. A candidate that stays unreadable is dropped (counted);
    the turn fails only when every candidate does."""

    n: int = 5

    async def decide(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        messages = self.messages(history, correction)
        stride = self.parse_retries + 1

        async def candidate(i: int) -> Reply | GenerationError:
            try:
                return await self.ask(messages, (attempt * self.n + i) * stride)
            except GenerationError as ex:
                return ex

        results = await collect(*(candidate(i) for i in range(self.n)))
        replies = [r for r in results if isinstance(r, Reply)]
        failed = [str(r) for r in results if isinstance(r, GenerationError)]
        self.stats["candidates_failed"] = self.stats.get("candidates_failed", 0) + len(failed)
        if not replies:
            raise GenerationError(f"examinee: all {self.n} best-of-n candidates failed: {failed[0]}")
        chosen, votes = self_consistency([r.data for r in replies])
        reply = replies[chosen]
        reply.data = dict(reply.data)
        reply.data["best_of_n"] = {
            "n": self.n,
            "candidates": [{k: r.data.get(k) for k in EXAMINEE_FIELDS} for r in replies],
            "votes": votes,
            "chosen": chosen,
            "failed": failed,
        }
        return reply


def panel_personas(size: int, specialty: str | None) -> list[dict[str, str]]:
    """The MDT: the case's specialty first (when known), then ``prompts/medsp/panel.yaml`` in order."""
    listed: list[dict[str, str]] = load_yaml("medsp/panel.yaml")["specialists"]
    panel: list[dict[str, str]] = []
    if specialty:
        own = next((p for p in listed if p["specialty"].lower() == specialty.lower()), None)
        panel.append(own or {"specialty": specialty, "focus": f"the core problems of {specialty} in this case"})
    panel += [p for p in listed if p["specialty"].lower() != (specialty or "").lower()]
    if size > len(panel):
        raise ValueError(f"panel_size={size} but only {len(panel)} specialist personas are defined (prompts/medsp/panel.yaml)")
    return panel[:size]


@dataclass
class PanelExaminee(ExamineeAgent):
    """Multidisciplinary-team consultation (paper 2.6): specialists advise, an integrator decides.

    Every specialist and the integrator see exactly the examinee's view (its packet and the
    encounter so far). Specialists answer in prose (a failed specialist call is recorded and the
    others still count); the integrator answers in the examinee's JSON format."""

    specialists: list[dict[str, str]] = field(default_factory=list)
    packet: str = ""
    max_turns: int = 12

    def _with_system(self, messages: list[ChatMessage], system: str) -> list[ChatMessage]:
        return [ChatMessageSystem(content=system), *messages[1:]]

    async def decide(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        async def advise(persona: dict[str, str]) -> dict[str, Any]:
            request = render("medsp/panel_request.j2", specialty=persona["specialty"])
            system = render("medsp/panel_specialist.j2", packet=self.packet, max_turns=self.max_turns, **persona)
            messages = self._with_system(self.messages(history, correction, extra_user=request), system)
            self.stats["panel_calls"] = self.stats.get("panel_calls", 0) + 1
            try:
                output = await generate_checked(self.model, messages, attempt_config(attempt))
            except GenerationError as ex:
                self.stats["panel_failed"] = self.stats.get("panel_failed", 0) + 1
                return {"specialty": persona["specialty"], "text": "(no advice: the call failed)", "error": str(ex)}
            return {"specialty": persona["specialty"], "text": output.completion.strip() or "(no advice)", "error": None}

        advice = await collect(*(advise(p) for p in self.specialists))
        system = render("medsp/panel_integrator.j2", packet=self.packet, max_turns=self.max_turns)
        handover = render("medsp/panel_advice.j2", advice=advice)
        messages = self._with_system(self.messages(history, correction, extra_user=handover), system)
        reply = await self.ask(messages, attempt)
        reply.data = dict(reply.data)
        reply.data["panel"] = advice
        return reply


@dataclass
class EnvironmentAgent(ChatAgent):
    """The environment controller; ends the encounter on ``should_end`` or after resolving the
    examinee's last allowed turn (``max_turns``)."""

    max_turns: int = 12

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        reply = await super().reply(history, correction, attempt)
        done = examinee_turns(history)
        reply.data["after_turn"] = done
        if reply.data.get("should_end"):
            reply.ends_session, reply.data["end_reason"] = True, ENVIRONMENT_END
        elif done >= self.max_turns:
            reply.ends_session, reply.data["end_reason"] = True, MAX_TURNS
        return reply


def patient_active(history: Sequence[Turn]) -> bool:
    """The SP answers when the examinee said something this turn."""
    return bool(history) and history[-1].role == "examinee" and bool((history[-1].data.get("speak") or "").strip())


def make_examinee(
    scenario: Scenario, scaling: str, *, max_turns: int, n: int, panel_size: int, parse_retries: int
) -> ExamineeAgent:
    common: dict[str, Any] = dict(
        role="examinee",
        model=get_model(),
        system_prompt=scenario_prompt("medsp/examinee.j2", scenario, "examinee", max_turns=max_turns),
        policy="none",
        parse=parse_examinee,
        render_own=examinee_json,
        render_other=examinee_sees,
        parse_retries=parse_retries,
    )
    if scaling == "none":
        return ExamineeAgent(**common)
    if scaling == "best_of_n":
        return BestOfNExaminee(**common, n=n)
    if scaling == "panel":
        return PanelExaminee(
            **common,
            specialists=panel_personas(panel_size, scenario.meta.specialty),
            packet=scenario.packet("examinee").text(),
            max_turns=max_turns,
        )
    raise ValueError(f"unknown scaling {scaling!r}; choose one of {list(SCALING)}")


def check_parameters(max_turns: int, scaling: str, n: int, panel_size: int) -> None:
    if scaling not in SCALING:
        raise ValueError(f"scaling={scaling!r}: choose one of {list(SCALING)}")
    if max_turns < 1:
        raise ValueError(f"max_turns={max_turns}: at least 1 examinee turn")
    if n < 1:
        raise ValueError(f"n={n}: best-of-n needs at least 1 sample")
    if panel_size < 1:
        raise ValueError(f"panel_size={panel_size}: the panel needs at least 1 specialist")
    if scaling == "panel":
        panel_personas(panel_size, None)


@solver
def medsp_encounter(
    max_turns: int = 12,
    scaling: str = "none",
    n: int = 5,
    panel_size: int = 5,
    parse_retries: int = 2,
):
    """Run one MedSP1000 scenario in closed loop (module docstring)."""
    check_parameters(max_turns, scaling, n, panel_size)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        scenario = Scenario.model_validate(state.metadata["scenario_record"])
        record = store_as(MedSPStore)
        record.scenario, record.scaling, record.max_turns = scenario.key, scaling, max_turns

        patient_model, patient_fallback = role_model("patient")
        env_model, env_fallback = role_model("environment")
        record.role_fallbacks = [r for r, fb in (("patient", patient_fallback), ("environment", env_fallback)) if fb]

        examinee = make_examinee(
            scenario, scaling, max_turns=max_turns, n=n, panel_size=panel_size, parse_retries=parse_retries
        )
        patient = ChatAgent(
            role="patient",
            model=patient_model,
            system_prompt=scenario_prompt("medsp/patient.j2", scenario, "sp_actor"),
            policy="none",
            parse=parse_utterance,
            sees=patient_visible,
            render_own=utterance_json,
            render_other=patient_sees,
            active=patient_active,
            parse_retries=parse_retries,
        )
        environment = EnvironmentAgent(
            role="environment",
            model=env_model,
            system_prompt=scenario_prompt("medsp/environment.j2", scenario, "environment_controller"),
            policy="none",
            parse=parse_environment,
            kickoff=render("medsp/environment_kickoff.j2"),
            render_own=environment_json,
            render_other=environment_sees,
            parse_retries=parse_retries,
            max_turns=max_turns,
        )
        # history cap as a safety net only: opening + 3 turns per examinee turn never exceed it
        result = await run_encounter([environment, examinee, patient], None, min_turns=0, max_turns=3 * max_turns + 2)

        record.history = [t.model_dump(mode="json") for t in result.history]
        record.end_reason = result.end_reason
        record.error = result.error
        record.examinee_turns = examinee_turns(result.history)
        record.unsupported_actions = sum(len(t.data.get("unsupported") or []) for t in result.history if t.role == "environment")
        record.agent_stats = {"examinee": examinee.stats, "patient": patient.stats, "environment": environment.stats}
        state.metadata["end_reason"] = result.end_reason

        state.messages = examinee.messages(result.history)
        last = next((t for t in reversed(result.history) if t.role == "examinee"), None)
        state.output = ModelOutput.from_content(model=str(examinee.model), content=examinee_json(last) if last else "")
        return state

    return solve
