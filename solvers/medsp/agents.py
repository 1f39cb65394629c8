"""The MedSP1000 agents (official ``agents.py``): each keeps its own chat (its system prompt, then each turn's
user message and its raw reply) and builds its turn's message from the :class:`~bedside.solvers.medsp.session.Session`
(read only: the orchestrator advances the scenario state). The examinee's test-time scaling variants are in
:mod:`bedside.solvers.medsp.scaling`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from bedside.protocols import Reply
from bedside.records import Turn
from bedside.solvers.agent import ChatAgent
from bedside.solvers.medsp.prompts import PromptSet
from bedside.solvers.medsp.session import Session


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
        s = self.session.state  # the orchestrator has counted this turn (Session.before_turn)
        prompt = self.session.examinee_prompt()
        reply = await self.decide(history, prompt, attempt)
        reply.data = {
            **reply.data,
            "turn": s.total_turns,
            "prompt": prompt,
            "progress_index": s.progress_index,
            "state_label": s.current_phase_id,
        }
        return reply

    async def decide(self, history: Sequence[Turn], prompt: str, attempt: int) -> Reply:
        return await self.ask(self.chat(history, prompt), attempt)


@dataclass
class PatientAgent(MedSPAgent):
    """The SP: answers every turn, from the examinee's words and the last four turn records."""

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        assert self.session is not None
        exam = history[-1]
        prompt = self.session.patient_prompt(exam.data["speak"])
        reply = await self.ask(self.chat(history, prompt), attempt)
        reply.data = {**reply.data, "turn": exam.data["turn"], "prompt": prompt}
        return reply


@dataclass
class EnvironmentAgent(MedSPAgent):
    """The environment controller's agent: its reply assesses the examinee's actions and says how the scenario
    state moves and whether it ends; the orchestrator applies it (:meth:`Session.after_reply`)."""

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        assert self.session is not None
        exam, patient = history[-2], history[-1]
        prompt = self.session.environment_prompt(exam.data, patient.data)
        reply = await self.ask(self.chat(history, prompt), attempt)
        reply.data = {**reply.data, "prompt": prompt}
        return reply
