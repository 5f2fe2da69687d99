"""The report's header card: what was run (trace, models, GPUs, each engine's pools as it describes them,
the SLO, code) and what it could reach (the trace's ideal reuse), with the eviction counts, before any table
or figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.axes import Baseline
from reports.escape import code_span, plain
from reports.formatting import count, share
from reports.grid_data import FOLLOWUP, GridData, code_groups, code_warnings
from reports.grid_tables import components
from sim.cache.components import Component
from sim.code_version import describe_code, key_part
from sim.engines.pool_views import SUMMARY_NAMES, PoolLayout, PoolView
from sim.run.slo import parse_slo


def header_card(data: GridData, baseline: Baseline | None) -> list[tuple[str, str]]:
    points = data.points
    trace = data.trace
    return [
        (
            "trace",
            f"{code_span(Path(trace['path']).name)} (sha256 {code_span(trace['sha256'][:12])}), "
            f"{count(points['requests'].max())} requests, {count(points['followup_requests'].max())} follow-ups",
        ),
        ("model", _values(points["model"])),
        ("GPU", _values(points["gpu"])),
        ("mode", _values(points["mode"])),
        ("policies", ", ".join(code_span(p) for p in data.policies())),
        (
            "baseline",
            f"{code_span(baseline.label)}, compared with every other {plain(baseline.axis)}"
            if baseline
            else "one point",
        ),
        ("points", _points_text(data)),
        ("pools (capacity)", pools_text(data)),
        ("peak held (fullest point)", peaks_text(data)),
        ("ideal reuse", ideal_text(data)),
        ("evictions", evictions_text(data)),
        *([("SLO", slo_text(data))] if slo_text(data) else []),
        ("code", code_text(data)),
    ]


def _values(column: pd.Series) -> str:
    return ", ".join(code_span(v) for v in dict.fromkeys(column))


def _points_text(data: GridData) -> str:
    varying = ", ".join(plain(name) for name in data.settings) or "nothing besides the policy"
    text = f"{len(data.points)} finished; varying: {varying}"
    if data.failed:
        text += f"; **{len(data.failed)} failed** (see `failed/<key>.json`)"
    if data.missing:
        text += f"; **{len(data.missing)} never finished** (rerun the sweep)"
    if data.skipped:
        text += f"; **{len(data.skipped)} left out**: not this grid's (see the warning below)"
    return text


def pools_text(data: GridData) -> str:
    """Each policy's pools as its engine describes them (vLLM: one block pool and its groups); policies with
    the same pools share one entry."""
    by_text: dict[str, list[str]] = {}
    for policy in data.policies():
        keys = data.points.loc[data.points["policy"] == policy, "key"]
        described = list(dict.fromkeys(_layout(data, key).describe() for key in keys))
        text = " | ".join(described[:3]) + (f" | ... ({len(described)} sizes)" if len(described) > 3 else "")
        by_text.setdefault(text, []).append(f"`{policy}`")
    if len(by_text) == 1:
        return next(iter(by_text))
    return "; ".join(f"{', '.join(policies)}: {text}" for text, policies in by_text.items())


def _layout(data: GridData, key: str) -> PoolLayout:
    layout = data.layouts.get(key)
    if layout is not None:
        return layout
    point = data.row(key)  # a store this code cannot rebuild: the summary's capacities, radix names
    views = tuple(
        PoolView(
            c, c.pool_name, "states" if c == Component.MAMBA else "tokens", 1, int(point[f"capacity_{n}"])
        )
        for c, n in SUMMARY_NAMES.items()
        if c == Component.FULL or point[f"capacity_{n}"]
    )
    return PoolLayout(views)


def peaks_text(data: GridData) -> str:
    """Each pool's fullest point (its peak against that point's capacity): a saturated pool shows."""
    points, parts = data.points, []
    for comp in components(data):
        name = SUMMARY_NAMES[comp]
        sizes = points[f"capacity_{name}"].astype(float)
        peaks = points[f"peak_{name}"].astype(int)
        top = (peaks / sizes.where(sizes > 0)).idxmax()
        view = _layout(data, points.loc[top, "key"]).view(comp)
        label = view.name if view else comp.pool_name
        unit = view.unit if view else "tokens"
        parts.append(
            f"{label} {count(peaks[top])} / {count(int(sizes[top]))} {unit} ({share(peaks[top], sizes[top])})"
        )
    return ", ".join(parts)


def ideal_text(data: GridData) -> str:
    """The trace's upper bound over the requests in scope (the same for every point)."""
    point = data.points.iloc[0]
    if pd.isna(point["scoped_ideal_hits"]):
        return "not recorded (a store written before the upper bound was)"
    hits = "decode-region hits" if data.scope == FOLLOWUP else "hits"
    where = "the follow-up requests" if data.scope == FOLLOWUP else "all requests"
    return (
        f"{count(point['scoped_ideal_hits'])}/{count(point['scoped_requests'])} {hits}, "
        f"{count(point['scoped_ideal_cached_tokens'])} reused tokens over {where} (an infinite FULL cache at page 1)"
    )


def evictions_text(data: GridData) -> str:
    """Each pool's evictions, lowest to highest over the points, in what each engine evicts."""
    points, parts = data.points, []
    for comp in components(data):
        column = f"evictions_{comp.layer_kind}"
        if column not in points:
            return "not recorded"
        values = points[column].astype(int)
        low, high = int(values.min()), int(values.max())
        parts.append(f"{comp.pool_name} {count(low)}" + (f"–{count(high)}" if high != low else ""))
    units = " or ".join(dict.fromkeys(_layout(data, key).eviction_unit for key in points["key"]))
    if all(p.endswith(" 0") for p in parts):
        return f"{', '.join(parts)} {units} (none in any point)"
    return f"{', '.join(parts)} {units} (per point: the table *Every point* below)"


def slo_text(data: GridData) -> str:
    """The grid's service-level objectives, where it was given some (``grid --slo``)."""
    slos = {config.slo for config in data.configs.values() if config.slo}
    return "; ".join(parse_slo(text).describe() for text in sorted(slos))


def code_text(data: GridData) -> str:
    groups = code_groups(data)
    if len(groups) > 1:
        return "**mixed**: " + plain(code_warnings(data)[0])
    code = next(iter(data.codes.values()), None)
    current = key_part()
    mine = code is not None and (code.get("version"), code.get("source_sha256")) == (
        current["version"],
        current["source_sha256"],
    )
    return plain(describe_code(code)) + (" (this checkout)" if mine else " (not this checkout's code)")
