"""``bedside/scripted``: a deterministic, case-grounded stand-in model for every bedside role.

It is NOT a language model. It reads which role it is playing from the call's protocol tag
(:func:`bedside.protocols.tag_of`; every bedside call carries one), what the call is about from the
sample it runs in (the call's *situation*: the case, the records the solvers keep, the encounter so
far, earlier replies; :mod:`bedside.providers.scripts`) and the conversation from the chat messages'
roles, never from the prompt text, and answers in that role's format, with the scripts of that
benchmark (the modules its parts name in ``scripts``, e.g. ``bedside/<benchmark>/scripted.py``;
each exports ``Options``, a dataclass of behaviour switches that modules of one benchmark share,
``HANDLERS`` and ``SITUATIONS``; found through the registry).

The same input (messages and ``seed``) always gives byte-identical output, and every output
carries token usage (estimated as characters / 4), so Inspect never needs tiktoken.

It is bedside's offline model for testing a pipeline (docs/providers.md, "The scripted model").
Behaviours are injected as model options: ``get_model(..., option=value)``, ``-M option=value`` for the
model under test (Inspect's ``-M`` reaches it only), a role mapping's ``model_args`` for a role
(``--model-role 'monitor={model: bedside/scripted, model_args: {monitor_warn_turns: 3}}'``); list
options accept ``3`` or ``"3,5"`` from the command line. A regeneration
carries ``seed = attempt`` (see ``bedside.calls.attempt_config``); options that act "for the
first k attempts" read the attempt from the seed. The generic option ``context_window`` (in
estimated tokens) makes any longer prompt end with ``stop_reason="model_length"``, as a real
provider does when the context overflows. The generic option ``only_epochs`` (e.g. ``1`` or
``"1,3"``) applies the other options only in those epochs (``--epochs``), so outcomes can differ
between epochs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig

from bedside.compat import epoch
from bedside.protocols import tag_of
from bedside.providers.scripts import script_modules, situation_of


def _coerce(spec: dataclasses.Field, value: Any) -> Any:
    """List options accept ``3`` or ``"3,5"`` (``-M x_turns=3,5``) as well as lists."""
    if spec.default_factory is list and not isinstance(value, list):
        parts = [v.strip() for v in str(value).split(",") if v.strip()]
        return [int(v) if v.lstrip("-").isdigit() else v for v in parts]
    return value


class ScriptedEngine:
    """Deterministic replies keyed on the call tag (see module docstring)."""

    def __init__(self, **args: Any) -> None:
        self.args = dict(sorted(args.items()))
        self.context_window = int(args.pop("context_window", 0))
        only = args.pop("only_epochs", None)
        self.only_epochs = (
            None
            if only is None
            else {int(x) for x in str(only).replace("[", "").replace("]", "").split(",") if x.strip()}
        )
        self.options: dict[str, Any] = {}
        claimed: set[str] = set()
        for module in script_modules():
            fields = {f.name: f for f in dataclasses.fields(module.Options)}
            mine = {k: _coerce(fields[k], v) for k, v in args.items() if k in fields}
            claimed |= set(mine)
            self.options[module.__name__] = module.Options(**mine)
        unknown = sorted(set(args) - claimed)
        if unknown:
            known = sorted(
                {f.name for m in script_modules() for f in dataclasses.fields(m.Options)}
                | {"context_window", "only_epochs"}
            )
            raise ValueError(f"bedside/scripted: unknown option(s) {unknown}; known: {known}")
        self.handlers = {
            name: (handler, self.options[module.__name__])
            for module in script_modules()
            for name, handler in module.HANDLERS.items()
        }
        self.defaults = {
            name: (handler, module.Options())
            for module in script_modules()
            for name, handler in module.HANDLERS.items()
        }

    def identity(self) -> str:
        """What distinguishes this engine's replies (its options; used as the cache-relevant ``base_url``)."""
        return "scripted:" + ",".join(f"{k}={v}" for k, v in self.args.items())

    def reply(self, messages: list[ChatMessage], config: GenerateConfig) -> str:
        """The reply to a call made in the running sample (its situation is read from it)."""
        tag = tag_of(messages)
        name = tag.name if tag else None
        situation = situation_of(name, messages) if name is not None and name in self.handlers else {}
        return self.reply_for(name, messages, int(config.seed or 0), situation)

    def reply_for(
        self, protocol: str | None, messages: list[ChatMessage], seed: int = 0, situation: dict[str, Any] | None = None
    ) -> str:
        """The scripted reply of ``protocol`` (``"<benchmark>.<role>"``) to ``messages`` in ``situation``
        (what its script reads about the call, :func:`bedside.providers.scripts.situation_of`; a request
        that brings none gets the script's defaults where it has any)."""
        if protocol is None or protocol not in self.handlers:
            return "bedside/scripted has no script for this prompt (it only plays bedside's roles)."
        handler, options = self.handlers[protocol]
        if self.only_epochs is not None:
            if epoch.get(1) not in self.only_epochs:
                handler, options = self.defaults[protocol]
        return handler(messages, situation or {}, seed, options)
