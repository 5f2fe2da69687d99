"""Pool occupancy over simulated time, per pool (FULL, SWA, MAMBA): running, tree-held and free stacked."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reports.figures import DPI, WIDTH_IN, RenderedFigure, render
from reports.formatting import abbreviated, count, share
from reports.grid_data import GridData
from sim.cache.components import Component

POOLS = (
    (Component.FULL, "FULL KV", "tokens"),
    (Component.SWA, "SWA KV", "tokens"),
    (Component.MAMBA, "MAMBA", "states"),
)
LAYERS = (
    ("running", "held by running requests", "#d62728"),
    ("tree", "held by the tree (evictable)", "#1f77b4"),
    ("free", "free", "#d9d9d9"),
)
ZOOM_BELOW = 0.5  # a pool never more than half used is drawn up to 1.5 x its peak, not its whole size
MAX_STEPS_DRAWN = 20_000  # longer runs are drawn as per-bucket extremes; the figure cannot show more anyway


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
    caption = "Pool occupancy over simulated time: " + "; ".join(
        f"{data.row(k)['policy']} [{k}]" for k in keys
    )
    return render(occupancy_plot(data, keys), "occupancy", caption)


def occupancy_plot(data: GridData, keys: list[str]):
    figure = plt.figure(figsize=(WIDTH_IN, 0.7 + 2.6 * len(keys)), dpi=DPI, layout="constrained")
    rows = figure.subfigures(len(keys), 1, squeeze=False)[:, 0]
    for row, key in zip(rows, keys, strict=True):
        _draw_point(row, data, key)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for _, _, color in LAYERS]
    figure.legend(handles, [label for _, label, _ in LAYERS], loc="outside lower center", ncols=3, fontsize=8)
    figure.suptitle("Pool occupancy over simulated time", fontsize=11)
    return figure


def _draw_point(subfigure, data: GridData, key: str) -> None:
    point = data.row(key)
    steps = data.steps(key)
    timed = "start_at" in steps.columns
    axes = subfigure.subplots(1, len(POOLS))
    for ax, (pool, name, unit) in zip(axes, POOLS, strict=True):
        scale = int(point["page_size"]) if unit == "tokens" else 1
        draw_pool(ax, steps, "start_at" if timed else "step", pool, scale, name, unit)
        ax.set_xlabel("simulated time (s)" if timed else "request (replay order)", fontsize=8)
    others = [
        f"{name} {value}"
        for name, value in zip(data.settings, point["setting"], strict=True)
        if name not in ("page_size", "track_interval")
    ]
    label = ", ".join(
        [point["policy"], f"page {point['page_size']}", f"interval {point['track_interval']}", *others]
    )
    subfigure.suptitle(f"{label} [{key}]", fontsize=10, weight="bold")


def envelope(steps: pd.DataFrame, held: pd.Series, limit: int = MAX_STEPS_DRAWN) -> pd.DataFrame:
    """At most about ``limit`` rows of ``steps``: in each of ``limit / 2`` equal buckets, the row where
    ``held`` is highest and the row where it is lowest, in step order. The drawn series keeps every
    bucket's extremes, so its peak is the full series' peak (a plain stride would miss it)."""
    if len(steps) <= limit:
        return steps
    bucket = np.arange(len(steps)) * (limit // 2) // len(steps)
    frame = pd.DataFrame({"held": held.to_numpy(), "bucket": bucket, "row": np.arange(len(steps))})
    grouped = frame.groupby("bucket")["held"]
    rows = np.union1d(
        frame["row"].to_numpy()[grouped.idxmax().to_numpy()],
        frame["row"].to_numpy()[grouped.idxmin().to_numpy()],
    )
    return steps.iloc[rows]


def draw_pool(ax, steps: pd.DataFrame, x: str, pool: str, scale: int, name: str, unit: str) -> None:
    """Running, tree-held and free stacked; the title's peak and capacity come from the full series."""
    held_full = (
        (steps[f"{pool}_running"] + steps[f"{pool}_tree"]) * scale if len(steps) else pd.Series(dtype=int)
    )
    capacity = int(((steps[f"{pool}_free"] * scale) + held_full).max()) if len(steps) else 0
    peak = int(held_full.max()) if len(steps) else 0
    drawn = envelope(steps, held_full)
    layers = [drawn[f"{pool}_{layer}"] * scale for layer, _, _ in LAYERS]
    ax.stackplot(drawn[x], *layers, colors=[color for _, _, color in LAYERS], linewidth=0)
    zoomed = 0 < peak < ZOOM_BELOW * capacity
    ax.set_ylim(0, max(1.5 * peak if zoomed else capacity, 1))
    if capacity:
        ax.set_title(
            f"{name}: peak {count(peak)} of\n{count(capacity)} {unit} ({share(peak, capacity)})"
            + (", axis cut" if zoomed else ""),
            fontsize=8,
        )
    else:
        ax.set_title(f"{name}: no pool", fontsize=8)
    ax.set_ylabel(f"{name} ({unit})", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.yaxis.set_major_formatter(lambda value, _: abbreviated(value))
