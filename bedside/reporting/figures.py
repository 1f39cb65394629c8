"""The figures of ``bedside report`` (matplotlib, Agg backend): each is written as PNG (shown in the
HTML) and SVG (linked). They draw the tables of :mod:`bedside.reporting.tables`; no number is
computed here.

- Figure 2: heatmaps of every Table 1 metric by ICD chapter × model (:func:`heatmaps`);
- Figure 3: every Table 1 metric by a persona axis × model, bars with 95 % CIs (:func:`grouped_bars`);
- Figure 4: failure analysis — clean-complete / erroneous / system-failure counts and end-reason
  mix per model (:func:`outcomes`), erroneous rate by persona axis (:func:`grouped_bars`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.layout_engine import PlaceHolderLayoutEngine  # noqa: E402

FORMATS = ("png", "svg")
DPI = 110
#: the SVG keeps its text as text, searchable and editable (matplotlib's default draws every glyph as a path:
#: on a 10 x 477 sweep's report that took half the SVGs' drawing time, 5.1 s against 2.5 s, and a quarter
#: more bytes)
SVG_TEXT: dict[Any, Any] = {"svg.fonttype": "none"}


def save(fig, out: Path, name: str) -> str:
    """Write ``name.png`` and ``name.svg`` into ``out``, cropped to the drawn content as
    ``bbox_inches="tight"`` crops; returns ``name``.

    The layout and the crop box are computed once and used for both formats (``savefig`` with
    ``bbox_inches="tight"`` draws the figure once more per format to find them: three passes per figure
    fewer, about a third of the report's figure time)."""
    fig.set_dpi(DPI)
    if not isinstance(fig.get_layout_engine(), (type(None), PlaceHolderLayoutEngine)):
        fig.draw_without_rendering()  # the layout engine (constrained) places the axes
    fig.set_layout_engine(None)  # and they stay where it (or tight_layout) put them, in every format
    box = fig.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"])
    for ext in FORMATS:
        with plt.rc_context(SVG_TEXT if ext == "svg" else None):
            fig.savefig(out / f"{name}.{ext}", dpi=DPI, bbox_inches=box)
    plt.close(fig)
    return name


def _short(text: str, width: int = 44) -> str:
    """``text`` within ``width`` characters, cut in the middle (labels differ at either end)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head].rstrip() + "…" + text[len(text) - (width - 1 - head) :].lstrip()


def heatmaps(grid: pd.DataFrame, keys: Sequence[tuple[str, str]], out: Path, name: str, ylabel: str) -> str | None:
    """One heatmap per metric (rows: the stratum's values, columns: models), side by side, rows shared;
    each metric has its own colour scale; cells show the mean (blank: no scored case)."""
    if grid.empty:
        return None
    groups = sorted(grid["group"].unique())
    models = sorted(grid["model"].unique())
    present = [(k, label) for k, label in keys if k in set(grid["key"])]
    width = 2.2 + len(present) * (0.55 * len(models) + 0.9)
    fig, axes = plt.subplots(
        1, len(present), figsize=(width, 1.6 + 0.28 * len(groups)), sharey=True, squeeze=False, layout="constrained"
    )
    for ax, (key, label) in zip(axes[0], present):
        table = grid[grid["key"] == key].pivot_table(index="group", columns="model", values="mean", aggfunc="first")
        table = table.reindex(index=groups, columns=models)
        values = table.to_numpy(dtype=float)
        image = ax.imshow(np.ma.masked_invalid(values), aspect="auto", cmap="viridis")
        bar = fig.colorbar(image, ax=ax, fraction=0.08, pad=0.02)
        bar.ax.tick_params(labelsize=6)
        for (i, j), v in np.ndenumerate(values):
            if v == v:
                dark = float(image.norm(v)) < 0.6  # viridis: dark at the low end
                cell = ax.text(
                    j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="white" if dark else "black"
                )
                cell.set_in_layout(False)  # inside its cell: the layout and the crop need not measure it
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(len(models)), [_short(m, 28) for m in models], rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(groups)), [_short(g) for g in groups], fontsize=7)
    axes[0][0].set_ylabel(ylabel)
    return save(fig, out, name)


def grouped_bars(
    grid: pd.DataFrame, keys: Sequence[tuple[str, str]], out: Path, name: str, xlabel: str, ncols: int = 3
) -> str | None:
    """One panel per key (or per stratum when ``grid`` holds several strata of one key): x = the
    stratum's values, one bar per model, error bars = 95 % CI."""
    if grid.empty:
        return None
    panels = [(k, label) for k, label in keys if k in set(grid["key"])]
    if not panels:
        return None
    ncols = min(ncols, len(panels))
    nrows = -(-len(panels) // ncols)
    models = sorted(grid["model"].unique())
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.7 * nrows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (key, label) in zip(axes.flat, panels):
        part = grid[grid["key"] == key]
        groups = sorted(part["group"].unique())
        width = 0.8 / len(models)
        mean, ci_lower, ci_upper = (  # each model x group (NaN: no such cell)
            part.pivot(index="model", columns="group", values=column)
            .reindex(index=models, columns=groups)
            .to_numpy(dtype=float)
            for column in ("mean", "ci_lower", "ci_upper")
        )
        lower = np.clip(mean - ci_lower, 0, None)
        upper = np.clip(ci_upper - mean, 0, None)
        x = np.arange(len(groups)) + (np.arange(len(models))[:, None] - (len(models) - 1) / 2) * width
        for m, model in enumerate(models):
            ax.bar(x[m], np.nan_to_num(mean[m]), width, label=_short(model, 30))
        # the error bars of every model in one call, drawn as ``bar(yerr=…)`` draws them (black, capsize 2)
        ax.errorbar(
            x.ravel(),
            np.nan_to_num(mean).ravel(),
            yerr=np.nan_to_num(np.vstack([lower.ravel(), upper.ravel()])),
            fmt="none",
            ecolor="k",
            capsize=2,
            label="_nolegend_",
        )
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(len(groups)), [_short(g, 24) for g in groups], rotation=30, ha="right", fontsize=7)
        ax.set_xlabel(xlabel, fontsize=8)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    return save(fig, out, name)


def outcomes(counts: pd.DataFrame, reasons: pd.DataFrame, out: Path, name: str) -> str | None:
    """Left: clean-complete / erroneous / system-failure sessions per model (stacked counts);
    right: the end-reason mix per model (stacked shares)."""
    if counts.empty:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.2 + 0.25 * len(counts)))
    y = np.arange(len(counts))
    start = np.zeros(len(counts))
    for column, color in (("clean_complete", "tab:green"), ("erroneous", "tab:orange"), ("system_failures", "tab:red")):
        values = counts[column].to_numpy(dtype=float)
        left.barh(y, values, left=start, color=color, label=column.replace("_", " "))
        start += values
    left.set_yticks(y, [_short(m, 30) for m in counts["model"]], fontsize=8)
    left.set_xlabel("sessions")
    left.legend(fontsize=7)
    left.set_title("Session outcomes", fontsize=9)
    table = reasons.pivot_table(index="model", columns="end_reason", values="share", aggfunc="sum").fillna(0.0)
    table = table.reindex(counts["model"]).fillna(0.0)
    start = np.zeros(len(table))
    for reason in table.columns:
        values = table[reason].to_numpy(dtype=float)
        right.barh(np.arange(len(table)), values, left=start, label=reason)
        start += values
    right.set_yticks(np.arange(len(table)), [_short(m, 30) for m in table.index], fontsize=8)
    right.set_xlim(0, 1)
    right.set_xlabel("share of sessions")
    right.legend(fontsize=7)
    right.set_title("End-reason mix", fontsize=9)
    fig.tight_layout()
    return save(fig, out, name)


def erroneous_by_axis(grid: pd.DataFrame, out: Path, name: str) -> str | None:
    """Erroneous rate by each persona axis × model (one panel per axis)."""
    if grid.empty:
        return None
    panel = grid.assign(key=grid["stratum"])
    axes = [(a, a.replace("_", " ")) for a in dict.fromkeys(grid["stratum"])]
    return grouped_bars(panel, axes, out, name, xlabel="", ncols=4)
