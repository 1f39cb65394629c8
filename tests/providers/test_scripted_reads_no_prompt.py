"""The test doubles never read a rendered prompt: with every template of ``prompts/`` rendered as one
placeholder string (so no heading, persona sentence, case-fact layout or correction block reaches
them), the scripted runs still give the golden scores (compared as ``tests/test_golden_scores.py``
does: exactly, embedding cosines within their kernel tolerance). What a scripted role needs, it reads
from the sample the call runs in (its situation, :mod:`bedside.providers.scripts`) and from the
conversation's chat roles."""

from __future__ import annotations

import hashlib

import pytest

from bedside import benchmarks, prompts
from bedside.paths import PROMPTS_DIR
from tests.golden import make_golden

pytestmark = pytest.mark.eval

PLACEHOLDER = "[prompt withheld from the test doubles]"


class _Withheld:
    """A template rendered as the placeholder and a digest of what it was rendered from: nothing a
    double could read, but two prompts differ wherever the real ones do, so Inspect's response cache
    (the reference judges' calls are cached across samples) keeps them apart as it keeps the real ones."""

    def __init__(self, name: str) -> None:
        self.name = name

    def render(self, **variables: object) -> str:
        digest = hashlib.sha256(repr((self.name, sorted(variables.items()))).encode()).hexdigest()[:16]
        return f"{PLACEHOLDER} {digest}"


REAL_ENV = prompts._env


class _Env:
    def get_template(self, name: str) -> _Withheld:
        REAL_ENV().get_template(name)  # the template exists (a typo still fails)
        return _Withheld(name)


@pytest.fixture
def withheld(monkeypatch):
    monkeypatch.setattr(prompts, "_env", _Env)
    for benchmark in benchmarks.all_benchmarks():  # one template of each benchmark's prompt folder
        template = next((PROMPTS_DIR / benchmark.name).rglob("*.j2")).relative_to(PROMPTS_DIR).as_posix()
        assert prompts.render(template).startswith(PLACEHOLDER + " "), template


#: every registered benchmark's golden runs (tests/<b>/golden.py)
RUNS = sorted(make_golden._declared())


@pytest.mark.parametrize("name", RUNS)
def test_scripted_scores_do_not_depend_on_prompt_text(name, withheld):
    got = make_golden.golden_of(name)
    assert got, f"{name}: no samples"
    assert make_golden.differences(name, got) == []
