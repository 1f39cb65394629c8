"""Test-time scaling of the MedSP1000 examinee (official ``test_time.py``; module docstring of
:mod:`bedside.solvers.medsp`): best-of-N (:class:`BestOfNExaminee`, with the official self-critic selector or
bedside's majority vote, :func:`self_consistency`) and the multidisciplinary panel (:class:`PanelExaminee`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from inspect_ai.log import transcript
from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.util import collect
from pydantic import JsonValue

from bedside.calls import GenerationError
from bedside.medsp.protocols import (
    BON_SELECTOR,
    DEFAULT_DOMAIN,
    PANEL_INTEGRATOR,
    PANEL_SPECIALIST,
    PANEL_VOTE,
    panel_domains,
)
from bedside.protocols import Reply
from bedside.records import Turn
from bedside.solvers.medsp.agents import ExamineeAgent

#: official ``TestTimeConfig``: candidates and specialists' opinions are sampled at 0.8; everything else
#: of a scaled run (selector, integrator, votes, specialty choice, SP, environment) at 0
CANDIDATE_TEMPERATURE = 0.8
FIXED_TEMPERATURE = 0.0

#: how best-of-N picks its candidate (``-T bon_selector=``): the official self-critic call, or bedside's
#: self-consistency vote (:func:`self_consistency`)
BonSelector = Literal["self_critic", "majority"]


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
        (tuple(sorted({normalise_action(a) for a in c.get("actions") or []})), bool(c.get("eos"))) for c in candidates
    ]
    counts = Counter(keys)
    best = max(counts.values())
    winner = next(k for k in keys if counts[k] == best)
    members = [i for i, k in enumerate(keys) if k == winner]

    def support(i: int) -> float:
        return sum(
            _agreement(candidates[i].get("speak") or "", candidates[j].get("speak") or "") for j in members if j != i
        )

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
    selector: BonSelector = "self_critic"

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
        transcript().info(
            {"best_of_n": selection, "candidates": len(shown), "failed": len(failed)}, source="medsp_scaling"
        )
        reply = readable[chosen]
        reply.data = {
            **reply.data,
            "best_of_n": {
                "n": self.n,
                "temperature": CANDIDATE_TEMPERATURE,
                "candidates": shown,
                "failed": failed,
                "chosen": chosen,
                **selection,
            },
        }
        return reply

    async def select(self, prompt: str, shown: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        """The examinee model's choice at temperature 0, from its system prompt, this turn's prompt and the
        candidates only (no earlier turns); candidate 0 when the choice is unreadable or out of range."""
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=self.system_prompt),
            ChatMessageUser(content=self.prompts.selector(prompt, shown)),
        ]
        try:
            reply = await self.ask(messages, protocol=BON_SELECTOR, config=FIXED)
        except GenerationError as ex:
            return 0, {"selector": "self_critic", "choice": None, "rationale": "", "fallback": f"selector failed: {ex}"}
        choice, rationale = reply.data["choice"], reply.data["rationale"]
        if not 0 <= choice < len(shown):
            return 0, {
                "selector": "self_critic",
                "choice": choice,
                "rationale": rationale,
                "fallback": f"choice {choice} out of range 0..{len(shown) - 1}",
            }
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
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=self.system_prompt),
            ChatMessageUser(content=self.prompts.domains(self.panel_size)),
        ]
        try:
            reply = await self.ask(messages, protocol=panel_domains(self.panel_size), config=FIXED)
            raw, error = reply.raw, None
            self.domains = reply.data["domains"]
        except GenerationError as ex:
            raw, error = "", str(ex)
            self.domains = [DEFAULT_DOMAIN] * self.panel_size
        self.domain_selection = {"reply": raw, "domains": self.domains, "error": error}
        transcript().info({"panel_domains": list(self.domains), "error": error}, source="medsp_scaling")
        return self.domains

    async def opinion(self, domain: str, prompt: str, attempt: int) -> str:
        overlay, user = self.prompts.specialist(domain, prompt)
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=f"{self.system_prompt}\n\n{overlay}"),
            ChatMessageUser(content=user),
        ]
        try:
            reply = await self.ask(messages, attempt, protocol=PANEL_SPECIALIST, config=CANDIDATE)
        except GenerationError as ex:
            return f"(no opinion: {ex})"
        return reply.raw.strip()

    async def vote(self, domain: str, proposal: dict[str, Any]) -> dict[str, Any]:
        overlay, user = self.prompts.vote(domain, proposal)
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=f"{self.system_prompt}\n\n{overlay}"),
            ChatMessageUser(content=user),
        ]
        try:
            reply = await self.ask(messages, protocol=PANEL_VOTE, config=FIXED)
        except GenerationError as ex:  # official: a vote that cannot be read counts as agreement
            return {"agree": True, "advice": "", "error": str(ex)}
        return {**reply.data, "error": None}

    async def decide(self, history: Sequence[Turn], prompt: str, attempt: int) -> Reply:
        texts = await collect(*(self.opinion(d, prompt, attempt) for d in self.domains))
        opinions = dict(zip(self.domains, texts))
        revision = ""
        advice: dict[str, str] = {}
        syntheses: list[dict[str, Any]] = []
        rounds: list[JsonValue] = []
        reply: Reply | None = None
        for round_i in range(self.rounds + 1):
            synthesis = self.prompts.integrator(prompt, opinions, revision)
            reply = await self.ask(self.chat(history, synthesis), attempt, protocol=PANEL_INTEGRATOR, config=FIXED)
            syntheses.append({"round": round_i, **{f: reply.data[f] for f in TURN_FIELDS}})
            if round_i >= self.rounds:
                break
            votes = await collect(*(self.vote(d, reply.data) for d in self.domains))
            advice = {d: v["advice"] for d, v in zip(self.domains, votes) if not v["agree"] and v["advice"]}
            rounds.append(
                {
                    "round": round_i,
                    "votes": {d: v["agree"] for d, v in zip(self.domains, votes)},
                    "advice": dict(advice),
                    "errors": {d: v["error"] for d, v in zip(self.domains, votes) if v["error"]},
                }
            )
            if not advice:
                break
            revision = self.prompts.revision_note(advice)
        assert reply is not None
        transcript().info({"panel_rounds": rounds, "revised": len(syntheses) > 1}, source="medsp_scaling")
        reply.data = {
            **reply.data,
            "panel": {
                "domains": list(self.domains),
                "opinions": opinions,
                "syntheses": syntheses,
                "consensus": rounds,
                "temperature": CANDIDATE_TEMPERATURE,
            },
        }
        return reply
