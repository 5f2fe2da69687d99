"""Reuse over page size x track interval: one panel per policy, then each policy minus the baseline."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reports.figures import RenderedFigure, new_figure, render, thousands
from reports.grid_data import FOLLOWUP, GridData

AXIS_SETTINGS = ("page_size", "track_interval")
PANELS_PER_ROW = 3


@dataclass(frozen=True)
class Metric:
    name: str  # file-name stem
    label: str  # the figure's title, with its unit
    short: str  # colour-bar label

    def value(self, row: pd.Series) -> float:
        if self.name == "hits":
            return row["hits"] / row["num_requests"] if row["num_requests"] else math.nan
        return float(row[self.name])

    def count(self, row: pd.Series) -> float:
        """What a difference panel writes in a cell: hit counts (+16), not fractions of them."""
        return float(row["hits"]) if self.name == "hits" else self.value(row)

    def cell(self, row: pd.Series) -> str:
        if self.name == "hits":
            return f"{row['hits']}/{row['num_requests']}"
        return f"{row[self.name]:.3f}" if self.name == "mean_reuse" else thousands(row[self.name], 3)


def metrics(scope: str) -> list[Metric]:
    hits = "decode-region hits" if scope == FOLLOWUP else "requests with a hit"
    return [Metric("hits", f"{hits} (n/N)", f"{hits} (fraction)"),
            Metric("reused_tokens", "reused (cached) tokens", "reused tokens"),
            Metric("mean_reuse", "mean reuse fraction (cached / prompt tokens)", "mean reuse fraction")]


def heatmap_figures(data: GridData, baseline: str) -> list[RenderedFigure]:
    figures = []
    for index, (group_label, group) in enumerate(_groups(data)):
        for metric in metrics(data.scope):
            name = f"heatmap-{metric.name}" + (f"-{index + 1}" if group_label else "")
            title = f"{metric.label}, over {data.scope} requests" + (f" ({group_label})" if group_label else "")
            figures.append(render(_figure(group, data.policies(), baseline, metric, title), name, title))
    return figures


def _groups(data: GridData) -> list[tuple[str, pd.DataFrame]]:
    """Points split by every varying setting other than the two heatmap axes."""
    others = [i for i, name in enumerate(data.settings) if name not in AXIS_SETTINGS]
    if not others:
        return [("", data.points)]
    labels = data.points["setting"].map(lambda s: ", ".join(f"{data.settings[i]}={s[i]}" for i in others))
    return [(label, data.points[labels == label]) for label in dict.fromkeys(labels)]


def _figure(points: pd.DataFrame, policies: list[str], baseline: str, metric: Metric, title: str):
    pages = sorted(points["page_size"].unique())
    intervals = sorted(points["track_interval"].unique())
    panels = [(p, None) for p in policies] + [(p, baseline) for p in policies if p != baseline]
    ncols = min(PANELS_PER_ROW, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    figure, axes = new_figure(0.9 + 2.4 * nrows, nrows, ncols, constrained_layout=True)
    values = {p: _grid(points, p, pages, intervals, metric) for p in policies}
    finite = [v for p in policies for v in values[p][0].ravel() if not math.isnan(v)]
    span = (min(finite), max(finite)) if finite else (0.0, 1.0)  # one scale for every policy panel
    for ax, (policy, base) in zip(axes.ravel(), panels, strict=False):
        if base is None:
            _draw(figure, ax, *values[policy][:2], pages, intervals, policy, span, "viridis", metric.short)
        else:
            _draw_difference(figure, ax, values[policy], values[base], pages, intervals, f"{policy} − {base}",
                             metric)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    figure.suptitle(title, fontsize=11)
    return figure


def _draw_difference(figure, ax, other, base, pages, intervals, title: str, metric: Metric) -> None:
    """Colour by the difference of values, write the difference of counts; white is no change."""
    diff = other[0] - base[0]
    texts = np.vectorize(_signed)(other[2] - base[2], metric.name == "mean_reuse")
    limit = max(float(np.nanmax(np.abs(diff))) if np.isfinite(diff).any() else 0.0, 1e-9)
    _draw(figure, ax, diff, texts, pages, intervals, title, (-limit, limit), "RdBu", f"difference in {metric.short}")


def _grid(points: pd.DataFrame, policy: str, pages: list, intervals: list, metric: Metric):
    """Values, cell texts and counts of one policy over page (rows) x interval (columns); NaN where no point."""
    values = np.full((len(pages), len(intervals)), math.nan)
    counts = values.copy()
    texts = np.full(values.shape, "n/a", dtype=object)
    for _, row in points[points["policy"] == policy].iterrows():
        i, j = pages.index(row["page_size"]), intervals.index(row["track_interval"])
        values[i, j], texts[i, j], counts[i, j] = metric.value(row), metric.cell(row), metric.count(row)
    return values, texts, counts


def _signed(value: float, fraction: bool) -> str:
    if math.isnan(value):
        return "n/a"
    if value == 0:
        return "0"
    return f"{value:+.3f}" if fraction else ("+" if value > 0 else "-") + thousands(abs(value), 3)


def _draw(figure, ax, values, texts, pages, intervals, title, span, cmap, label) -> None:
    image = ax.imshow(values, cmap=cmap, vmin=span[0], vmax=span[1], aspect="auto", origin="lower")
    for (i, j), text in np.ndenumerate(texts):
        ax.text(j, i, text, ha="center", va="center", fontsize=8, color="black",
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", alpha=0.7, linewidth=0))
    ax.set_xticks(range(len(intervals)), [str(v) for v in intervals])
    ax.set_yticks(range(len(pages)), [str(v) for v in pages])
    ax.set_xlabel("track interval (tokens)")
    ax.set_ylabel("page size (tokens)")
    ax.set_title(title, fontsize=10)
    bar = figure.colorbar(image, ax=ax, shrink=0.85, format=lambda value, _: thousands(value, 3))
    bar.set_label(label, fontsize=8)
    bar.ax.tick_params(labelsize=8)
