"""Golden scores: the scripted runs give exactly the committed per-sample score values and answers
(``tests/golden/``). A deliberate change regenerates them (``python -m tests.golden.make_golden``) in
a commit that lists what changed and why."""

from __future__ import annotations

import pytest

from tests.golden import make_golden


@pytest.mark.parametrize("name", list(make_golden._runs()))
def test_scripted_scores_equal_the_golden(name):
    got = make_golden.golden_of(name)
    assert got, f"{name}: no samples"
    assert make_golden.differences(name, got) == []
