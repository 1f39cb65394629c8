"""Every protocol against the corpus of realistic reply styles (``tests/corpus/replies.py``): the outcome
of every (protocol, style, reading rule) is pinned here, and the table of unscored rates in
docs/reading-replies.md is the corpus's own."""

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

from bedside.calls import ask
from bedside.parts import protocol
from tests.conftest import REPO
from tests.corpus.replies import cases, outcomes, table

#: what a reader cannot take as an answer: nothing there, a cut-off JSON value, reasoning that never ended
NO_ANSWER = {"truncated", "unfinished_think", "empty"}
PROSE_NO_ANSWER = {"unfinished_think", "empty"}

#: unreadable styles per protocol and rule, where they differ from NO_ANSWER (JSON) / PROSE_NO_ANSWER (prose)
UNREADABLE: dict[str, dict[str, set[str]]] = {
    "cpb.failure_judge": {
        # upstream judge_utils: the first True/False anywhere; a hedge names neither, "Tr" is cut off
        "official": {"hedged", "truncated", "empty"},
        # bedside's strict reading: only a bare, leading or JSON answer
        "strict": {"hedged", "truncated", "empty", "bold_answer", "answer_line", "explanation_then_verdict"},
    },
    "cpb.persistence_judge": {"official": PROSE_NO_ANSWER, "strict": PROSE_NO_ANSWER | {"truncated"}},
    "cpb.overreaction_judge": {
        "official": NO_ANSWER,
        # strict: every flag required, and consistent with the verdict
        "strict": NO_ANSWER | {"verdict_without_flags", "verdict_contradicts_flags"},
    },
    "medsp.evaluator": {"official": NO_ANSWER, "strict": NO_ANSWER | {"item_left_out"}},
}
#: read, but meaning something else than the canonical answer: only where the reply says something else
OTHER: dict[str, dict[str, set[str]]] = {
    "medsp.evaluator": {"official": {"item_left_out"}},  # one item judged: the other leaves the denominator
}
PROSE = {
    "discharge.judge_reference",
    "discharge.educator",
    "cpb.doctor",
    "cpb.doctor_step_by_step",
    "cpb.self_check",
    "cpb.patient",
    "medsp.panel_specialist",
}


def expected(name: str, styles: list[str], rule: str) -> dict[str, str]:
    default = PROSE_NO_ANSWER if name in PROSE else NO_ANSWER
    unreadable = UNREADABLE.get(name, {}).get(rule, default)
    other = OTHER.get(name, {}).get(rule, set())
    return {s: "unreadable" if s in unreadable else "other" if s in other else "value" for s in styles}


@pytest.mark.eval
@pytest.mark.parametrize("rule", ["official", "strict"])
def test_every_style_of_every_protocol_reads_as_pinned(rule):
    got = outcomes(rule)
    assert set(got) >= {
        "discharge.monitor",
        "cpb.failure_judge",
        "cpb.overreaction_judge",
        "medsp.evaluator",
        "mimic.extract",
    }
    for case in cases():
        assert got[case.name] == expected(case.name, list(case.styles), rule), case.name


@pytest.mark.eval
def test_the_corpus_covers_every_protocol_that_reads_a_reply():
    covered = {c.protocol.name for c in cases()}
    from bedside.parts import all_protocols

    # the prose calls whose reading is the same one-line rule as one covered here
    same_as_covered = {
        "discharge.comprehension",
        "cpb.analysis",
        "medsp.panel_domains",
        "medsp.panel_integrator",
    }
    assert {p.name for p in all_protocols()} - covered - same_as_covered == set()


@pytest.mark.eval
def test_the_docs_report_the_corpus_unscored_rates():
    page = (REPO / "docs" / "reading-replies.md").read_text()
    assert table() in page, "docs/reading-replies.md: the reply-corpus table is stale (python -m tests.corpus.replies)"


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
