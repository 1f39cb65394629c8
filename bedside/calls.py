"""The model-call layer: every bedside model call is made, read, retried and recorded here.

One loop, :func:`ask` — generate → read → retry → record — serves every role of every benchmark: the
agents of the encounters, their supervisors, every judge and every data-preparation call. What a call
expects is its
:class:`~bedside.protocols.Protocol` (the whole contract: the reply model or text parser, the
reading rule, the retry budget and how an unreadable reply is counted); a call site never parses a
reply by hand.

- **generate**: the call is tagged with its protocol (name, reply schema and reply budget, in message
  metadata, which Inspect never sends to a provider) and asks for structured output when the task
  enabled it. A provider failure (after Inspect's own retries) or a context overflow is a
  :class:`GenerationError`; Inspect's limits and programming errors propagate unchanged.
- **read**: ``<think>`` blocks are removed (a model's separate reasoning content never reaches
  ``output.completion``), then the protocol reads the text under the run's reading rule
  (``-T reading=official|strict``, :func:`bedside.protocols.reading`).
- **retry**: an unreadable reply is asked again with a fresh sample (``seed = attempt``) up to the
  protocol's (or the call's) ``retries``; a cached unreadable reply is removed from Inspect's cache.
- **record**: every unreadable reply is a transcript event (source ``parse``) with the protocol, the
  attempt, the reply and the reason; the :class:`Answer` carries the value (``None`` when the reply
  stayed unreadable or the model failed), every reply, the number of attempts and of unreadable
  replies, and whether a repair was needed. What an unreadable answer *means* for the caller is the
  protocol's ``unreadable`` (``unscored``, ``system_failure``, ``error`` or ``recorded``).

A judge is :func:`grader`: one model, or a :class:`~bedside.panel.Panel` when the role is bound to several
models; :func:`ask` given a panel asks every judge through this same loop and combines their verdicts by
the protocol's ballot (:mod:`bedside.panel`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio
from inspect_ai.event import ModelEvent
from inspect_ai.log import transcript
from inspect_ai.model import CachePolicy, ChatMessage, ChatMessageUser, GenerateConfig, Model, ModelOutput, get_model
from inspect_ai.util import LimitExceededError, span

from bedside.compat import CacheEntry, openai_provider_module
from bedside.compat import cache_entry_path as _cache_entry_path
from bedside.families import same_family
from bedside.panel import Panel, PanelRecord, combine
from bedside.protocols import Protocol
from bedside.protocols import ReplyParseError as ReplyParseError  # re-exported: callers catch it from here
from bedside.roles import role_models
from bedside.structured import structured_output_rejected

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: an unscored sub-score: NaN, left out of every metric and counted by Inspect as unscored
UNSCORED = float("nan")

#: For judge calls that do not depend on the model under test (reading only the case): cached
#: without expiry and across epochs, so a second educator on the same cases re-uses them.
REFERENCE_CACHE = CachePolicy(expiry=None, per_epoch=False)


class GenerationError(RuntimeError):
    """A model call failed (API error, context overflow), or an agent's reply stayed unreadable."""


#: Bugs, not model failures: these propagate (the sample errors visibly) instead of ending the
#: encounter with ``error``.
PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    NameError,
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    AssertionError,
    ImportError,
)

#: what :func:`generate_checked` lets through unchanged: Inspect's own limits and programming errors
_PROPAGATE: tuple[type[BaseException], ...] = (LimitExceededError, *PROGRAMMING_ERRORS)


def grader(role: str = "grader") -> tuple[Model | Panel, bool]:
    """The judge (temperature 0) — one model, or a :class:`~bedside.panel.Panel` when the role is bound to
    several — and whether it fell back to the model under test. A judge of the model under test's family is
    flagged (:func:`flag_same_family`)."""
    models, fallback = role_models(role, GenerateConfig(temperature=0.0))
    flagged = [] if fallback else flag_same_family(role, models)
    if len(models) == 1:
        return models[0], fallback
    return Panel(tuple(models), tuple(flagged)), fallback


def asks_steps(judge: Model | Panel) -> bool:
    """Whether a judge is asked its intermediate steps — what it extracts before it rates (reference answers
    from the note, answers to compare) — as well as its ratings. A model always is; a person
    (``bedside/human``) only when they asked for them (``steps=true``): a person rates what the study
    measures, and a scorer whose rating needs a step asks the person for the rating against the source
    instead, or leaves the score unscored and says why. A panel asks them unless every judge is such a person."""
    judges = judge.judges if isinstance(judge, Panel) else (judge,)
    return any(getattr(getattr(j.api, "engine", None), "asks_steps", True) for j in judges)


_flagged: set[tuple[str, str]] = set()


