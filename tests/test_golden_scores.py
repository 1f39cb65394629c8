"""Golden scores: the scripted runs give the committed per-sample score values and answers
(``tests/golden/``): exactly, except the floating-point results of numeric-library kernels
(:data:`tests.golden.make_golden.KERNEL_FLOATS`), which are compared within their measured tolerance.
A deliberate change regenerates them (``python -m tests.golden.make_golden``) in a commit that lists
what changed and why."""

from __future__ import annotations

import json
import math

import pytest

from tests.golden import make_golden

pytestmark = pytest.mark.eval


@pytest.mark.parametrize("name", list(make_golden._runs()))
def test_scripted_scores_equal_the_golden(name):
    got = make_golden.golden_of(name)
    assert got, f"{name}: no samples"
    assert make_golden.differences(name, got) == []


SAMPLE = "demo-001#1"


def moved(scorer: str, key: str, change) -> list[str]:
    """The differences reported when one value of the committed discharge golden file is changed."""
    got = json.loads(make_golden.path_of("discharge").read_text())
    got[SAMPLE]["scores"][scorer][key] = change(got[SAMPLE]["scores"][scorer][key])
    return make_golden.differences("discharge", got)


def test_a_cosine_moved_by_1e_4_fails_and_kernel_noise_passes():
    assert moved("factual_consistency", "cosine", lambda v: v) == []
    for delta in (1e-4, -1e-4):
        [diff] = moved("factual_consistency", "cosine", lambda v, d=delta: v + d)
        assert (
            diff.startswith(f"discharge {SAMPLE} factual_consistency.cosine: ") and "(|diff| 1.0e-04 > 1e-05)" in diff
        )
    # what another CPU kernel does (at most 1.0e-7 measured), and up to the tolerance
    assert moved("factual_consistency", "cosine", lambda v: v + 1.0e-7) == []
    assert moved("factual_consistency", "cosine", lambda v: v - 0.9e-5) == []
    assert len(moved("factual_consistency", "cosine", lambda v: v + 1.1e-5)) == 1
    # NaN (the golden's "NaN") against a number, and a missing value, are differences, never "close"
    assert len(moved("factual_consistency", "cosine", lambda v: "NaN")) == 1
    assert len(moved("factual_consistency", "cosine", lambda v: None)) == 1


@pytest.mark.parametrize(
    ("scorer", "key"),
    [
        ("factual_consistency", "rouge_l"),  # rouge-score: pure Python
        ("conversation_quality", "readability"),  # textstat: pure Python
        ("topic_checklist", "tcs"),
        ("comprehension", "comprehension"),
    ],
)
def test_floats_computed_in_pure_python_are_compared_exactly(scorer, key):
    [diff] = moved(scorer, key, lambda v: math.nextafter(v, math.inf))
    assert diff.startswith(f"discharge {SAMPLE} {scorer}.{key}: ") and "|diff|" not in diff


def test_counts_grades_and_answers_are_compared_exactly():
    assert len(moved("encounter_outcome", "turns", lambda v: v + 1)) == 1
    assert len(moved("conversation_quality", "clarity", lambda v: v - 1)) == 1
    got = json.loads(make_golden.path_of("discharge").read_text())
    got[SAMPLE]["answer"]["encounter_outcome"] = "max_turns"
    [diff] = make_golden.differences("discharge", got)
    was, now = {"encounter_outcome": "clean_complete"}, {"encounter_outcome": "max_turns"}
    assert diff == f"discharge {SAMPLE} answer: {was!r} -> {now!r}"


def test_every_kernel_float_is_a_float_of_the_golden_files():
    """A renamed scorer or key would leave its tolerance declared for nothing (and the new name exact)."""
    for scorer, key in make_golden.KERNEL_FLOATS:
        values = [
            sample["scores"].get(scorer, {}).get(key)
            for path in make_golden.golden_files()
            for sample in json.loads(path.read_text()).values()
        ]
        assert any(isinstance(v, float) for v in values), f"{scorer}.{key}: in no golden file"
