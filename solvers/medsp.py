"""The MedSP1000 closed loop (paper arXiv 2606.05112, Sections 2.1, 4 and 5.5), following the official code
(MAGIC-AI4Med/MedSP1000, MIT licence, ``src/simulate/{controller,agents,test_time}.py``), as an Inspect solver.

Each turn runs three agents on :func:`bedside.solvers.encounter.run_encounter`, in the official order::

    examinee → SP (patient) → environment controller      (turn 1, 2, ... up to max_turns)

There is no call before the examinee's first turn (the official code makes none): the examinee starts
from its own packet.

- **examinee** — the model under test. It replies ``{"speak", "actions", "eos"}``. ``eos`` means "everything
  the *current state* requires has been done" (not "end the session"): the environment is told so and either
  advances the scenario by one state or, when no state is left, sets ``should_end``.
- **SP** (role ``patient``) — from the ``sp_actor`` packet; answers every turn (also when the examinee said
  nothing), with a *list* of utterances (the patient's without prefix, family or guardians as
  ``RoleName: words``) and the patient-side roles present (``actors_present``). A prefix naming a role that is
  not present is recorded as a warning, never enforced (as in the official code).
- **environment** (role ``environment``) — from the ``environment_controller`` packet; returns ``feedback``,
  ``events``, ``patient_status`` (in-story), ``actors_present`` (medical team), ``action_assessments`` (per
  action: ``executed`` / ``pending`` / ``unsupported`` with a rationale), ``progress_index``, ``state_label``,
  ``should_end`` and ``completion_reason``.

Scenario state (official ``SimulationState``, kept in :class:`SimState` and the store): ``progress_index`` and
the state label start at 0 / ``initial_assessment``; every environment reply's index (a non-negative integer)
and non-empty label are accepted, and a change is appended to ``phase_history``. As in the official code the
one-state-per-eos rule is the environment's (its prompt), not enforced; bedside records every departure
(an advance without eos, a skip of more than one state, a move back) in ``progression_anomalies``. There is no
predefined state list: "no state left" is the environment's ``should_end`` on an eos turn.

End reasons (checked after the environment has resolved the turn, so the last examinee turn is always answered
by the SP and resolved by the environment; the examinee never sees that last reply):

- ``scenario_complete`` — ``should_end`` on a turn where the examinee said ``eos`` (no state left);
- ``environment_end`` — ``should_end`` on any other turn (the official code obeys it whatever ``eos`` was);
- ``max_turns`` — the examinee has had ``max_turns`` turns (official default 12, all states together);
- ``error`` — a model failure or a reply that stayed unreadable after ``parse_retries`` fresh samples (the
  official code crashes and the scenario has no result; bedside keeps the sample, which the scorer leaves
  unscored and counts as ``erroneous``).

What each agent sees (official ``controller.py``; every agent keeps its own chat: its system prompt, then each
turn's user message and its raw reply):

- the examinee: its packet, and each turn the case title (the case folder's name), the current patient status,
  the current state label, the latest environment ``events`` and ``feedback`` (titled "changed" when the
  environment reported anything or moved the state) and the SP's latest utterances. Never the turn budget,
  action statuses or rationales, ``actors_present``, ``completion_reason``, other packets or the rubric;
- the SP: its packet, the examinee's words this turn and the last four completed turn records (the examinee's
  words and actions, the environment's interpretation of the actions, the SP's own words, the environment's
  feedback and events; never statuses or rationales);
- the environment: its packet, the current status, progress index and label, the examinee's words, the SP's
  answer this turn, the examinee's actions (a JSON list) and, on an ``eos`` turn, the signal to advance or end;
- the evaluator (:mod:`bedside.scorers.medsp`): the frozen rubric, the transcript, the action log (with
  statuses and rationales) and a state summary; never the evaluator packet.

Prompts: bedside's own wording (``prompts/medsp/``) by default; with ``prompts=PATH`` (a clone of the official
repository) the official texts are loaded from its ``src/simulate/`` (:func:`load_prompt_set`). Packets are
shown as the official code compiles them (file headers, struck-through text removed; see
:meth:`bedside.records.medsp.RolePacket.text`).

Test-time scaling (official ``test_time.py``), ``scaling=``:

- ``"single"`` — the control of the official scaling runs: one examinee sample at temperature 0.
- ``"best_of_n"`` — :class:`BestOfNExaminee`: each turn ``n`` (5) candidates from the examinee's full chat at
  temperature 0.8; the examinee model picks one at temperature 0 seeing only its system prompt, this turn's
  prompt and the candidates (``{"choice", "rationale"}``; an unreadable or out-of-range choice falls back to
  candidate 0, recorded). Only the chosen reply enters the examinee's chat. ``bon_selector="majority"`` keeps
  bedside's earlier self-consistency vote instead of the selector call.
- ``"panel"`` — :class:`PanelExaminee` (the official "medagents"): ``panel_size`` (5) specialties chosen once
  per case by the examinee model (temperature 0, from its packet; padded with "General Medicine"); each turn
  every specialist gives a free-text opinion (examinee system prompt plus a specialist overlay, this turn's
  prompt, no history, temperature 0.8); the examinee model integrates them with its full chat (temperature 0);
  the specialists then vote on the proposal (temperature 0; an unreadable vote counts as agreement) and any
  disagreement with advice triggers one revision (``panel_rounds`` = 1). Only the final reply enters the
  examinee's chat.

With any scaling the SP and the environment run at temperature 0 (official ``fixed_temperature``); without,
no temperature is set for any role (the provider's default, as in the official code). Candidates, opinions,
votes, selections and fallbacks are kept in each examinee turn's ``data`` (``best_of_n`` / ``panel``), in the
store and as ``INFO`` events.

Everything is left in ``state.store`` (:class:`MedSPStore`); ``state.messages`` is the examinee's own chat.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from inspect_ai.log import transcript
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    ModelOutput,
    get_model,
)
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import StoreModel, collect, store_as
from pydantic import BaseModel, Field

from bedside.paths import user_path
from bedside.prompts import load_yaml, render
from bedside.protocols import Protocol, reading
from bedside.protocols.medsp import (
    BON_SELECTOR,
    ENVIRONMENT,
    EVALUATOR,
    EXAMINEE,
    DEFAULT_DOMAIN,
    PANEL_INTEGRATOR,
    PANEL_SPECIALIST,
    PANEL_VOTE,
    PATIENT,
    OfficialEvaluatorReply,
    evaluator_reply,
    panel_domains,
    speech_text,
    as_text,
    coerce_bool,
    text_list,
)
from bedside.records.medsp import COMPETENCIES, COMPETENCY_NAMES, RolePacket, RubricItem, Scenario
from bedside.roles import role_model
from bedside.solvers.encounter import (
    ERROR,
    MAX_TURNS,
    ChatAgent,
    GenerationError,
    Reply,
    Turn,
    run_encounter,
)

SCENARIO_COMPLETE = "scenario_complete"
ENVIRONMENT_END = "environment_end"
END_REASONS = (SCENARIO_COMPLETE, ENVIRONMENT_END, MAX_TURNS, ERROR)
SCALING = ("none", "single", "best_of_n", "panel")
SELECTORS = ("self_critic", "majority")

#: official ``TestTimeConfig``: candidates and specialists' opinions are sampled at 0.8; everything else
#: of a scaled run (selector, integrator, votes, specialty choice, SP, environment) at 0
CANDIDATE_TEMPERATURE = 0.8
FIXED_TEMPERATURE = 0.0
#: official initial state (``runtime_hints``): the state label and the status before any assessment
INITIAL_STATE = "initial_assessment"
INITIAL_STATUS = "Not assessed"


class MedSPStore(StoreModel):
    """What one MedSP1000 encounter produced (``sample.store`` keys ``MedSPStore:*``)."""

    scenario: str = ""
    scaling: str = "none"
    max_turns: int = 0
    prompts: str = "bedside"
    history: list[dict] = Field(default_factory=list)  # every accepted Turn (examinee, patient, environment)
    sim_state: dict = Field(default_factory=dict)  # SimState: transcript, action log, turns, phase history, ...
    progress_index: int = 0  # the scenario state reached (also in sim_state)
    state_label: str = ""
    phase_history: list[str] = Field(default_factory=list)  # "<index>:<label>" of every state entered
    end_reason: str = ""
    error: str | None = None
    examinee_turns: int = 0
    action_statuses: dict[str, int] = Field(default_factory=dict)  # executed / pending / unsupported
    unsupported_actions: int = 0
    progression_anomalies: list[dict] = Field(default_factory=list)
    panel_domains: list[str] = Field(default_factory=list)
    panel_domain_selection: dict = Field(default_factory=dict)
    role_fallbacks: list[str] = Field(default_factory=list)
    agent_stats: dict[str, dict[str, int]] = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# the scenario state (official field names, so that the official prompt builders can read it)


@dataclass
class TurnRecord:
    """One completed turn (official ``sim_types.TurnRecord``; the SP sees the last four)."""

    turn_index: int
    phase_id: str
    progress_index: int
    minutes_since_encounter: int
    minutes_since_ingestion: int
    examinee_speak: str
    examinee_actions: list[str]
    canonical_actions: list[str]
    sp_speak: list[str]
    environment_feedback: list[str]
    environment_events: list[str]


@dataclass
class SimState:
    """The encounter's state (official ``SimulationState``). The minutes are never advanced, as in the
    official code (they are kept only so that the official prompt builders find them)."""

    current_phase_id: str = INITIAL_STATE
    progress_index: int = 0
    total_turns: int = 0
    phase_turns: int = 0
    minutes_since_encounter: int = 0
    minutes_since_ingestion: int = 0
    patient_status: str = INITIAL_STATUS
    completion_reason: str = ""
    transcript: list[dict] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    action_history: list[dict] = field(default_factory=list)
    phase_history: list[str] = field(default_factory=list)
    latest_patient_speak: list[str] = field(default_factory=list)
    latest_environment_feedback: list[str] = field(default_factory=list)
    latest_environment_events: list[str] = field(default_factory=list)
    latest_state_changed: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimState:
        data = dict(data)
        data["turns"] = [TurnRecord(**t) for t in data.get("turns", [])]
        return cls(**data)


def evaluation_summary(case_id: str, case_title: str, state: SimState) -> dict[str, Any]:
    """The evaluator's state summary (the official keys, without the never-advanced minutes)."""
    return {
        "case_id": case_id,
        "case_title": case_title,
        "phase_history": state.phase_history,
        "progress_index": state.progress_index,
        "current_state_label": state.current_phase_id,
        "patient_status": state.patient_status,
        "total_turns": state.total_turns,
        "completion_reason": state.completion_reason,
    }


