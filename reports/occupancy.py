"""Pool occupancy over simulated time, a panel per pool the point's engine has (``PoolLayout``): running,
cached and free stacked, counted in the engine's own units (vLLM: its blocks of 528 tokens, not pages)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from reports.axes import Baseline, rest_of, shown, value_of
from reports.figures import DPI, WIDTH_IN, RenderedFigure, render
from reports.formatting import abbreviated, count, share
from reports.grid_data import GridData
from sim.cache.components import Component
from sim.engines.pool_views import SUMMARY_NAMES, PoolLayout, PoolView
from sim.engines.registry import KNOBS, PRESETS, engine_of

POOLS = (
    (Component.FULL, "FULL KV", "tokens"),
    (Component.SWA, "SWA KV", "tokens"),
    (Component.MAMBA, "MAMBA", "states"),
)
LAYERS = (
    ("running", "held by running requests", "#d62728"),
    ("tree", "cached, evictable (the tree; vLLM's free queue)", "#1f77b4"),
    ("free", "free", "#d9d9d9"),
)
OTHERS = ("others", "held by the pool's other groups (vLLM)", "#f2c14e")
_NONE = PoolLayout(())
ZOOM_BELOW = 0.5  # a pool never more than half used is drawn up to 1.5 x its peak, not its whole size
MAX_STEPS_DRAWN = 20_000  # longer runs are drawn as per-bucket extremes; the figure cannot show more anyway


def choose_points(data: GridData, baseline: Baseline | None, requested: list[str] | None = None) -> list[str]:
    """The points to draw: ``requested`` keys (a unique prefix is enough), else the baseline's point and one
    other value's at the grid's first setting of the other axes."""
    keys = list(data.points["key"])
    if requested:
        return [_resolve(prefix, keys) for prefix in requested]
    if baseline is None:
        return keys[:1]
    first = rest_of(data, data.points.iloc[0], baseline.axis)
    same = [r for _, r in data.points.iterrows() if rest_of(data, r, baseline.axis) == first]
    chosen = [r["key"] for r in same if value_of(data, r, baseline.axis) == baseline.value][:1]
    chosen += [r["key"] for r in same if value_of(data, r, baseline.axis) != baseline.value][:1]
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
    shown_layers = list(LAYERS) + (
        [OTHERS] if any((data.layouts.get(k) or _NONE).one_pool for k in keys) else []
    )
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for _, _, color in shown_layers]
    labels = [label for _, label, _ in shown_layers]
    figure.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)), fontsize=8)
    figure.suptitle("Pool occupancy over simulated time", fontsize=11)
    return figure


def _draw_point(subfigure, data: GridData, key: str) -> None:
    """A panel per pool the point's engine has, named and counted as it counts them (vLLM: its blocks)."""
    point = data.row(key)
    steps = data.steps(key)
    timed = "start_at" in steps.columns
    layout = data.layouts.get(key) or _radix_like(point)
    axes = np.atleast_1d(subfigure.subplots(1, len(layout.views)))
    for ax, view in zip(axes, layout.views, strict=True):
        pool = PoolDraw(view.component, view.name, view.unit, view.per_count, view.capacity, layout.one_pool)
        draw_pool(ax, steps, "start_at" if timed else "step", pool)
        ax.set_xlabel("simulated time (s)" if timed else "request (replay order)", fontsize=8)
    settings = [
        f"{axis} {shown(value_of(data, point, axis))}" for axis in data.settings if _reads(data, key, axis)
    ]
    label = ", ".join([point["policy"], *settings])
    shared = f"\n{layout.shared}" if layout.shared else ""
    subfigure.suptitle(f"{label} [{key}]{shared}", fontsize=9, weight="bold")


def _reads(data: GridData, key: str, axis: str) -> bool:
    """Whether the point's engine reads ``axis`` (a knob only another engine reads is not its setting)."""
    preset = PRESETS.get(data.row(key)["policy"])
    return axis not in KNOBS or preset is None or engine_of(preset).reads_knob(axis)


def _radix_like(point: pd.Series) -> PoolLayout:
    """A point this code cannot rebuild (an older store): its pools as a radix cache counts them."""
    page = int(point["page_size"])
    views = [
        PoolView(
            comp, name, unit, page if unit == "tokens" else 1, int(point[f"capacity_{SUMMARY_NAMES[comp]}"])
        )
        for comp, name, unit in POOLS
        if comp == Component.FULL or point[f"capacity_{SUMMARY_NAMES[comp]}"]
    ]
    return PoolLayout(tuple(views))


@dataclass(frozen=True)
class PoolDraw:
    component: Component
    name: str
    unit: str
    per_count: int  # units per count of the step table
    capacity: int  # units
    shared: bool  # the pool is shared with other components (vLLM's blocks): they hold the rest


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


def draw_pool(ax, steps: pd.DataFrame, x: str, pool: PoolDraw) -> None:
    """Running, tree-held and free stacked (and, in a shared pool, what the other components hold); the
    title's peak and capacity come from the full series and the engine's description."""
    comp, scale = pool.component, pool.per_count
    held_full = (
        (steps[f"{comp}_running"] + steps[f"{comp}_tree"]) * scale if len(steps) else pd.Series(dtype=int)
    )
    capacity = pool.capacity
    peak = int(held_full.max()) if len(steps) else 0
    drawn = envelope(steps, held_full)
    layers = [drawn[f"{comp}_{layer}"] * scale for layer, _, _ in LAYERS]
    colors = [color for _, _, color in LAYERS]
    if pool.shared and capacity:
        layers.append((capacity - sum(layers)).clip(lower=0))
        colors.append(OTHERS[2])
    ax.stackplot(drawn[x], *layers, colors=colors, linewidth=0)
    zoomed = 0 < peak < ZOOM_BELOW * capacity
    ax.set_ylim(0, max(1.5 * peak if zoomed else capacity, 1))
    ax.set_title(
        f"{pool.name}: peak {count(peak)} of\n{count(capacity)} {pool.unit} ({share(peak, capacity)})"
        + (", axis cut" if zoomed else ""),
        fontsize=8,
    )
    ax.set_ylabel(f"{pool.name} ({pool.unit})", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.yaxis.set_major_formatter(lambda value, _: abbreviated(value))
