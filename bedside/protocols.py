"""Reply protocols: the whole contract of each kind of bedside model call, declared once.

Each benchmark declares its protocols (``PROTOCOLS`` of ``bedside/<benchmark>/protocols.py``) and lists them
in its parts (:class:`bedside.parts.Parts`); :func:`bedside.parts.all_protocols` finds them through the
registry. A :class:`Protocol` names one kind of model call
(``"<benchmark>.<role>"``) and holds everything about its reply: the pydantic model it must follow
(``None`` = prose) or a text ``parser``, the stricter bedside reading (``strict``, used under
``-T reading=strict``), the retry budget (``retries``) and what an unreadable reply counts as
(``unreadable``), and, for a judge, how a panel of judges combines its answers (``ballot``,
:mod:`bedside.panel`). :func:`bedside.calls.ask` is the one loop that calls, reads and retries by it.
The reply model serves three purposes:

- **parsing** (:meth:`Protocol.read`): ``<think>`` blocks are removed, JSON is read out of the reply
  (fences, preambles, trailing commas and raw newlines repaired, :mod:`bedside.jsonreply`) and
  validated; a judge that answers a boolean protocol with a bare ``True``/``False`` is accepted where
  the protocol says so (``bare_bool``);
- **grammar-constrained decoding** on ``bedside/local`` (the JSON schema travels with the call);
- **structured output** on API models through Inspect's ``ResponseSchema`` when the task runs with
  ``-T structured_output=true`` (:func:`use_structured_output`).

Every call is *tagged* (:meth:`Protocol.tag`): the last message carries the protocol's name, its reply
schema, its reply budget and its ``form`` (what a person answering the call on ``bedside/human``'s page
reads beside each reply field: :attr:`Protocol.form`) in its ``metadata``. Inspect never sends message
metadata to a provider, so real models see only the prompt; bedside's own providers
(``bedside/scripted``, ``bedside/local``, ``bedside/human``) dispatch on the tag (:func:`tag_of`), and a
reader of the log finds each call's protocol and reply schema on its input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from inspect_ai.model import ChatMessage, GenerateConfig, ResponseSchema
from inspect_ai.util import json_schema, store
from pydantic import BaseModel, ValidationError

from bedside.jsonreply import extract_json_all
from bedside.panel import Ballot

TAG = "bedside_protocol"
STRUCTURED_KEY = "bedside:structured_output"
READING_KEY = "bedside:reading"

#: reading rules (``-T reading=``): the official benchmarks' (default) or bedside's stricter one
ReadingRule = Literal["official", "strict"]

#: what an unreadable reply (after the retries) counts as, per protocol
UNREADABLE = (
    "unscored",  # a judge: the sub-score is NaN, left out of the metrics and counted
    "system_failure",  # the supervisor's verdict on a supervised turn: the session ends, excluded from n
    "error",  # an agent: the encounter / sample ends with a recorded model failure
    "recorded",  # recorded and counted, the run goes on (a default stands in, said per protocol)
)


class ReplyParseError(ValueError):
    """A reply that cannot be read (after repair): retried by :func:`bedside.calls.ask`. Readers may raise
    any ``ValueError``; this subclass names the case."""


class Reading(NamedTuple):
    """What a text parser returns when it wants to say whether the reply needed a repair (a parser may
    also return the bare value: repaired when the value has a true ``repaired`` attribute)."""

    value: Any
    repaired: bool


@dataclass
class Reply:
    """An agent's reply as its protocol read it: the message that enters the conversation, the raw
    text, structured data, whether a repair was needed and whether it ends the session."""

    message: str
    raw: str
    data: dict[str, Any] = field(default_factory=dict)
    repaired: bool = False
    ends_session: bool = False


def plain_text(text: str) -> Reply:
    """Parser of prose agents (an educator, a panel's free-text calls): the reply is the
    message; an empty reply (or one that is all reasoning) is unreadable."""
    if not text.strip():
        raise ReplyParseError("empty reply")
    return Reply(message=text.strip(), raw=text)


@dataclass(frozen=True)
class Protocol:
    name: str  # "<benchmark>.<role>", e.g. "<benchmark>.patient"
    #: the reply model (None = prose)
    reply: type[BaseModel] | None = None
    #: reply length a local model needs for this protocol (None = the provider's default)
    max_tokens: int | None = None
    #: boolean protocols: the field a bare ``True``/``False`` reply fills (None = JSON only)
    bare_bool: str | None = None
    #: the JSON value the prompt asks for: ``dict`` (an object) or ``list`` (an array, which the
    #: reply model accepts and wraps); an object is also accepted for ``list`` (structured output)
    root: type = dict
    #: a text parser (``str -> value``, ``ValueError`` when unusable) instead of the reply model; a
    #: value with a true ``repaired`` attribute counts as repaired
    parser: Callable[[str], Any] | None = None
    #: bedside's stricter reading (``-T reading=strict``); None = the same reading under both rules
    strict: Callable[[str], Any] | None = None
    #: how often an unreadable reply is asked again (call sites may pass the task's ``*_retries``)
    retries: int = 2
    #: what an unreadable reply counts as (one of ``UNREADABLE``)
    unreadable: str = "unscored"
    #: ask for structured output by default on providers known to support it (the official code does,
    #: e.g. a judge whose official prompt sends a schema); ``-T structured_output=false`` turns it off
    structured_where_supported: bool = False
    #: for a person answering on ``bedside/human``'s page, never for a model: reply field path (keys
    #: joined by ``/``, e.g. ``"Q6.2"``, ``"items/H1"``) -> ``label`` (shown after the field's own
    #: key), ``help`` (the criterion or meaning, shown beside the field), ``default`` (the value the
    #: form starts with), ``choices`` (value -> what it means), ``rows`` (an array's rows: one label each,
    #: in order), ``row_names`` (beside ``rows``: each row's short name, as a refusal names it: ``q6``,
    #: ``turn 5``), ``row_context`` (beside ``rows``: what each row answers, shown above its label, smaller,
    #: a long one folded: ``{"who": speaker, "text": words}`` or None per row), ``row_label`` (this field
    #: of a row holds the row's label), ``send`` (a yes/no field:
    #: the send button's words when it is yes)
    form: dict[str, dict[str, Any]] | None = field(default=None, hash=False, compare=False)
    #: a judge's protocol: how a judge panel reads and combines its answers (:class:`bedside.panel.Ballot`);
    #: None: one judge answers it (an agent's call, or a judge whose reply is text, not a verdict)
    ballot: Ballot | None = None

    def __post_init__(self) -> None:
        if self.unreadable not in UNREADABLE:
            raise ValueError(f"{self.name}: unreadable={self.unreadable!r} is not one of {UNREADABLE}")

    # -- the reply model ------------------------------------------------------------------------
    def using(self, reply: type[BaseModel] | None = None, **changes: Any) -> Protocol:
        """The same protocol with a reply model (or parser, ...) built for this call (e.g. keyed by
        item ids)."""
        if reply is not None:
            changes["reply"] = reply
        return replace(self, **changes)

    def json_schema(self) -> dict[str, Any] | None:
        """The reply's JSON schema with every ``$ref`` inlined (None for prose). Built once per reply
        model and shared by every call's tag: read it, never mutate it (copy first)."""
        if self.reply is None:
            return None
        return _schema(self.reply)

    def read(self, text: str, rule: str | None = None) -> tuple[Any, bool]:
        """(value, repaired) under the reading rule ``rule`` (default: the run's, :func:`reading`).
        ``<think>`` blocks are removed first. With a ``parser`` (or, under ``strict``, a ``strict``
        parser) that parser reads the text; otherwise the reply model validates the JSON in it —
        ``repaired`` when the JSON had to be dug out of the text or a bare boolean was accepted.
        ``ValueError`` (caught and retried by :func:`bedside.calls.ask`) if the reply is unusable.
        When a reply holds several JSON values (a model quoting text it was shown, then answering),
        the last one that validates is the reply: a quote never outranks the model's own answer."""
        text = visible_text(text)
        rule = rule or reading()
        reader = self.strict if rule == "strict" and self.strict is not None else self.parser
        if reader is not None:
            value = reader(text)
            if isinstance(value, Reading):
                return value.value, value.repaired
            return value, bool(getattr(value, "repaired", False))
        if self.reply is None:
            raise TypeError(f"{self.name} is a prose protocol")
        return self.read_json(text)

    def read_json(self, text: str) -> tuple[Any, bool]:
        """The reply model's reading of ``text`` (see :meth:`read`)."""
        if self.reply is None:
            raise TypeError(f"{self.name} is a prose protocol")
        found = extract_json_all(text, self.root)
        if not found and self.root is not dict:
            found = extract_json_all(text, dict)
        if not found:
            bare = bare_boolean(text) if self.bare_bool is not None else None
            if bare is not None:
                return self.reply.model_validate({self.bare_bool: bare}), True
            raise ValueError(f"no JSON object in the reply: {text[:200]!r}")
        problems: list[ValidationError] = []
        for candidate in reversed(found):
            try:
                return self.reply.model_validate(candidate.value), candidate.repaired or len(found) > 1
            except ValidationError as ex:
                problems.append(ex)
        # every candidate failed: report the last JSON value's problem (the reply's own answer)
        raise ValueError(validation_message(problems[0])) from problems[0]

    def parse(self, text: str) -> Any:
        """The validated reply model (see :meth:`read`)."""
        return self.read(text)[0]

    # -- the call -------------------------------------------------------------------------------
    def tag(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """``messages`` with this protocol's tag on the last message (a copy; inputs untouched)."""
        if not messages:
            raise ValueError("cannot tag an empty prompt")
        last = messages[-1]
        meta = dict(last.metadata or {})
        meta[TAG] = {"name": self.name, "schema": self.json_schema(), "max_tokens": self.max_tokens}
        if self.form:
            meta[TAG]["form"] = self.form
        return [*messages[:-1], last.model_copy(update={"metadata": meta})]

    def config(self, model: Any = None) -> GenerateConfig:
        """Structured output (Inspect's ``ResponseSchema``) when the task asked for it
        (``-T structured_output=true``), or by default (``auto``) for a protocol that the official code
        asks with a schema, on a provider known to support it (:func:`supports_structured_output`)."""
        if self.reply is None:
            return GenerateConfig()
        mode = structured_output()
        wanted = mode is True or (
            mode == "auto" and self.structured_where_supported and supports_structured_output(model)
        )
        if not wanted:
            return GenerateConfig()
        schema = _response_schema(self.reply)
        return GenerateConfig(
            response_schema=ResponseSchema(name=re.sub(r"[^A-Za-z0-9_-]", "_", self.name)[:64], json_schema=schema)
        )


#: providers whose structured output (JSON schema) bedside uses by default where a protocol asks for it
STRUCTURED_PROVIDERS = ("openai/", "anthropic/", "google/", "vllm/", "mistral/", "grok/", "azureai/")


def supports_structured_output(model: Any) -> bool:
    """Whether ``model`` (an Inspect ``Model``) is served by a provider known to accept a JSON-schema
    response format. OpenAI-compatible servers of unknown make (``openai-api/...``) are not assumed to."""
    return model is not None and str(model).startswith(STRUCTURED_PROVIDERS)


_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)


def visible_text(text: str) -> str:
    """The reply without its reasoning: ``<think>...</think>`` blocks removed; a reply whose opening
    ``<think>`` is in the chat template (only ``</think>`` in the text) loses everything up to it; an
    unclosed ``<think>`` (reasoning cut off) loses everything from it, so that a draft answer inside
    unfinished reasoning is never read as the answer."""
    if "<" not in text:
        return text
    text = _THINK.sub("", text)
    close = _THINK_CLOSE.search(text)
    if close is not None:
        text = text[close.end() :]
    opened = _THINK_OPEN.search(text)
    if opened is not None:
        text = text[: opened.start()]
    return text


_BARE = re.compile(r"^\W*(true|false|yes|no)\W*$", re.IGNORECASE)


@lru_cache(maxsize=512)
def _response_schema(reply: type[BaseModel]) -> Any:
    """Inspect's ``JSONSchema`` of a reply model, built once per model."""
    return json_schema(reply)


@lru_cache(maxsize=512)
def _schema(reply: type[BaseModel]) -> dict[str, Any]:
    """Built once per reply model (every model call is tagged with its schema)."""
    return _response_schema(reply).model_dump(exclude_none=True)


def bare_boolean(text: str) -> bool | None:
    """``True``/``False`` (or yes/no) as a whole reply, with punctuation or markup around it."""
    m = _BARE.match(text.strip())
    return None if m is None else m.group(1).lower() in ("true", "yes")


def json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects in a reply, the model's own (last) first: a quoted object never outranks the
    answer (as :meth:`Protocol.read_json`). ``ValueError`` when there is none (readers of replies whose
    keys depend on the call use it)."""
    found = extract_json_all(text, dict)
    if not found:
        raise ValueError(f"no JSON object in the reply: {text[:160]!r}")
    return [f.value for f in reversed(found)]


def validation_message(ex: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or '<reply>'}: {e['msg']}" for e in ex.errors())


# ---------------------------------------------------------------------------------------------
# structured output (per sample, so that `inspect score` on a log keeps the run's choice)


def use_structured_output(enabled: bool | None) -> None:
    """``True``: every JSON reply is requested with its schema; ``False``: none; ``None`` (``auto``,
    the default): only protocols marked ``structured_where_supported``, on providers that support it."""
    store().set(STRUCTURED_KEY, "auto" if enabled is None else bool(enabled))


def structured_output() -> bool | str:
    """``True``, ``False`` or ``"auto"`` (see :func:`use_structured_output`); False outside a sample."""
    try:
        value: bool | str = store().get(STRUCTURED_KEY, False)
    except Exception:  # outside a sample (unit tests calling parsers directly)
        return False
    return value if value == "auto" else bool(value)


def use_reading(rule: ReadingRule) -> None:
    """The sample's reading rule (``-T reading=``): stored per sample, so that ``inspect score`` on a
    log keeps the run's rule."""
    store().set(READING_KEY, rule)


def reading() -> str:
    """The reading rule in force: ``official`` (default) or ``strict``."""
    try:
        return str(store().get(READING_KEY, "official"))
    except Exception:  # outside a sample
        return "official"


# ---------------------------------------------------------------------------------------------
# registry and tags


@dataclass(frozen=True)
class Tag:
    name: str
    schema: dict[str, Any] | None
    max_tokens: int | None
    form: dict[str, dict[str, Any]] | None = None


def tag_of(messages: list[ChatMessage]) -> Tag | None:
    """The protocol tag of a call (on its last tagged message), or None for an untagged prompt."""
    for m in reversed(messages):
        found = (m.metadata or {}).get(TAG)
        if isinstance(found, dict) and "name" in found:
            return Tag(found["name"], found.get("schema"), found.get("max_tokens"), found.get("form"))
    return None