class Evaluation(BaseModel):
    """One evaluator reply, read: item id -> {met, evidence}, the reasoning, and items matched loosely.
    Under the official reading (``-T reading=official``, the default) the reply may leave items out (they
    leave the case's denominator) and may add keys the rubric does not have (``extra``: competency, key,
    met; counted, as the official counter counts whatever keys the evaluator returns)."""

    verdicts: dict[str, dict[str, Any]]
    reasoning: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    extra: list[dict[str, Any]] = Field(default_factory=list)


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a reply, the model's own (last) first."""
    from bedside.jsonreply import extract_json_all

    found = extract_json_all(text, dict)
    if not found:
        raise ValueError(f"no JSON object in the evaluator reply: {text[:160]!r}")
    return [f.value for f in reversed(found)]


# ---------------------------------------------------------------------------------------------
# prompt sets: bedside's own wording (default) or the official texts from a clone (prompts=PATH)


class BedsidePrompts:
    """bedside's own wording (``prompts/medsp/``), with the information content of the official prompts."""

    name = "bedside"

    @staticmethod
    def texts() -> dict[str, str]:
        return load_yaml("medsp/texts.yaml")

    # system prompts
    def examinee_system(self, scenario: Scenario) -> str:
        return render("medsp/examinee.j2", packet=scenario.examinee.text())

    def patient_system(self, scenario: Scenario) -> str:
        return render("medsp/patient.j2", packet=scenario.sp_actor.text())

    def environment_system(self, scenario: Scenario) -> str:
        return render("medsp/environment.j2", packet=scenario.environment_controller.text())

    def evaluator_system(self, items: Sequence[RubricItem]) -> str:
        blocks = [
            {"competency": c, "name": COMPETENCY_NAMES[c], "entries": [i for i in items if i.competency == c]}
            for c in COMPETENCIES
        ]
        return render("medsp/evaluator_system.j2", rubric=blocks, n_items=len(items))

    # state texts
    def first_feedback(self) -> str:
        return self.texts()["first_feedback"]

    def opening_context(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.texts()["opening_context"].format(case_title=case_title, patient_status=state.patient_status or "unknown")

    # per-turn user messages
    def examinee_turn(self, case_id: str, case_title: str, state: SimState) -> str:
        return render(
            "medsp/examinee_turn.j2",
            case_title=case_title,
            patient_status=state.patient_status or "unknown",
            state_label=state.current_phase_id,
            changed=state.latest_state_changed,
            events=state.latest_environment_events,
            feedback=state.latest_environment_feedback,
            patient_speech=speech_text(state.latest_patient_speak) or self.texts()["no_patient_speech"],
        )

    def patient_turn(self, case_id: str, case_title: str, state: SimState, speech: str) -> str:
        recent = json.dumps([asdict(t) for t in state.turns[-4:]], ensure_ascii=False, indent=2)
        return render("medsp/patient_turn.j2", speech=speech or self.texts()["no_clinician_speech"], recent_turns=recent)

    def environment_turn(
        self, case_id: str, case_title: str, state: SimState, speech: str, actions: list[str], patient_speak: list[str], eos: bool
    ) -> str:
        return render(
            "medsp/environment_turn.j2",
            patient_status=state.patient_status or INITIAL_STATUS,
            eos=eos,
            progress_index=state.progress_index,
            state_label=state.current_phase_id,
            speech=speech or self.texts()["no_speech"],
            patient_speech=speech_text(patient_speak),
            actions_json=json.dumps(actions, ensure_ascii=False, indent=2),
        )

    def evaluator_user(self, case_id: str, case_title: str, state: SimState) -> str:
        return render(
            "medsp/evaluator_user.j2",
            transcript=json.dumps(state.transcript, ensure_ascii=False, indent=2),
            action_log=json.dumps(state.action_history, ensure_ascii=False, indent=2),
            summary=json.dumps(evaluation_summary(case_id, case_title, state), ensure_ascii=False, indent=2),
        )

    # the evaluator's reply
    def evaluator_protocol(self, items: Sequence[RubricItem]) -> Protocol:
        return EVALUATOR.using(
            evaluator_reply([i.id for i in items]),
            parser=lambda text: self.read_evaluation(text, items, "official"),
            strict=lambda text: self.read_evaluation(text, items, "strict"),
        )

    def read_evaluation(self, text: str, items: Sequence[RubricItem], rule: str | None = None) -> Evaluation:
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
        for obj in _objects(text):
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

    # test-time scaling
    def selector(self, turn_prompt: str, candidates: list[dict[str, Any]]) -> str:
        return render("medsp/bon_selector.j2", turn_prompt=turn_prompt, candidates=candidates)

    def domains(self, k: int) -> str:
        return render("medsp/panel_domains.j2", k=k, fields=" | ".join(f"Specialty {i + 1}" for i in range(k)))

    def specialist(self, domain: str, turn_prompt: str) -> tuple[str, str]:
        return (render("medsp/panel_specialist_overlay.j2", domain=domain),
                render("medsp/panel_specialist.j2", domain=domain, turn_prompt=turn_prompt))  # fmt: skip

    def integrator(self, turn_prompt: str, opinions: dict[str, str], revision: str) -> str:
        return render("medsp/panel_integrator.j2", turn_prompt=turn_prompt, opinions=opinions, revision=revision)

    def vote(self, domain: str, proposal: dict[str, Any]) -> tuple[str, str]:
        return (render("medsp/panel_vote_overlay.j2", domain=domain),
                render("medsp/panel_vote.j2", domain=domain, speak=proposal.get("speak"),
                       actions=proposal.get("actions") or [], eos=bool(proposal.get("eos"))))  # fmt: skip

    def revision_note(self, advice: dict[str, str]) -> str:
        return render("medsp/panel_revision.j2", advice=advice)


class OfficialPromptsError(ValueError):
    """``prompts=PATH`` does not point to a usable clone of the official repository."""


#: what bedside reads from a clone of MAGIC-AI4Med/MedSP1000 (``src/simulate/``)
OFFICIAL_PROMPT_FUNCTIONS = (
    "build_examinee_system_prompt", "build_sp_system_prompt", "build_environment_system_prompt",
    "build_evaluator_system_prompt_frozen_rubric", "build_tts_domain_selection_prompt",
    "build_tts_expert_analysis_prompt", "build_tts_synthesis_prompt", "build_tts_consensus_prompt",
    "build_tts_revision_note", "build_tts_selector_prompt",
)
OFFICIAL_CONTROLLER_METHODS = (
    "_opening_context", "_recent_turns", "_build_examinee_prompt", "_build_sp_prompt",
    "_build_environment_prompt", "_build_evaluator_prompt",
)
OFFICIAL_CONTROLLER_FUNCTIONS = ("_format_speak_for_prompt",)
OFFICIAL_TEST_TIME_FUNCTIONS = ("_action_to_text",)
OFFICIAL_CONTROLLER_CLASS = "SimulationController"


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _definitions(path: Path, names: Sequence[str], *, methods_of: str | None = None, methods: Sequence[str] = ()) -> dict[str, Any]:
    """The named functions (and, of class ``methods_of``, the named methods, as plain functions) of a
    Python file, with every top-level literal constant and helper function they may use. Only these
    definitions are executed, never the module itself (its imports and other statements are left out)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as ex:
        raise OfficialPromptsError(f"prompts: cannot read {path}: {ex}") from ex
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    constants: dict[str, ast.stmt] = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and _literal(n.value):
            constants.update({t.id: n for t in n.targets if isinstance(t, ast.Name)})
        elif isinstance(n, ast.AnnAssign) and n.value is not None and _literal(n.value) and isinstance(n.target, ast.Name):
            constants[n.target.id] = n
    picked: list[ast.FunctionDef] = [functions[name] for name in names if name in functions]
    if methods_of:
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == methods_of), None)
        for node in cls.body if cls is not None else []:
            if isinstance(node, ast.FunctionDef) and node.name in methods:
                node.decorator_list = []
                picked.append(node)
    # the module-level helpers and literal constants the picked functions use (transitively)
    needed: list[ast.stmt] = []
    queue: list[ast.AST] = list(picked)
    seen: set[str] = set()
    while queue:
        for ref in ast.walk(queue.pop()):
            if isinstance(ref, ast.Name) and ref.id not in seen:
                seen.add(ref.id)
                found = functions.get(ref.id) or constants.get(ref.id)
                if found is not None and found not in needed and found not in picked:
                    needed.append(found)
                    queue.append(found)
    body: list[ast.stmt] = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    body += [n for n in tree.body if n in needed or n in picked]  # in file order
    body += [n for n in picked if n not in tree.body]  # the methods
    namespace: dict[str, Any] = {
        "__builtins__": builtins, "__name__": f"bedside_official_{path.stem}",
        "json": json, "re": re, "asdict": asdict, "Any": Any, "Path": Path,
    }
    exec(compile(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])), str(path), "exec"), namespace)  # noqa: S102
    missing = [n for n in (*names, *methods) if n not in namespace]
    if missing:
        raise OfficialPromptsError(f"prompts: {path} lacks {', '.join(missing)} (is it the official MedSP1000 code?)")
    return namespace


def _initial_feedback(path: Path) -> str | None:
    """The official placeholder feedback of the first turn (``SimulationController.__init__``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "latest_environment_feedback" and isinstance(node.value, ast.List):
            texts = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if texts:
                return texts[0]
    return None


class _Bundle:
    """What the official prompt builders expect of a role bundle."""

    def __init__(self, packet: RolePacket) -> None:
        self.packet = packet

    def compiled_text(self, strip_strikethrough: bool = True) -> str:
        return self.packet.compiled_text(strip_strikethrough=strip_strikethrough)


class OfficialPrompts(BedsidePrompts):
    """The official prompt texts, read from a clone of MAGIC-AI4Med/MedSP1000 (MIT licence): the system and
    test-time prompts of ``src/simulate/prompts.py``, the per-turn messages of ``controller.py``
    (``SimulationController._build_*_prompt``, run on :class:`SimState`) and ``test_time._action_to_text``.
    The official evaluator reply (items keyed by verbatim text under their competency) is read with
    :class:`OfficialEvaluatorReply`."""

    def __init__(self, source: Path) -> None:
        folder = source / "src" / "simulate" if (source / "src" / "simulate").is_dir() else source
        files = {stem: folder / f"{stem}.py" for stem in ("prompts", "controller", "test_time")}
        absent = [str(p) for p in files.values() if not p.is_file()]
        if absent:
            raise OfficialPromptsError(
                f"prompts={str(source)!r}: not a clone of the official MedSP1000 repository; missing {', '.join(absent)} "
                "(give the repository root or its src/simulate folder)"
            )
        self.name = str(source)
        self.fns = _definitions(files["prompts"], OFFICIAL_PROMPT_FUNCTIONS)
        controller = _definitions(files["controller"], OFFICIAL_CONTROLLER_FUNCTIONS, methods_of=OFFICIAL_CONTROLLER_CLASS,
                                  methods=OFFICIAL_CONTROLLER_METHODS)  # fmt: skip
        self.fns.update({n: controller[n] for n in OFFICIAL_CONTROLLER_FUNCTIONS})
        self.controller_class = type("OfficialController", (), {m: controller[m] for m in OFFICIAL_CONTROLLER_METHODS})
        self.fns.update(_definitions(files["test_time"], OFFICIAL_TEST_TIME_FUNCTIONS))
        self.placeholder = _initial_feedback(files["controller"])

    def controller(self, case_id: str, case_title: str, state: SimState) -> Any:
        obj = self.controller_class()
        obj.state = state
        obj.case = type("Case", (), {"case_id": case_id, "case_title": case_title})()
        return obj

    def examinee_system(self, scenario: Scenario) -> str:
        return self.fns["build_examinee_system_prompt"](None, _Bundle(scenario.examinee))

    def patient_system(self, scenario: Scenario) -> str:
        return self.fns["build_sp_system_prompt"](None, _Bundle(scenario.sp_actor))

    def environment_system(self, scenario: Scenario) -> str:
        return self.fns["build_environment_system_prompt"](None, _Bundle(scenario.environment_controller))

    def evaluator_system(self, items: Sequence[RubricItem]) -> str:
        rubric = {c: [i.text for i in items if i.competency == c] for c in COMPETENCIES}
        return self.fns["build_evaluator_system_prompt_frozen_rubric"](rubric)

    def first_feedback(self) -> str:
        return self.placeholder or super().first_feedback()

    def opening_context(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.controller(case_id, case_title, state)._opening_context()

    def examinee_turn(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.controller(case_id, case_title, state)._build_examinee_prompt()

    def patient_turn(self, case_id: str, case_title: str, state: SimState, speech: str) -> str:
        return self.controller(case_id, case_title, state)._build_sp_prompt(speech)

    def environment_turn(
        self, case_id: str, case_title: str, state: SimState, speech: str, actions: list[str], patient_speak: list[str], eos: bool
    ) -> str:
        return self.controller(case_id, case_title, state)._build_environment_prompt(speech, actions, {"speak": patient_speak}, eos=eos)

    def evaluator_user(self, case_id: str, case_title: str, state: SimState) -> str:
        return self.controller(case_id, case_title, state)._build_evaluator_prompt()

    def evaluator_protocol(self, items: Sequence[RubricItem]) -> Protocol:
        return EVALUATOR.using(
            OfficialEvaluatorReply,
            parser=lambda text: self.read_evaluation(text, items, "official"),
            strict=lambda text: self.read_evaluation(text, items, "strict"),
        )

    def read_evaluation(self, text: str, items: Sequence[RubricItem], rule: str | None = None) -> Evaluation:
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

    def selector(self, turn_prompt: str, candidates: list[dict[str, Any]]) -> str:
        shaped = [{"index": c["index"], "normalized": {k: c[k] for k in ("speak", "actions", "eos")}} for c in candidates]
        return self.fns["build_tts_selector_prompt"](turn_prompt, shaped)

    def domains(self, k: int) -> str:
        return self.fns["build_tts_domain_selection_prompt"](k)

    def specialist(self, domain: str, turn_prompt: str) -> tuple[str, str]:
        return self.fns["build_tts_expert_analysis_prompt"](domain, turn_prompt)

    def integrator(self, turn_prompt: str, opinions: dict[str, str], revision: str) -> str:
        return self.fns["build_tts_synthesis_prompt"](turn_prompt, opinions, revision)

    def vote(self, domain: str, proposal: dict[str, Any]) -> tuple[str, str]:
        return self.fns["build_tts_consensus_prompt"](domain, self.fns["_action_to_text"](proposal))

    def revision_note(self, advice: dict[str, str]) -> str:
        return self.fns["build_tts_revision_note"](advice)


PromptSet = BedsidePrompts


@lru_cache(maxsize=8)
def _official(path: str) -> OfficialPrompts:
    return OfficialPrompts(Path(path))


def load_prompt_set(prompts: str | None) -> PromptSet:
    """bedside's wording (``None`` or ``"bedside"``), or the official texts from the clone at ``prompts``
    (a relative path is read against the shell's working directory, :func:`bedside.paths.user_path`)."""
    if prompts in (None, "", "bedside"):
        return BedsidePrompts()
    return _official(str(user_path(str(prompts))))




# ---------------------------------------------------------------------------------------------
# the session: the official controller's bookkeeping


@dataclass
class Session:
    """The scenario, the prompt set and the :class:`SimState` shared by the three agents."""

    scenario: Scenario
    prompts: PromptSet
    max_turns: int
    state: SimState = field(default_factory=SimState)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.state.latest_environment_feedback = [self.prompts.first_feedback()]
        self.state.phase_history.append(f"{self.state.progress_index}:{self.state.current_phase_id}")
        self.state.transcript.append(
            {"role": "system", "type": "opening_context", "content": self.prompts.opening_context(*self.case, self.state)}
        )

    @property
    def case(self) -> tuple[str, str]:
        """(case id, case title): the official case title is the case folder's name."""
        return self.scenario.case_id, self.scenario.case_id

    def examinee_prompt(self) -> str:
        return self.prompts.examinee_turn(*self.case, self.state)

    def patient_prompt(self, speech: str) -> str:
        return self.prompts.patient_turn(*self.case, self.state, speech)

    def environment_prompt(self, exam: dict[str, Any], patient: dict[str, Any]) -> str:
        return self.prompts.environment_turn(*self.case, self.state, exam["speak"], exam["actions"], patient["speak"], exam["eos"])

    def resolve(self, exam: dict[str, Any], patient: dict[str, Any], env: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        """The environment's reply applied as the official controller does (action log, state update, turn
        record); returns the end reason (or None) and what this turn changed."""
        s = self.state
        turn = s.total_turns
        logged = self._log_actions(turn, exam["actions"], env["action_assessments"])
        before = (s.progress_index, s.current_phase_id)
        if env["patient_status"]:
            s.patient_status = env["patient_status"]
        if env["progress_index"] is not None:
            s.progress_index = env["progress_index"]
        if env["state_label"]:
            s.current_phase_id = env["state_label"]
        moved = (s.progress_index, s.current_phase_id) != before
        if moved:
            s.phase_history.append(f"{s.progress_index}:{s.current_phase_id}")
            self._check_progression(turn, before, bool(exam["eos"]))
        s.latest_state_changed = bool(env["events"]) or bool(env["feedback"]) or moved
        if env["should_end"]:
            s.completion_reason = env["completion_reason"]
        s.turns.append(
            TurnRecord(
                turn_index=turn, phase_id=s.current_phase_id, progress_index=s.progress_index,
                minutes_since_encounter=s.minutes_since_encounter, minutes_since_ingestion=s.minutes_since_ingestion,
                examinee_speak=exam["speak"], examinee_actions=list(exam["actions"]),
                canonical_actions=[a["interpreted_action"] for a in env["action_assessments"] if a["interpreted_action"]],
                sp_speak=list(patient["speak"]), environment_feedback=list(env["feedback"]),
                environment_events=list(env["events"]),
            )  # fmt: skip
        )
        s.transcript += [
            {"role": "examinee", "content": exam["speak"]},
            {"role": "examinee_actions", "content": list(exam["actions"])},
            {"role": "sp", "content": list(patient["speak"])},
            {"role": "environment", "content": list(env["feedback"])},
        ]
        if env["events"]:
            s.transcript.append({"role": "system_event", "content": list(env["events"])})
        s.latest_patient_speak = list(patient["speak"])
        s.latest_environment_feedback = list(env["feedback"])
        s.latest_environment_events = list(env["events"])
        end: str | None = None
        if env["should_end"]:
            end = SCENARIO_COMPLETE if exam["eos"] else ENVIRONMENT_END
        elif s.total_turns >= self.max_turns:
            end = MAX_TURNS
        info = {
            "progress_index_after": s.progress_index, "state_label_after": s.current_phase_id,
            "patient_status_after": s.patient_status, "state_moved": moved, "action_log": logged,
        }  # fmt: skip
        transcript().info(
            {"turn": turn, "eos": bool(exam["eos"]), "state": f"{s.progress_index}:{s.current_phase_id}", "moved": moved,
             "actions": {a["raw"]: a["status"] for a in logged}, "should_end": env["should_end"], "end": end},
            source="medsp_environment",
        )  # fmt: skip
        return end, info

    def _log_actions(self, turn: int, actions: list[str], assessments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each action's assessment (official ``_record_action_history``): by its exact text, else the i-th
        assessment without a ``raw``, else ``unsupported`` with an empty rationale."""
        by_raw = {a["raw"]: a for a in assessments if a["raw"]}
        unnamed = [a for a in assessments if not a["raw"]]
        logged = []
        for i, action in enumerate(actions):
            found = by_raw.get(action) or (unnamed[i] if i < len(unnamed) else None)
            entry = {
                "turn": turn,
                "raw": action,
                "canonical_id": (found or {}).get("interpreted_action") or None,
                "status": (found or {}).get("status", "unsupported"),
                "rationale": (found or {}).get("rationale", ""),
            }
            self.state.action_history.append(entry)
            self.statuses[entry["status"]] += 1
            logged.append(entry)
        return logged

    def _check_progression(self, turn: int, before: tuple[int, str], eos: bool) -> None:
        """Record (never enforce, as the official code) departures from the one-state-per-eos rule."""
        after = self.state.progress_index
        kinds = []
        if not eos:
            kinds.append("moved_without_eos")
        if after > before[0] + 1:
            kinds.append("skipped_states")
        if after < before[0]:
            kinds.append("moved_back")
        for kind in kinds:
            self.anomalies.append({"turn": turn, "kind": kind, "from": f"{before[0]}:{before[1]}",
                                   "to": f"{after}:{self.state.current_phase_id}"})  # fmt: skip


# ---------------------------------------------------------------------------------------------
# agents


@dataclass
class MedSPAgent(ChatAgent):
    """A MedSP agent: its own chat (system prompt, then each turn's user message and raw reply)."""

    session: Session | None = None

    def chat(self, history: Sequence[Turn], prompt: str | None = None) -> list[ChatMessage]:
        messages: list[ChatMessage] = [ChatMessageSystem(content=self.system_prompt)]
        for turn in history:
            if turn.role == self.role:
                messages += [ChatMessageUser(content=turn.data["prompt"]), ChatMessageAssistant(content=turn.raw)]
        if prompt is not None:
            messages.append(ChatMessageUser(content=prompt))
        return messages

    @property
    def prompts(self) -> PromptSet:
        assert self.session is not None
        return self.session.prompts


@dataclass
class ExamineeAgent(MedSPAgent):
    """The model under test (one sample per turn)."""

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        assert self.session is not None
        s = self.session.state
        s.total_turns += 1  # the official controller counts the turn before building its prompt
        s.phase_turns += 1
        prompt = self.session.examinee_prompt()
        reply = await self.decide(history, prompt, attempt)
        reply.data = {**reply.data, "turn": s.total_turns, "prompt": prompt,
                      "progress_index": s.progress_index, "state_label": s.current_phase_id}  # fmt: skip
        return reply

    async def decide(self, history: Sequence[Turn], prompt: str, attempt: int) -> Reply:
        return await self.ask(self.chat(history, prompt), attempt)


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
    """``bon_selector="majority"`` (bedside's earlier choice, not the official one): the index of the
    majority candidate and the vote count of every group. Candidates are grouped by their normalised action
    set and ``eos``; the largest group wins (a tie goes to the group that appeared first); within it, the
    candidate whose speech agrees most with the others (word Jaccard; ties: the earliest)."""
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


CANDIDATE = GenerateConfig(temperature=CANDIDATE_TEMPERATURE)
FIXED = GenerateConfig(temperature=FIXED_TEMPERATURE)
TURN_FIELDS = ("speak", "actions", "eos")


@dataclass
class BestOfNExaminee(ExamineeAgent):
    """Best-of-N (official ``_run_bon``; module docstring). Candidate ``i`` is sampled with ``seed = i *
    (parse_retries + 1)`` (its parse retries with the next seeds), so candidates never share a seed. A
    candidate that stays unreadable is dropped (recorded); the others are shown to the selector numbered
    0, 1, ... in sampling order; the turn fails only when every candidate does."""

    n: int = 5
    selector: str = "self_critic"

    async def decide(self, history: Sequence[Turn], prompt: str, attempt: int) -> Reply:
        messages = self.chat(history, prompt)
        stride = self.parse_retries + 1

        async def candidate(i: int) -> Reply | GenerationError:
            try:
                return await self.ask(messages, (attempt * self.n + i) * stride, config=CANDIDATE)
            except GenerationError as ex:
                return ex

        results = await collect(*(candidate(i) for i in range(self.n)))
        readable = [r for r in results if isinstance(r, Reply)]
        failed = [{"sample": i, "error": str(r)} for i, r in enumerate(results) if isinstance(r, GenerationError)]
        self.stats["candidates_failed"] = self.stats.get("candidates_failed", 0) + len(failed)
        if not readable:
            raise GenerationError(f"examinee: all {self.n} best-of-n candidates failed: {failed[0]['error']}")
        shown = [{"index": k, **{f: r.data[f] for f in TURN_FIELDS}} for k, r in enumerate(readable)]
        if self.selector == "majority":
            chosen, votes = self_consistency(shown)
            selection: dict[str, Any] = {"selector": "majority", "choice": chosen, "votes": votes, "fallback": None}
        else:
            chosen, selection = await self.select(prompt, shown)
        transcript().info({"best_of_n": selection, "candidates": len(shown), "failed": len(failed)}, source="medsp_scaling")
        reply = readable[chosen]
        reply.data = {**reply.data, "best_of_n": {"n": self.n, "temperature": CANDIDATE_TEMPERATURE, "candidates": shown,
                                                  "failed": failed, "chosen": chosen, **selection}}  # fmt: skip
        return reply

    async def select(self, prompt: str, shown: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        """The examinee model's choice at temperature 0, from its system prompt, this turn's prompt and the
        candidates only (no earlier turns); candidate 0 when the choice is unreadable or out of range."""
        messages: list[ChatMessage] = [ChatMessageSystem(content=self.system_prompt),
                                       ChatMessageUser(content=self.prompts.selector(prompt, shown))]  # fmt: skip
        try:
            reply = await self.ask(messages, protocol=BON_SELECTOR, config=FIXED, context=dict(candidates=shown))
        except GenerationError as ex:
            return 0, {"selector": "self_critic", "choice": None, "rationale": "", "fallback": f"selector failed: {ex}"}
        choice, rationale = reply.data["choice"], reply.data["rationale"]
        if not 0 <= choice < len(shown):
            return 0, {"selector": "self_critic", "choice": choice, "rationale": rationale,
                       "fallback": f"choice {choice} out of range 0..{len(shown) - 1}"}  # fmt: skip
        return choice, {"selector": "self_critic", "choice": choice, "rationale": rationale, "fallback": None}


@dataclass
class PanelExaminee(ExamineeAgent):
    """The multidisciplinary panel (official ``_run_medagents``; module docstring)."""

    panel_size: int = 5
    rounds: int = 1
    domains: list[str] = field(default_factory=list)
    domain_selection: dict[str, Any] = field(default_factory=dict)

    async def choose_domains(self) -> list[str]:
        """Once per case, before the first turn: the examinee model names the specialties (temperature 0)."""
        messages: list[ChatMessage] = [ChatMessageSystem(content=self.system_prompt),
                                       ChatMessageUser(content=self.prompts.domains(self.panel_size))]  # fmt: skip
        try:
            reply = await self.ask(messages, protocol=panel_domains(self.panel_size), config=FIXED,
                                   context=dict(k=self.panel_size))
            raw, error = reply.raw, None
            self.domains = reply.data["domains"]
        except GenerationError as ex:
            raw, error = "", str(ex)
            self.domains = [DEFAULT_DOMAIN] * self.panel_size
        self.domain_selection = {"reply": raw, "domains": self.domains, "error": error}
        transcript().info({"panel_domains": self.domains, "error": error}, source="medsp_scaling")
        return self.domains

    async def opinion(self, domain: str, prompt: str, attempt: int) -> str:
        overlay, user = self.prompts.specialist(domain, prompt)
        messages: list[ChatMessage] = [ChatMessageSystem(content=f"{self.system_prompt}\n\n{overlay}"), ChatMessageUser(content=user)]
        try:
            reply = await self.ask(messages, attempt, protocol=PANEL_SPECIALIST, config=CANDIDATE, context=dict(domain=domain))
        except GenerationError as ex:
            return f"(no opinion: {ex})"
        return reply.raw.strip()

    async def vote(self, domain: str, proposal: dict[str, Any]) -> dict[str, Any]:
        overlay, user = self.prompts.vote(domain, proposal)
        messages: list[ChatMessage] = [ChatMessageSystem(content=f"{self.system_prompt}\n\n{overlay}"), ChatMessageUser(content=user)]
        try:
            reply = await self.ask(messages, protocol=PANEL_VOTE, config=FIXED, context=dict(domain=domain))
        except GenerationError as ex:  # official: a vote that cannot be read counts as agreement
            return {"agree": True, "advice": "", "error": str(ex)}
        return {**reply.data, "error": None}

    async def decide(self, history: Sequence[Turn], prompt: str, attempt: int) -> Reply:
        texts = await collect(*(self.opinion(d, prompt, attempt) for d in self.domains))
        opinions = dict(zip(self.domains, texts))
        revision, advice = "", {}
        syntheses: list[dict[str, Any]] = []
        rounds: list[dict[str, Any]] = []
        reply: Reply | None = None
        for round_i in range(self.rounds + 1):
            synthesis = self.prompts.integrator(prompt, opinions, revision)
            reply = await self.ask(self.chat(history, synthesis), attempt, protocol=PANEL_INTEGRATOR, config=FIXED,
                                   context=dict(opinions=opinions, advice=advice))
            syntheses.append({"round": round_i, **{f: reply.data[f] for f in TURN_FIELDS}})
            if round_i >= self.rounds:
                break
            votes = await collect(*(self.vote(d, reply.data) for d in self.domains))
            advice = {d: v["advice"] for d, v in zip(self.domains, votes) if not v["agree"] and v["advice"]}
            rounds.append({"round": round_i, "votes": {d: v["agree"] for d, v in zip(self.domains, votes)},
                           "advice": advice, "errors": {d: v["error"] for d, v in zip(self.domains, votes) if v["error"]}})  # fmt: skip
            if not advice:
                break
            revision = self.prompts.revision_note(advice)
        assert reply is not None
        transcript().info({"panel_rounds": rounds, "revised": len(syntheses) > 1}, source="medsp_scaling")
        reply.data = {**reply.data, "panel": {"domains": list(self.domains), "opinions": opinions, "syntheses": syntheses,
                                              "consensus": rounds, "temperature": CANDIDATE_TEMPERATURE}}  # fmt: skip
        return reply


@dataclass
class PatientAgent(MedSPAgent):
    """The SP: answers every turn, from the examinee's words and the last four turn records."""

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        assert self.session is not None
        exam = history[-1]
        prompt = self.session.patient_prompt(exam.data["speak"])
        reply = await self.ask(self.chat(history, prompt), attempt, context=dict(speech=exam.data["speak"]))
        reply.data = {**reply.data, "turn": exam.data["turn"], "prompt": prompt}
        return reply


@dataclass
class EnvironmentAgent(MedSPAgent):
    """The environment controller: resolves the turn, updates the scenario state, decides the end."""

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        assert self.session is not None
        exam, patient = history[-2], history[-1]
        prompt = self.session.environment_prompt(exam.data, patient.data)
        reply = await self.ask(self.chat(history, prompt), attempt, context=dict(
            speech=exam.data["speak"], actions=exam.data["actions"], eos=exam.data["eos"],
            all_actions=[a for t in history if t.role == "examinee" for a in t.data["actions"]]))
        end, info = self.session.resolve(exam.data, patient.data, reply.data)
        reply.data = {**reply.data, **info, "turn": exam.data["turn"], "eos": exam.data["eos"], "prompt": prompt}
        if end is not None:
            reply.ends_session, reply.data["end_reason"] = True, end
        return reply


# ---------------------------------------------------------------------------------------------
# the solver


def check_parameters(max_turns: int, scaling: str, n: int, panel_size: int, panel_rounds: int = 1, bon_selector: str = "self_critic") -> None:
    if scaling not in SCALING:
        raise ValueError(f"scaling={scaling!r}: choose one of {list(SCALING)}")
    if bon_selector not in SELECTORS:
        raise ValueError(f"bon_selector={bon_selector!r}: choose one of {list(SELECTORS)}")
    if max_turns < 1:
        raise ValueError(f"max_turns={max_turns}: at least 1 examinee turn")
    if n < 1:
        raise ValueError(f"n={n}: best-of-n needs at least 1 sample")
    if panel_size < 1:
        raise ValueError(f"panel_size={panel_size}: the panel needs at least 1 specialist")
    if panel_rounds < 0:
        raise ValueError(f"panel_rounds={panel_rounds}: 0 or more voting rounds")


def make_examinee(
    session: Session, scaling: str, *, n: int, panel_size: int, panel_rounds: int, bon_selector: str, parse_retries: int
) -> ExamineeAgent:
    common: dict[str, Any] = dict(
        role="examinee",
        model=get_model(),
        system_prompt=session.prompts.examinee_system(session.scenario),
        context=dict(packet=session.scenario.examinee.text()),
        policy="none",
        protocol=EXAMINEE,
        parse_retries=parse_retries,
        session=session,
        config=GenerateConfig() if scaling == "none" else FIXED,
    )
    if scaling in ("none", "single"):
        return ExamineeAgent(**common)
    if scaling == "best_of_n":
        return BestOfNExaminee(**common, n=n, selector=bon_selector)
    if scaling == "panel":
        return PanelExaminee(**common, panel_size=panel_size, rounds=panel_rounds)
    raise ValueError(f"unknown scaling {scaling!r}; choose one of {list(SCALING)}")


@solver
def medsp_encounter(
    max_turns: int = 12,
    scaling: str = "none",
    n: int = 5,
    panel_size: int = 5,
    panel_rounds: int = 1,
    bon_selector: str = "self_critic",
    parse_retries: int = 2,
    prompts: str | None = None,
):
    """Run one MedSP1000 scenario in closed loop (module docstring)."""
    check_parameters(max_turns, scaling, n, panel_size, panel_rounds, bon_selector)
    prompt_set = load_prompt_set(prompts)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        scenario = Scenario.model_validate(state.metadata["scenario_record"])
        record = store_as(MedSPStore)
        record.scenario, record.scaling, record.max_turns, record.prompts = scenario.key, scaling, max_turns, prompt_set.name

        role_config = None if scaling == "none" else FIXED
        patient_model, patient_fallback = role_model("patient", role_config)
        env_model, env_fallback = role_model("environment", role_config)
        record.role_fallbacks = [r for r, fb in (("patient", patient_fallback), ("environment", env_fallback)) if fb]

        session = Session(scenario=scenario, prompts=prompt_set, max_turns=max_turns)
        examinee = make_examinee(session, scaling, n=n, panel_size=panel_size, panel_rounds=panel_rounds,
                                 bon_selector=bon_selector, parse_retries=parse_retries)  # fmt: skip
        if isinstance(examinee, PanelExaminee):
            await examinee.choose_domains()
            record.panel_domains, record.panel_domain_selection = examinee.domains, examinee.domain_selection
        patient = PatientAgent(
            role="patient", model=patient_model, system_prompt=prompt_set.patient_system(scenario), policy="none",
            protocol=PATIENT, parse_retries=parse_retries, session=session, context=dict(script=scenario.sp_actor.text()),
        )  # fmt: skip
        environment = EnvironmentAgent(
            role="environment", model=env_model, system_prompt=prompt_set.environment_system(scenario), policy="none",
            protocol=ENVIRONMENT, parse_retries=parse_retries, session=session,
            context=dict(materials=scenario.environment_controller.text()),
        )  # fmt: skip
        # the history cap is a safety net only: three turns per examinee turn never exceed it
        result = await run_encounter([examinee, patient, environment], None, min_turns=0, max_turns=3 * max_turns + 3)

        s = session.state
        record.history = [t.model_dump(mode="json") for t in result.history]
        record.sim_state = asdict(s)
        record.progress_index, record.state_label, record.phase_history = s.progress_index, s.current_phase_id, list(s.phase_history)
        record.end_reason = result.end_reason
        record.error = result.error
        record.examinee_turns = sum(t.role == "examinee" for t in result.history)
        record.action_statuses = {k: session.statuses.get(k, 0) for k in ("executed", "pending", "unsupported")}
        record.unsupported_actions = session.statuses.get("unsupported", 0)
        record.progression_anomalies = session.anomalies
        record.agent_stats = {"examinee": examinee.stats, "patient": patient.stats, "environment": environment.stats}
        state.metadata["end_reason"] = result.end_reason

        state.messages = examinee.chat(result.history)
        last = next((t for t in reversed(result.history) if t.role == "examinee"), None)
        state.output = ModelOutput.from_content(model=str(examinee.model), content=last.raw if last else "")
        return state

    return solve
