"""Every protocol against the corpus of realistic reply styles (``tests/corpus/replies.py``): the outcome
of every (protocol, style, reading rule) is pinned by its benchmark's corpus (``tests/<b>/corpus.py``), and
each benchmark's README holds its table of unscored rates (``python -m tests.corpus.replies --write``)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    get_model,
    modelapi,
)

from bedside import benchmarks
from bedside.calls import ask
from bedside.parts import protocol, protocols_of
from tests.corpus.replies import RULES, cases, corpora, outcomes, problems, readme, table, write


@pytest.mark.eval
@pytest.mark.parametrize("rule", RULES)
def test_every_style_of_every_protocol_reads_as_pinned(rule):
    """Each case pins its outcomes (tests/<b>/corpus.py): no answer is no reading, everything else reads as the
    canonical answer, except where a case says otherwise."""
    got = outcomes(rule)
    for case in cases():
        assert got[case.name] == case.expected(rule), case.name


@pytest.mark.eval
def test_every_registered_benchmark_puts_every_protocol_that_reads_a_reply_in_the_corpus():
    for benchmark in benchmarks.all_benchmarks():
        corpus = corpora().get(benchmark.name)
        assert corpus is not None, f"{benchmark.name}: no tests/{benchmark.name}/corpus.py"
        covered = {c.protocol.name for c in corpus.cases()}
        missing = {p.name for p in protocols_of(benchmark)} - covered - set(corpus.SAME_AS_COVERED)
        assert missing == set(), f"{benchmark.name}: protocols not in its corpus: {sorted(missing)}"


@pytest.mark.eval
def test_each_benchmarks_readme_holds_its_corpus_table():
    assert problems() == [], "python -m tests.corpus.replies --write"


@pytest.mark.eval
def test_a_stale_or_missing_table_is_named_and_rewritten(tmp_path):
    name = next(iter(corpora()))
    page = readme(name, tmp_path)
    page.parent.mkdir(parents=True)
    for other in corpora():
        readme(other, tmp_path).parent.mkdir(parents=True, exist_ok=True)
        readme(other, tmp_path).write_text(readme(other).read_text(encoding="utf-8"), encoding="utf-8")
    page.write_text(f"# {name}\n\n<!-- reply corpus: {name} -->\n| stale |\n<!-- /reply corpus -->\ntext\n")
    assert problems(tmp_path) == [
        f"bedside/{name}/README.md: the reply-corpus table is stale (python -m tests.corpus.replies --write)"
    ]
    assert write(tmp_path) == [page] and problems(tmp_path) == [] and write(tmp_path) == []
    assert page.read_text() == f"# {name}\n\n<!-- reply corpus: {name} -->\n{table(name)}<!-- /reply corpus -->\ntext\n"
    page.write_text("no table\n")
    assert problems(tmp_path) == [
        f"bedside/{name}/README.md: no table (<!-- reply corpus: {name} --> ... <!-- /reply corpus -->)"
    ]


# ---------------------------------------------------------------------------------------------
# through the call loop: retried, then read or unscored; separate reasoning content is never read


class _Replies(ModelAPI):
    """Answers the given texts in turn (the last one again when they run out); optional reasoning."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),
        texts: list[str] | None = None,
        reasoning: str | None = None,
    ) -> None:
        super().__init__(model_name=model_name, base_url="corpus", api_key="x", api_key_vars=[], config=config)
        self.texts, self.reasoning, self.calls = texts or [""], reasoning, 0

    async def generate(
        self, input: list[ChatMessage], tools: Any, tool_choice: Any, config: GenerateConfig
    ) -> ModelOutput:
        text = self.texts[min(self.calls, len(self.texts) - 1)]
        self.calls += 1
        content: list[Any] = [ContentText(text=text)]
        if self.reasoning is not None:
            content.insert(0, ContentReasoning(reasoning=self.reasoning))
        message = ChatMessageAssistant(content=content, model="corpus")
        return ModelOutput(
            model="corpus",
            choices=[ChatCompletionChoice(message=message, stop_reason="stop")],
            usage=ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2),
        )


@modelapi(name="bedside_corpus_test")
def _corpus_api():  # type: ignore[no-untyped-def]
    return _Replies


def _ask(texts: list[str], name: str, reasoning: str | None = None, retries: int = 2):
    model = get_model("bedside_corpus_test/replies", memoize=False, texts=texts, reasoning=reasoning)
    answer = asyncio.run(ask(model, "judge this", protocol(name), retries=retries))
    return answer, model.api.calls


def test_an_unreadable_style_is_retried_then_read():
    answer, calls = _ask(["It is hard to say.", "**Answer:** True"], "cpb.failure_judge")
    assert answer.ok and answer.value.failure is True and answer.unreadable == 1 and calls == 2 and answer.repaired


def test_a_style_that_stays_unreadable_is_unscored_after_the_retries():
    answer, calls = _ask([""], "cpb.failure_judge", retries=2)
    assert not answer.ok and not answer.failed and answer.unreadable == 3 and calls == 3
    assert re.match(r"unreadable judge reply after 3 tries", answer.error)


def test_separate_reasoning_content_is_never_read_as_the_answer():
    # the reasoning says True, the answer says False: the answer decides
    answer, _ = _ask(["False"], "cpb.failure_judge", reasoning="Maybe this is True after all?")
    assert answer.ok and answer.value.failure is False and answer.attempts == 1
    # all reasoning, no answer: unreadable (never read from the reasoning)
    answer, _ = _ask([""], "discharge.monitor", reasoning='{"verdict": "PASS"}', retries=0)
    assert not answer.ok
