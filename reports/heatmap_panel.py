"""One heatmap panel drawn: its cells coloured and numbered, the axes' ticks and labels, its colour bar.

Fractions (hit rate, mean reuse) are coloured on a fixed 0..1 scale, so two grids compare by colour; reused
tokens from 0 to the figure's largest. A difference panel is coloured on a diverging scale centred at 0
(white: no change); when every difference is 0 the panel says "no difference" and has no scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.colors import ListedColormap

from reports.axes import shown
from reports.cell_fit import CELL_FONT, SHORT_FORMS
from reports.heatmap_metrics import Metric
from sim.engines.registry import KNOBS
from sim.run.config import POOL_KNOBS

FLAT = ListedColormap(["#eeeeee"])


@dataclass(frozen=True)
class Ticks:
    ys: list  # row values ([None]: one row)
    xs: list  # column values
    y_axis: str | None
    x_axis: str


def span_of(metric: Metric, grids: list[np.ndarray]) -> tuple[float, float]:
    """Fractions: 0..1 always. Counts: 0 to the largest of every value panel (one scale for all)."""
    if metric.fraction:
        return 0.0, 1.0
    finite = [v for grid in grids for v in grid.ravel() if not math.isnan(v)]
    top = max(finite) if finite else 0.0
    return 0.0, top if top > 0 else 1.0


def draw_difference(figure, ax, other, base, ticks: Ticks, title: str, metric: Metric) -> None:
    """Colour by the difference of values, write the difference of counts; white is no change."""
    diff = other[0] - base[0]
    texts = (
        np.vectorize(metric.difference, otypes=[object])(other[2] - base[2]),
        np.vectorize(lambda v: metric.difference(v, True), otypes=[object])(other[2] - base[2]),
    )
    finite = diff[np.isfinite(diff)]
    limit = float(np.abs(finite).max()) if finite.size else 0.0
    if limit == 0:
        flat = np.where(np.isfinite(diff), 0.0, np.nan)
        draw(figure, ax, flat, texts, ticks, f"{title}: no difference", (0.0, 1.0), FLAT, metric, None)
        return
    draw(figure, ax, diff, texts, ticks, title, (-limit, limit), "RdBu", metric, True)


def draw(figure, ax, values, texts, ticks: Ticks, title, span, cmap, metric: Metric, difference) -> None:
    """``difference``: False a panel's values, True a difference, None a flat panel (no colour bar)."""
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
    ax.set_xticks(range(len(ticks.xs)), [shown(v) for v in ticks.xs])
    ax.set_yticks(range(len(ticks.ys)), [shown(v) for v in ticks.ys] if ticks.y_axis else [""])
    ax.set_xlabel(axis_label(ticks.x_axis), fontsize=8)
    ax.set_ylabel(axis_label(ticks.y_axis) if ticks.y_axis else "", fontsize=8)
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


def axis_label(axis: str) -> str:
    """``track interval (tokens)``: the axis's name and, from the knob schema, its unit."""
    spec = KNOBS.get(axis) or POOL_KNOBS.get(axis)
    unit = f" ({spec.unit})" if spec is not None and spec.unit else ""
    return axis.replace("_", " ") + unit
