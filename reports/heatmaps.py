"""Reuse over two axes a grid varies (page size x track interval where they do): one panel per value of the
compared axis (the policy, or any knob), then each value minus the baseline (``heatmap_panel.py`` draws a
panel). Cells carry the numbers (``30/32``, ``122,880``, ``95.4%``; differences ``+16``, ``+28,672``,
``+22.4 pp``) in a font shrunk, then wrapped, until each fits its cell. A grid that varies nothing but the
compared axis has no heatmap: its comparison table says it all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from reports.axes import Baseline, others, shown, value_of, values
from reports.cell_fit import fit_cell_texts
from reports.figures import DPI, WIDTH_IN, RenderedFigure, new_figure, render
from reports.grid_data import FOLLOWUP, GridData
from reports.heatmap_metrics import Metric, metrics
from reports.heatmap_panel import Ticks, draw, draw_difference, span_of
from sim.align import ceil_div

PREFERRED = ("page_size", "track_interval")  # on the cells' axes when they vary: the seeds' grids
PANELS_PER_ROW = 3
MIN_CELL_PX = 48  # a cell narrower than this cannot hold "1,489/" at a readable size


@dataclass(frozen=True)
class Layout:
    panel: str  # the compared axis: a panel per value
    y: str | None  # the cells' rows (None: one row)
    x: str  # the cells' columns


def layout_of(data: GridData, baseline: Baseline) -> tuple[Layout, list[str]] | None:
    """The axes the cells run over and the axes left, which split the points into a figure each; None when
    nothing but the compared axis varies."""
    rest = others(data, baseline.axis)
    chosen = [a for a in PREFERRED if a in rest] + [a for a in rest if a not in PREFERRED]
    if not chosen:
        return None
    if len(chosen) == 1:
        return Layout(baseline.axis, None, chosen[0]), []
    return Layout(baseline.axis, chosen[0], chosen[1]), chosen[2:]


def heatmap_figures(data: GridData, baseline: Baseline) -> list[RenderedFigure]:
    found = layout_of(data, baseline)
    if found is None:
        return []
    layout, split = found
    figures = []
    for index, (group_label, group) in enumerate(_groups(data, split)):
        for metric in metrics(data.scope):
            name = f"heatmap-{metric.name}" + (f"-{index + 1}" if group_label else "")
            where = "follow-up requests" if data.scope == FOLLOWUP else "all requests"
            title = f"{metric.label}, over {where}" + (f" ({group_label})" if group_label else "")
            figures.append(render(heatmap_figure(data, group, layout, baseline, metric, title), name, title))
    return figures


def _groups(data: GridData, split: list[str]) -> list[tuple[str, pd.DataFrame]]:
    if not split:
        return [("", data.points)]
    labels = [
        ", ".join(f"{a}={shown(value_of(data, row, a))}" for a in split) for _, row in data.points.iterrows()
    ]
    mask = pd.Series(labels, index=data.points.index)
    return [(label, data.points[mask == label]) for label in dict.fromkeys(labels)]


def heatmap_figure(
    data: GridData, points: pd.DataFrame, layout: Layout, baseline: Baseline, metric: Metric, title: str
) -> Figure:
    rows = [row for _, row in points.iterrows()]
    ys = ordered({value_of(data, r, layout.y) for r in rows}) if layout.y else [None]
    ticks = Ticks(ys, ordered({value_of(data, r, layout.x) for r in rows}), layout.y, layout.x)
    present = {value_of(data, r, layout.panel) for r in rows}
    shown_values = [v for v in values(data, layout.panel) if v in present]
    panels = [(v, None) for v in shown_values] + [
        (v, baseline.value) for v in shown_values if v != baseline.value
    ]
    ncols = min(panels_per_row(len(ticks.xs)), len(panels))
    figure, axes = new_figure(
        0.9 + (2.4 if layout.y else 1.6) * ceil_div(len(panels), ncols),
        ceil_div(len(panels), ncols),
        ncols,
        constrained_layout=True,
    )
    grids = {v: _grid(data, rows, layout, v, ticks, metric) for v in shown_values}
    span = span_of(metric, [grids[v][0] for v in shown_values])
    for ax, (value, against) in zip(axes.ravel(), panels, strict=False):
        name = f"{layout.panel}={shown(value)}"
        if against is None:
            draw(figure, ax, grids[value][0], grids[value][1], ticks, name, span, "viridis", metric, False)
        elif against in grids:
            draw_difference(
                figure, ax, grids[value], grids[against], ticks, f"{name} − {shown(against)}", metric
            )
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    figure.suptitle(title, fontsize=11)
    fit_cell_texts(figure)
    return figure


def ordered(found: set) -> list:
    """Numbers in order, then words (``none``, preset names) in order."""
    numbers = sorted(v for v in found if isinstance(v, (int, float)) and not isinstance(v, bool))
    return numbers + sorted((v for v in found if v not in numbers), key=shown)


def panels_per_row(num_columns: int) -> int:
    """Up to three panels side by side, fewer when a grid has so many columns that cells get too narrow
    (about 60% of a panel's share of 800 px is its image; the rest is labels and the colour bar)."""
    fitting = int(WIDTH_IN * DPI * 0.6 // (MIN_CELL_PX * max(num_columns, 1)))
    return max(1, min(PANELS_PER_ROW, fitting))


def _grid(data: GridData, rows: list, layout: Layout, panel, ticks: Ticks, metric: Metric):
    """Values, cell texts and counts of one panel over ys (rows) x xs (columns); NaN where no point."""
    values_ = np.full((len(ticks.ys), len(ticks.xs)), math.nan)
    counts = values_.copy()
    texts = np.full(values_.shape, "n/a", dtype=object)
    shorts = texts.copy()
    for row in rows:
        if value_of(data, row, layout.panel) != panel:
            continue
        i = ticks.ys.index(value_of(data, row, layout.y)) if layout.y else 0
        j = ticks.xs.index(value_of(data, row, layout.x))
        values_[i, j], texts[i, j], counts[i, j] = metric.value(row), metric.cell(row), metric.count(row)
        shorts[i, j] = metric.short_cell(row)
    return values_, (texts, shorts), counts
