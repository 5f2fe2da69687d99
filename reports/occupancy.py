"""Pool occupancy over simulated time, per pool (FULL, SWA, MAMBA): running, tree-held and free stacked."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from reports.figures import DPI, WIDTH_IN, RenderedFigure, render, thousands
from reports.grid_data import GridData

POOLS = (("full", "FULL KV", "tokens"), ("swa", "SWA KV", "tokens"), ("state", "MAMBA", "states"))
LAYERS = (("running", "held by running requests", "#d62728"), ("tree", "held by the tree (evictable)", "#1f77b4"),
          ("free", "free", "#d9d9d9"))
ZOOM_BELOW = 0.5  # a pool never more than half used is drawn up to 1.5 x its peak, not its whole size
MAX_STEPS_DRAWN = 20_000  # longer runs are thinned evenly; the figure cannot show more anyway


def choose_points(data: GridData, baseline: str, requested: list[str] | None = None) -> list[str]:
    """The points to draw: ``requested`` keys (a unique prefix is enough), else the baseline's point and
    one other policy's at the grid's first setting."""
    keys = list(data.points["key"])
    if requested:
        return [_resolve(prefix, keys) for prefix in requested]
    first = data.points.iloc[0]["setting"]
    same = data.points[data.points["setting"].map(lambda s: s == first)]
    chosen = list(same.loc[same["policy"] == baseline, "key"][:1])
    chosen += list(same.loc[same["policy"] != baseline, "key"][:1])
    return chosen or keys[:1]


def _resolve(prefix: str, keys: list[str]) -> str:
    if not prefix:
        raise ValueError("--points: an empty key; give point keys (or unique prefixes) separated by commas")
    matches = [k for k in keys if k.startswith(prefix)]
    if len(matches) != 1:
        found = "no finished point" if not matches else f"{len(matches)} points ({', '.join(matches)})"
        raise ValueError(f"--points: {prefix!r} matches {found}; keys are the names in points/*.json")
    return matches[0]


def occupancy_figure(data: GridData, keys: list[str]) -> RenderedFigure:
    figure = plt.figure(figsize=(WIDTH_IN, 0.7 + 2.6 * len(keys)), dpi=DPI, layout="constrained")
    rows = figure.subfigures(len(keys), 1, squeeze=False)[:, 0]
    for row, key in zip(rows, keys, strict=True):
        _draw_point(row, data, key)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for _, _, color in LAYERS]
    figure.legend(handles, [label for _, label, _ in LAYERS], loc="outside lower center", ncols=3, fontsize=8)
    figure.suptitle("Pool occupancy over simulated time", fontsize=11)
    caption = "Pool occupancy over simulated time: " + "; ".join(f"{data.row(k)['policy']} [{k}]" for k in keys)
    return render(figure, "occupancy", caption)


def _draw_point(subfigure, data: GridData, key: str) -> None:
    point = data.row(key)
    steps = _thin(data.steps(key))
    timed = "start_at" in steps.columns
    x = steps["start_at"] if timed else steps["step"]
    axes = subfigure.subplots(1, len(POOLS))
    for ax, (pool, name, unit) in zip(axes, POOLS, strict=True):
        scale = int(point["page_size"]) if unit == "tokens" else 1
        _draw_pool(ax, x, steps, pool, scale, name, unit)
        ax.set_xlabel("simulated time (s)" if timed else "request (replay order)", fontsize=8)
    others = [f"{name} {value}" for name, value in zip(data.settings, point["setting"], strict=True)
              if name not in ("page_size", "track_interval")]
    label = ", ".join([point["policy"], f"page {point['page_size']}", f"interval {point['track_interval']}", *others])
    subfigure.suptitle(f"{label} [{key}]", fontsize=10, weight="bold")


def _thin(steps: pd.DataFrame) -> pd.DataFrame:
    stride = -(-len(steps) // MAX_STEPS_DRAWN)
    return steps.iloc[::stride] if stride > 1 else steps


def _draw_pool(ax, x, steps: pd.DataFrame, pool: str, scale: int, name: str, unit: str) -> None:
    layers = [steps[f"{pool}_{layer}"] * scale for layer, _, _ in LAYERS]
    ax.stackplot(x, *layers, colors=[color for _, _, color in LAYERS], linewidth=0)
    capacity = int(sum(layers).max()) if len(steps) else 0
    peak = int((layers[0] + layers[1]).max()) if len(steps) else 0
    zoomed = 0 < peak < ZOOM_BELOW * capacity
    ax.set_ylim(0, max(1.5 * peak if zoomed else capacity, 1))
    if capacity:
        ax.set_title(f"{name}: peak {thousands(peak)}\nof {thousands(capacity)}" + (", axis cut" if zoomed else ""),
                     fontsize=8)
    else:
        ax.set_title(f"{name}: no pool", fontsize=8)
    ax.set_ylabel(f"{name} ({unit})", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.yaxis.set_major_formatter(lambda value, _: thousands(value))
