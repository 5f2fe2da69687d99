"""Reuse over page size x track interval: one panel per policy, then each policy minus the baseline.

Fractions (hit rate, mean reuse) are coloured on a fixed 0..1 scale, so two grids compare by colour;
reused tokens from 0 to the grid's largest. A difference panel is coloured on a diverging scale centred at
0 (white: no change); when every difference is 0 the panel says "no difference" and has no scale. Cells
carry the numbers (``30/32``, ``122,880``, ``95.4%``; differences ``+16``, ``+28,672``, ``+22.4 pp``) in a
font shrunk, then wrapped, until each fits its cell.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from reports.cell_fit import CELL_FONT, SHORT_FORMS, fit_cell_texts
from reports.figures import DPI, WIDTH_IN, RenderedFigure, new_figure, render
from reports.grid_data import FOLLOWUP, GridData
from reports.heatmap_metrics import Metric, metrics
from sim.align import ceil_div

AXIS_SETTINGS = ("page_size", "track_interval")
PANELS_PER_ROW = 3
MIN_CELL_PX = 48  # a cell narrower than this cannot hold "1,489/" at a readable size
FLAT = ListedColormap(["#eeeeee"])


def heatmap_figures(data: GridData, baseline: str) -> list[RenderedFigure]:
    figures = []
    for index, (group_label, group) in enumerate(_groups(data)):
        for metric in metrics(data.scope):
            name = f"heatmap-{metric.name}" + (f"-{index + 1}" if group_label else "")
            title = f"{metric.label}, over {_scope_words(data.scope)}" + (
                f" ({group_label})" if group_label else ""
            )
            figures.append(
                render(heatmap_figure(group, data.policies(), baseline, metric, title), name, title)
            )
    return figures


def _scope_words(scope: str) -> str:
    return "follow-up requests" if scope == FOLLOWUP else "all requests"


def _groups(data: GridData) -> list[tuple[str, pd.DataFrame]]:
    """Points split by every varying setting other than the two heatmap axes."""
    others = [i for i, name in enumerate(data.settings) if name not in AXIS_SETTINGS]
    if not others:
        return [("", data.points)]
    labels = data.points["setting"].map(lambda s: ", ".join(f"{data.settings[i]}={s[i]}" for i in others))
    return [(label, data.points[labels == label]) for label in dict.fromkeys(labels)]


def heatmap_figure(
    points: pd.DataFrame, policies: list[str], baseline: str, metric: Metric, title: str
) -> Figure:
    pages = sorted(points["page_size"].unique())
    intervals = sorted(points["track_interval"].unique())
    panels = [(p, None) for p in policies] + [(p, baseline) for p in policies if p != baseline]
    ncols = min(panels_per_row(len(intervals)), len(panels))
    nrows = ceil_div(len(panels), ncols)
    figure, axes = new_figure(0.9 + 2.4 * nrows, nrows, ncols, constrained_layout=True)
    values = {p: _grid(points, p, pages, intervals, metric) for p in policies}
    span = _span(metric, [values[p][0] for p in policies])
    for ax, (policy, base) in zip(axes.ravel(), panels, strict=False):
        if base is None:
            _draw(
                figure,
                ax,
                values[policy][0],
                values[policy][1],
                pages,
                intervals,
                policy,
                span,
                "viridis",
                metric,
                False,
            )
        else:
            _draw_difference(
                figure, ax, values[policy], values[base], pages, intervals, f"{policy} − {base}", metric
            )
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    figure.suptitle(title, fontsize=11)
    fit_cell_texts(figure)
    return figure


def panels_per_row(num_intervals: int) -> int:
    """Up to three panels side by side, fewer when a grid has so many intervals that cells get too narrow
    (about 60% of a panel's share of 800 px is its image; the rest is labels and the colour bar)."""
    fitting = int(WIDTH_IN * DPI * 0.6 // (MIN_CELL_PX * max(num_intervals, 1)))
    return max(1, min(PANELS_PER_ROW, fitting))


def _span(metric: Metric, grids: list[np.ndarray]) -> tuple[float, float]:
    """Fractions: 0..1 always. Counts: 0 to the largest of every policy panel (one scale for all)."""
    if metric.fraction:
        return 0.0, 1.0
    finite = [v for grid in grids for v in grid.ravel() if not math.isnan(v)]
    top = max(finite) if finite else 0.0
    return 0.0, top if top > 0 else 1.0


def _draw_difference(figure, ax, other, base, pages, intervals, title: str, metric: Metric) -> None:
    """Colour by the difference of values, write the difference of counts; white is no change."""
    diff = other[0] - base[0]
    texts = (
        np.vectorize(metric.difference, otypes=[object])(other[2] - base[2]),
        np.vectorize(lambda v: metric.difference(v, True), otypes=[object])(other[2] - base[2]),
    )
    finite = diff[np.isfinite(diff)]
    limit = float(np.abs(finite).max()) if finite.size else 0.0
    if limit == 0:
        _draw(
            figure,
            ax,
            np.where(np.isfinite(diff), 0.0, np.nan),
            texts,
            pages,
            intervals,
            f"{title}: no difference",
            (0.0, 1.0),
            FLAT,
            metric,
            None,
        )
        return
    _draw(figure, ax, diff, texts, pages, intervals, title, (-limit, limit), "RdBu", metric, True)


def _grid(points: pd.DataFrame, policy: str, pages: list, intervals: list, metric: Metric):
    """Values, cell texts and counts of one policy over page (rows) x interval (columns); NaN where no point."""
    values = np.full((len(pages), len(intervals)), math.nan)
    counts = values.copy()
    texts = np.full(values.shape, "n/a", dtype=object)
    shorts = texts.copy()
    for _, row in points[points["policy"] == policy].iterrows():
        i, j = pages.index(row["page_size"]), intervals.index(row["track_interval"])
        values[i, j], texts[i, j], counts[i, j] = metric.value(row), metric.cell(row), metric.count(row)
        shorts[i, j] = metric.short_cell(row)
    return values, (texts, shorts), counts


def _draw(
    figure, ax, values, texts, pages, intervals, title, span, cmap, metric: Metric, difference: bool | None
) -> None:
    """``difference``: False a policy's values, True a difference, None a flat panel (no colour bar)."""
    image = ax.imshow(values, cmap=cmap, vmin=span[0], vmax=span[1], aspect="auto", origin="lower")
    full, short = texts
    for (i, j), text in np.ndenumerate(full):
        artist = ax.text(
            j,
            i,
            text,
            ha="center",
            va="center",
            fontsize=CELL_FONT,
            color="black",
            gid="cell",
            bbox=dict(boxstyle="round,pad=0.15", facecolor="white", alpha=0.75, linewidth=0),
        )
        SHORT_FORMS[artist] = short[i, j]
    ax.set_xticks(range(len(intervals)), [str(v) for v in intervals])
    ax.set_yticks(range(len(pages)), [str(v) for v in pages])
    ax.set_xlabel("track interval (tokens)", fontsize=8)
    ax.set_ylabel("page size (tokens)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.set_title(title, fontsize=9)
    if difference is None:
        return
    width = span[1] - span[0]
    bar = figure.colorbar(
        image, ax=ax, shrink=0.85, format=lambda value, _: metric.tick(value, difference, width)
    )
    unit = " (pp)" if difference and metric.fraction else ""
    bar.set_label(("difference in " if difference else "") + metric.short + unit, fontsize=8)
    bar.ax.tick_params(labelsize=7)
