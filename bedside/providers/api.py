"""The ``bedside`` Inspect model provider: ``bedside/scripted``, ``bedside/local``, ``bedside/human`` and
``bedside/replay``."""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, ModelUsage, StopReason
from inspect_ai.tool import ToolChoice, ToolInfo

from bedside import parts
from bedside.params import SetupError
from bedside.providers.human_desk import OPTIONS as HUMAN_OPTIONS
from bedside.providers.local import LocalEngine
from bedside.providers.scripted import ScriptedEngine


class BedsideAPI(ModelAPI):
    """Dispatches on the model name: ``scripted`` (deterministic stand-in), ``local`` (llama.cpp) or an
    engine a registered benchmark declares (its parts' ``engines``, e.g. ``bedside/replay``)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008  (Inspect's ModelAPI signature)
        **model_args: Any,
    ) -> None:
        human_options = sorted(set(model_args) & set(HUMAN_OPTIONS))  # refused by name on the other engines
        if model_name != "human" and human_options:
            option = human_options[0]
            raise SetupError(
                f"bedside/{model_name} takes no option {option!r} (bedside/human's): -M gives options to the model "
                f"under test; give them to a role's person in the role's mapping, e.g. --model-role "
                f"'grader={{model: bedside/human, model_args: {{{option}: ...}}}}'"
            )
        try:
            self.engine = self._engine(model_name, model_args)
        except SetupError:
            raise
        except ValueError as ex:  # an engine's option it cannot use: one line, no traceback
            raise SetupError(str(ex)) from None
        # Inspect's generation cache keys on the model name and base_url, not on model args: give
        # each configuration (GGUF file, context size; scripted options) its own identity, so that
        # a cached reply of one model is never served for another.
        super().__init__(
            model_name=model_name,
            base_url=base_url or self.engine.identity(),
            api_key=api_key,
            api_key_vars=[],
            config=config,
        )

    @staticmethod
    def _engine(model_name: str, model_args: dict[str, Any]) -> Any:
        if model_name == "scripted":
            return ScriptedEngine(**dict(model_args))
        if model_name == "local":
            engine = LocalEngine(**model_args)
            engine.check_runnable()  # a probe subprocess: a crashing build stops here, with one line
            return engine
        if model_name == "human":
            from bedside.providers.human import HumanEngine

            return HumanEngine(**model_args)
        if model_name in (engines := parts.engines()):
            return engines[model_name](**dict(model_args))
        known = ", ".join(f"bedside/{name}" for name in ("scripted", "local", "human", *engines))
        raise ValueError(f"unknown bedside model {model_name!r}: use {known}")

    async def count_text_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def max_connections(self) -> int:
        # scripted and the benchmarks' engines: pure CPU, no point in more; local: one in-process model
        # serialises anyway
        return 1 if self.model_name == "local" else 32

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        if self.model_name == "human":  # a person at the page bedside.providers.human serves
            return await self.engine.generate(input, config)
        if self.model_name != "local":  # the synchronous engines: scripted, a benchmark's (replay)
            window = self.engine.context_window
            prompt_tokens = sum(len(m.text) for m in input) // 4 + 1
            if window and prompt_tokens > window:
                output = ModelOutput.from_content(
                    model="bedside/scripted",
                    content="",
                    stop_reason="model_length",
                )
                output.usage = ModelUsage(input_tokens=prompt_tokens, output_tokens=0, total_tokens=prompt_tokens)
                return output
            text = self.engine.reply(input, config)
            usage = ModelUsage(
                input_tokens=sum(len(m.text) for m in input) // 4 + 1,
                output_tokens=len(text) // 4 + 1,
            )
            usage.total_tokens = usage.input_tokens + usage.output_tokens
            stop: StopReason = "stop"
        else:
            text, usage, stop = await self.engine.reply(input, config)
        output = ModelOutput.from_content(model=f"bedside/{self.model_name}", content=text, stop_reason=stop)
        output.usage = usage
        return output
