"""The encounter agent shared by every simulation in bedside: :class:`ChatAgent`, an agent backed by an
Inspect model, with its own system prompt, its own view of the shared history (own turns as
``assistant``, others as ``user``, with a visibility filter), a reply parser with repair-or-retry (the
model-call layer, :func:`bedside.calls.ask`) and fresh samples on regeneration.

Agents only produce replies: turn order, supervision, controller state and termination belong to the
orchestrator (:mod:`bedside.solvers.orchestrator`). An agent's ``policy`` says how the orchestrator's
supervisor treats its turns (the supervisor's ``decide``):

``observe``  every turn is evaluated and logged, never changed (the model under test);
``moderate`` the supervisor's verdict may soft-correct, discard and regenerate, or hard-stop;
``none``     not evaluated at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
)

from bedside.calls import ask
from bedside.protocols import Protocol as ReplyProtocol
from bedside.protocols import Reply
from bedside.records import Turn

Policy = Literal["observe", "moderate", "none"]


def utterance_json(turn: Turn) -> str:
    """How an utterance agent sees its own past turns: the canonical JSON it is asked to produce."""
    return json.dumps({"utterance": turn.message}, ensure_ascii=False)


@dataclass
class ChatAgent:
    """An encounter agent backed by an Inspect model."""

    role: str
    model: Model
    system_prompt: str
    policy: Policy = "observe"
    protocol: ReplyProtocol | None = None  # the contract of this agent's calls (its parser reads every reply)
    config: GenerateConfig = field(default_factory=GenerateConfig)  # e.g. a role's sampling temperature
    kickoff: str | None = None  # user message placed first when the agent would open the chat
    sees: Callable[[Turn], bool] = lambda turn: True  # visibility of others' turns
    render_own: Callable[[Turn], str] = lambda turn: turn.raw or turn.message
    render_other: Callable[[Turn], str] = lambda turn: turn.message
    parse_retries: int = 2
    active: Callable[[Sequence[Turn]], bool] = lambda history: True  # False: skip this agent's turn
    stats: dict[str, int] = field(default_factory=lambda: {"calls": 0, "repaired": 0, "unparsed": 0})

    def prompt(self, correction: str | None = None) -> str:
        return self.system_prompt if not correction else f"{self.system_prompt}\n\n{correction}"

    def messages(
        self, history: Sequence[Turn], correction: str | None = None, extra_user: str | None = None
    ) -> list[ChatMessage]:
        """This agent's view: system prompt, own turns as assistant, visible others as user
        (consecutive user turns merged), and an optional trailing user message."""
        chat: list[ChatMessage] = [ChatMessageSystem(content=self.prompt(correction))]
        for turn in history:
            if turn.role == self.role:
                if len(chat) == 1 and self.kickoff:
                    chat.append(ChatMessageUser(content=self.kickoff))
                chat.append(ChatMessageAssistant(content=self.render_own(turn)))
            elif self.sees(turn):
                text = self.render_other(turn)
                if isinstance(chat[-1], ChatMessageUser):
                    chat[-1] = ChatMessageUser(content=f"{chat[-1].text}\n\n{text}")
                else:
                    chat.append(ChatMessageUser(content=text))
        if extra_user is not None:
            if isinstance(chat[-1], ChatMessageUser):
                chat[-1] = ChatMessageUser(content=f"{chat[-1].text}\n\n{extra_user}")
            else:
                chat.append(ChatMessageUser(content=extra_user))
        if len(chat) == 1 and self.kickoff:
            chat.append(ChatMessageUser(content=self.kickoff))
        return chat

    async def ask(
        self,
        messages: list[ChatMessage],
        attempt: int = 0,
        protocol: ReplyProtocol | None = None,
        config: GenerateConfig | None = None,
    ) -> Reply:
        """One call through :func:`bedside.calls.ask`: unreadable replies are retried with fresh samples
        (``seed``), then :class:`GenerationError`. ``protocol`` and ``config`` override the agent's own for
        this call (e.g. a comprehension question, a sampling temperature)."""
        protocol = protocol or self.protocol
        if protocol is None:
            raise TypeError(f"{self.role}: an agent's call needs a protocol")
        answer = await ask(
            self.model,
            messages,
            protocol,
            retries=self.parse_retries,
            attempt=attempt,
            config=self.config.merge(config) if config is not None else self.config,
            who=self.role,
        )
        self.stats["calls"] += answer.attempts
        self.stats["unparsed"] += answer.unreadable
        self.stats["repaired"] += int(answer.ok and answer.repaired)
        return answer.require()

    async def reply(self, history: Sequence[Turn], correction: str | None, attempt: int) -> Reply:
        return await self.ask(self.messages(history, correction), attempt)
