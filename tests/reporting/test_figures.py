"""The report's bar figures draw each (model, value) cell's mean and 95 % interval where it belongs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bedside.reporting import figures


@pytest.fixture
def drawn(monkeypatch):
    """The figures a figure function would save, kept open for the test to read."""
    kept = []

    def keep(fig, out, name):
        kept.append(fig)
        return name

    monkeypatch.setattr(figures, "save", keep)
    yield kept
    for fig in kept:
        figures.plt.close(fig)


def test_grouped_bars_draws_every_cell_with_its_interval(drawn, tmp_path):
    rows = [  # model b has no "mid" value; model a's "low" has no interval (one case)
        ("a", "low", 0.5, math.nan, math.nan),
        ("a", "mid", 0.25, 0.2, 0.4),
        ("a", "top", 0.75, 0.6, 0.9),
        ("b", "low", 0.1, 0.0, 0.3),
        ("b", "top", 1.0, 0.9, 1.0),
    ]
    grid = pd.DataFrame(
        [{"model": m, "stratum": "level", "group": g, "key": "k", "mean": v, "ci_lower": lo, "ci_upper": hi, "n": 5}
         for m, g, v, lo, hi in rows]
    )
    assert figures.grouped_bars(grid, [("k", "K"), ("absent", "X")], tmp_path, "bars", "level") == "bars"
    [fig] = drawn
    ax = fig.axes[0]
    bars = {(round(p.get_x() + p.get_width() / 2, 6)): p.get_height() for p in ax.patches}
    width = 0.8 / 2
    expected = {  # x = the value's position, shifted by model; a missing cell is a bar of height 0
        round(g - width / 2, 6): h for g, h in enumerate([0.5, 0.25, 0.75])
    } | {round(g + width / 2, 6): h for g, h in enumerate([0.1, 0.0, 1.0])}
    assert bars == pytest.approx(expected)
    segments = [s for c in ax.collections for s in c.get_segments()]  # the error bars' vertical lines
    spans = {round(float(s[0][0]), 6): (float(s[0][1]), float(s[1][1])) for s in segments}
    assert len(segments) == 6
    assert spans[round(1 - width / 2, 6)] == pytest.approx((0.2, 0.4))
    assert spans[round(2 + width / 2, 6)] == pytest.approx((0.9, 1.0))
    assert spans[round(0 - width / 2, 6)] == pytest.approx((0.5, 0.5))  # no interval: no bar drawn around it
    assert spans[round(1 + width / 2, 6)] == pytest.approx((0.0, 0.0))  # no cell
    [legend] = [a.get_legend() for a in fig.axes if a.get_legend()]
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    assert not np.isnan([p.get_height() for p in ax.patches]).any()


def test_grouped_bars_without_a_known_key_draws_nothing(drawn, tmp_path):
    grid = pd.DataFrame([{"model": "a", "group": "x", "key": "k", "mean": 1.0, "ci_lower": 1.0, "ci_upper": 1.0}])
    assert figures.grouped_bars(grid, [("other", "O")], tmp_path, "bars", "level") is None
    assert figures.grouped_bars(grid.iloc[:0], [("k", "K")], tmp_path, "bars", "level") is None
    assert drawn == []