def flag_same_family(role: str, judges: Sequence[Model]) -> list[str]:
    """The judges of the model under test's family (:mod:`bedside.families`): a warning in the console and the
    eval log (once per judge and process) and an event in the sample's transcript."""
    subject = str(get_model())
    found = [str(j) for j in judges if same_family(str(j), subject)]
    for judge in found:
        if (judge, subject) not in _flagged:
            _flagged.add((judge, subject))
            logger.warning(
                f"model role '{role}': judge {judge} is of the same family as the model under test ({subject}); "
                "a judge may favour its own family's replies (bedside report flags it)."
            )
        transcript().info({"same_family_judge": judge, "role": role, "model_under_test": subject}, source="roles")
    return found


def attempt_config(attempt: int) -> GenerateConfig:
    """Config for a regeneration: a distinct ``seed`` per attempt, so a regenerated reply is a fresh
    sample (and not a cache hit of the rejected one). The first attempt uses the model's own config."""
    return GenerateConfig() if attempt == 0 else GenerateConfig(seed=attempt)


def describe_failure(ex: BaseException) -> str:
    """A provider failure as one readable line. When Inspect's retries run out, tenacity raises a
    ``RetryError`` whose text is only a future's repr; report the last attempt's own error (status
    and message from the provider) and how many attempts were made."""
    from tenacity import RetryError

    if isinstance(ex, RetryError):
        last = ex.last_attempt
        cause = last.exception() if last is not None and last.failed else None
        if cause is not None:
            return f"{type(cause).__name__} after {last.attempt_number} attempt(s): {cause}"
    return f"{type(ex).__name__}: {ex}"


async def generate_checked(
    model: Model,
    messages: list[ChatMessage],
    config: GenerateConfig,
    protocol: Protocol | None = None,
) -> ModelOutput:
    """``model.generate`` that turns provider failures and context overflow into GenerationError.
    Inspect's own limits (token/time/message limits) propagate unchanged. With a ``protocol`` the
    call is tagged with it (and asks for structured output when the task enabled it)."""
    if protocol is not None:
        messages = protocol.tag(messages)
        config = config.merge(protocol.config(model))
    use_bedside_batcher(model)
    try:
        output = await model.generate(messages, config=config)
    except _PROPAGATE:
        raise
    except Exception as ex:  # provider/API failure (after Inspect's own retries)
        rejected = structured_output_rejected(ex, config)
        if rejected is not None:
            raise rejected from ex
        raise GenerationError(describe_failure(ex)) from ex
    if output.stop_reason == "model_length":
        raise GenerationError("context window exceeded (stop_reason=model_length)")
    if output.error:
        raise GenerationError(str(output.error))
    return output


def use_bedside_batcher(model: Model) -> None:
    """An OpenAI model's calls in batch mode go through :class:`bedside.batch.Batcher` (which reads failed
    batch lines as OpenAI writes them and keeps a journal for resuming; its module docstring). Nothing is
    imported for a model of another provider."""
    module = openai_provider_module()
    if module is not None and isinstance(model.api, module.OpenAIAPI):
        from bedside.batch import install

        install(module)


@dataclass
class Answer(Generic[T]):
    """What one :func:`ask` produced. ``value`` is None when the reply stayed unreadable or the model
    failed (``error`` says which; ``failed`` for a model failure)."""

    value: T | None
    replies: list[str] = field(default_factory=list)
    error: str | None = None
    attempts: int = 0
    unreadable: int = 0  # unreadable replies (each retried or, for the last, given up)
    repaired: bool = False  # the readable reply needed a repair (JSON dug out, a bare boolean, ...)
    failed: bool = False  # a model failure (GenerationError), not an unreadable reply
    panel: list[PanelRecord] = field(default_factory=list)  # a panel's record of each call it answered

    @property
    def ok(self) -> bool:
        return self.value is not None

    def require(self) -> T:
        """The value, or :class:`GenerationError` (agents: a model failure or an unreadable reply ends
        the encounter with ``error``)."""
        if self.value is None:
            raise GenerationError(self.error or "no reply")
        return self.value


async def ask(
    model: Model | Panel,
    prompt: str | Sequence[ChatMessage],
    protocol: Protocol,
    *,
    retries: int | None = None,
    attempt: int = 0,
    config: GenerateConfig | None = None,
    cache: bool | CachePolicy = False,
    who: str | None = None,
    record: dict[str, Any] | None = None,
) -> Answer[Any]:
    """Generate → read → retry → record (module docstring). Never raises for an unreadable reply or
    a model failure: the :class:`Answer` says what happened.

    The protocol reads every reply (a call whose reply depends on the call builds its protocol with
    ``Protocol.using``). ``retries`` defaults to the protocol's. ``attempt`` is the first sample's seed
    offset (regenerations of a rejected turn). ``config`` is merged over the attempt's seed. ``who``
    (an agent's role; None for a judge) and ``record`` label the transcript events and the error text."""
    if isinstance(model, Panel):
        return await ask_panel(
            model, prompt, protocol, retries=retries, attempt=attempt, config=config, cache=cache, record=record
        )
    messages: list[ChatMessage] = [ChatMessageUser(content=prompt)] if isinstance(prompt, str) else list(prompt)
    budget = protocol.retries if retries is None else retries
    answer: Answer[Any] = Answer(value=None)
    for i in range(budget + 1):
        cfg = attempt_config(attempt + i)
        if config is not None:
            cfg = cfg.merge(config)
        if cache:
            cfg = cfg.merge(GenerateConfig(cache=cache))
        answer.attempts += 1
        try:
            output = await generate_checked(model, messages, cfg, protocol)
        except GenerationError as ex:
            # agents report the provider's message as is; judges say it was the judge call
            answer.error, answer.failed = (str(ex) if who else f"judge call failed: {ex}"), True
            return answer
        answer.replies.append(output.completion)
        try:
            value, repaired = protocol.read(output.completion)
        except ValueError as ex:
            answer.unreadable += 1
            answer.error = (
                f"{who}: no readable reply after {i + 1} tries: {ex}"
                if who
                else f"unreadable judge reply after {i + 1} tries: {ex}"
            )
            transcript().info(
                {
                    "protocol": protocol.name,
                    "role": who,
                    "attempt": attempt + i,
                    "unparsed_reply": output.completion,
                    "error": str(ex),
                    **(record or {}),
                },
                source="parse",
            )
            if cache:
                forget_cached(model, output, cache)
            continue
        answer.value, answer.repaired, answer.error = value, repaired, None
        return answer
    return answer


