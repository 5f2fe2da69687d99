"""Reuse over page size x track interval: one panel per policy, then each policy minus the baseline.

Fractions (hit rate, mean reuse) are coloured on a fixed 0..1 scale, so two grids compare by colour;
reused tokens from 0 to the grid's largest. A difference panel is coloured on a diverging scale centred at
0 (white: no change); when every difference is 0 the panel says "no difference" and has no scale. Cells
carry the numbers (``30/32``, ``122,880``, ``95.4%``; differences ``+16``, ``+28,672``, ``+22.4 pp``) in a
font shrunk, then wrapped, until each fits its cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from reports.cell_fit import CELL_FONT, SHORT_FORMS, fit_cell_texts
from reports.figures import DPI, WIDTH_IN, RenderedFigure, new_figure, render
from reports.formatting import abbreviated, count
from reports.grid_data import FOLLOWUP, GridData
from sim.align import ceil_div

AXIS_SETTINGS = ("page_size", "track_interval")
PANELS_PER_ROW = 3
MIN_CELL_PX = 48  # a cell narrower than this cannot hold "1,489/" at a readable size
FLAT = ListedColormap(["#eeeeee"])


@dataclass(frozen=True)
class Metric:
    name: str  # file-name stem
    label: str  # the figure's title, with its unit
    short: str  # colour-bar label
    fraction: bool  # coloured on the fixed 0..1 scale

    def value(self, row: pd.Series) -> float:
        if self.name == "hits":
            return row["hits"] / row["num_requests"] if row["num_requests"] else math.nan
        return float(row[self.name])

    def count(self, row: pd.Series) -> float:
        """What a difference panel writes in a cell: hit counts (+16), not fractions of them."""
        return float(row["hits"]) if self.name == "hits" else self.value(row)

    def cell(self, row: pd.Series) -> str:
        if self.name == "hits":
            return f"{count(row['hits'])}/{count(row['num_requests'])}"
        return f"{100 * row[self.name]:.1f}%" if self.fraction else count(row[self.name])

    def short_cell(self, row: pd.Series) -> str:
        """The cell when the full number does not fit: ``94k``, ``1489/\n1500``."""
        if self.name == "reused_tokens":
            return abbreviated(row[self.name], 3)
        return self.cell(row).replace("/", "/\n", 1)

    def difference(self, value: float, short: bool = False) -> str:
        if math.isnan(value):
            return "n/a"
        if value == 0:
            return "0"
        sign = "+" if value > 0 else "-"
        if self.name == "mean_reuse":
            return f"{sign}{100 * abs(value):.1f}" + ("" if short else " pp")
        return sign + (abbreviated(abs(value), 3) if short else count(abs(value)))

    def tick(self, value: float, difference: bool = False, span: float = 1.0) -> str:
        """Colour-bar ticks: percentages (points, for differences) with as many decimals as the span needs."""
        if self.fraction:
            digits = 0 if span >= 0.1 else 1 if span >= 0.01 else 2
            if difference:
                return "0" if value == 0 else f"{100 * value:+.{digits}f} pp"
            return f"{100 * value:.{digits}f}%"
        return ("+" if difference and value > 0 else "") + abbreviated(value, 3)


def metrics(scope: str) -> list[Metric]:
    hits = "decode-region hits" if scope == FOLLOWUP else "requests with a hit"
    return [
        Metric("hits", f"{hits} (n/N)", f"{hits} (share)", True),
        Metric("reused_tokens", "reused (cached) tokens", "reused tokens", False),
        Metric("mean_reuse", "mean reuse fraction (cached / prompt tokens)", "mean reuse", True),
    ]


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