async def ask_panel(
    panel: Panel,
    prompt: str | Sequence[ChatMessage],
    protocol: Protocol,
    *,
    record: dict[str, Any] | None = None,
    **options: Any,
) -> Answer[Any]:
    """A judge call answered by a panel (:mod:`bedside.panel`): every judge asked through :func:`ask` (its own
    retries), their verdicts combined by the protocol's ballot into one answer of the protocol's type, with the
    panel's record. Unreadable only when no judge answered. A protocol without a ballot (text replies) is
    answered by the first judge."""
    ballot = protocol.ballot
    if ballot is None:
        return await ask(panel.judges[0], prompt, protocol, record=record, **options)
    answers = await each_judge(panel, lambda judge: ask(judge, prompt, protocol, record=record, **options))
    votes = [ballot.votes(a.value) if a.ok else None for a in answers]
    verdict, ties = combine(votes, ballot.key_of)
    readable = [a.value for a in answers if a.ok]
    entry = PanelRecord(
        protocol=protocol.name,
        judges=panel.names,
        votes=votes,
        errors=[a.error for a in answers],
        verdict=verdict,
        keys={item: ballot.key_of(item) for item in verdict},
        answered=len(readable),
        ties=ties,
        same_family=list(panel.same_family),
        label=dict(record or {}),
    )
    transcript().info({"panel": entry.dump()}, source="panel")
    return Answer(
        value=ballot.carry(readable, verdict) if readable else None,
        replies=[r for a in answers for r in a.replies],
        error=None
        if readable
        else "no judge of the panel answered: " + "; ".join(f"{n}: {a.error}" for n, a in zip(panel.names, answers)),
        attempts=sum(a.attempts for a in answers),
        unreadable=sum(a.unreadable for a in answers),
        repaired=any(a.repaired for a in answers if a.ok),
        failed=not readable and all(a.failed for a in answers),
        panel=[entry],
    )


async def each_judge(panel: Panel, call: Callable[[Model], Awaitable[Answer[Any]]]) -> list[Answer[Any]]:
    """``call`` for every judge of the panel, concurrently, each in a span named by the judge (type ``judge``: in
    ``inspect view`` a judge's calls are grouped under its name; unlike ``collect()``'s ``task`` spans they do not
    hide which task of an enclosing ``collect()`` the call belongs to)."""
    answers: list[Answer[Any] | None] = [None] * len(panel.judges)

    async def one(index: int, judge: Model, name: str) -> None:
        async with span(name, type="judge"):
            answers[index] = await call(judge)

    try:
        async with anyio.create_task_group() as group:
            for index, (judge, name) in enumerate(zip(panel.judges, panel.names)):
                group.start_soon(one, index, judge, name)
    except BaseExceptionGroup as failed:  # a programming error or a limit: raised as itself
        raise failed.exceptions[0] from None
    return [a for a in answers if a is not None]


def forget_cached(model: Model, output: ModelOutput, cache: bool | CachePolicy) -> bool:
    """Remove the cache entry that holds ``output`` (an unreadable reply). The entry's key is
    rebuilt from the call's ``ModelEvent`` exactly as Inspect builds it (same config, input,
    tools and policy). True if an entry was removed."""
    for event in reversed(transcript().events):
        if (
            isinstance(event, ModelEvent)
            and event.cache in ("write", "read")
            and event.output.completion == output.completion
        ):
            entry = CacheEntry(
                base_url=model.api.base_url,
                config=event.config,
                input=event.input,
                model=str(model),
                policy=cache if isinstance(cache, CachePolicy) else CachePolicy(),
                tool_choice=event.tool_choice,
                tools=event.tools,
            )
            path = _cache_entry_path(entry)
            if path is not None and path.exists():
                path.unlink()
                transcript().info({"removed_from_cache": str(path.name), "reason": "unreadable reply"}, source="cache")
                return True
            return False
    return False
