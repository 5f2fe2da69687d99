"""The report's header card: what was run (trace, models, GPUs, pools with capacities, code) and what it
could reach (the trace's ideal reuse), with the eviction counts, before any table or figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.escape import code_span, plain
from reports.formatting import count, share
from reports.grid_data import FOLLOWUP, GridData, code_groups, code_warnings
from sim.code_version import describe_code, key_part

POOLS = (
    ("FULL", "full_pages", "tokens"),
    ("SWA", "swa_pages", "tokens"),
    ("MAMBA", "mamba_pool_states", "states"),
)
PEAKS = {"FULL": "peak_full_slots", "SWA": "peak_swa_slots", "MAMBA": "peak_mamba_states"}


def header_card(data: GridData, baseline: str) -> list[tuple[str, str]]:
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
        ("policies", ", ".join(code_span(p) for p in data.policies()) + f"; baseline {code_span(baseline)}"),
        ("points", _points_text(data)),
        ("pools (capacity)", pools_text(points)),
        ("peak held (largest point)", peaks_text(points)),
        ("ideal reuse", ideal_text(data)),
        ("evictions (nodes)", evictions_text(points)),
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


def capacities(points: pd.DataFrame) -> dict[str, pd.Series]:
    """Each pool's size per point, in tokens (KV) or states (MAMBA)."""
    page = points["page_size"].astype(int)
    return {
        name: points[column].astype(int) * (page if unit == "tokens" else 1) for name, column, unit in POOLS
    }


def pools_text(points: pd.DataFrame) -> str:
    parts = []
    for (name, _, unit), sizes in zip(POOLS, capacities(points).values(), strict=True):
        low, high = int(sizes.min()), int(sizes.max())
        parts.append(f"{name} {count(low)}" + (f"–{count(high)}" if high != low else "") + f" {unit}")
    return ", ".join(parts)


def peaks_text(points: pd.DataFrame) -> str:
    """Each pool's fullest point (peak against that point's capacity): a saturated pool shows."""
    parts = []
    for (name, _, unit), sizes in zip(POOLS, capacities(points).values(), strict=True):
        if not sizes.max():
            parts.append(f"{name}: no pool")
            continue
        peaks = points[PEAKS[name]].astype(int)
        top = (peaks / sizes.where(sizes > 0)).idxmax()
        parts.append(
            f"{name} {count(peaks[top])} / {count(sizes[top])} {unit} ({share(peaks[top], sizes[top])})"
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


def evictions_text(points: pd.DataFrame) -> str:
    parts = []
    for name, column in (("FULL", "evictions_full"), ("SWA", "evictions_swa"), ("MAMBA", "evictions_mamba")):
        if column not in points:
            return "not recorded"
        values = points[column].astype(int)
        low, high = int(values.min()), int(values.max())
        parts.append(f"{name} {count(low)}" + (f"–{count(high)}" if high != low else ""))
    text = ", ".join(parts)
    return text + (
        " (none in any point)"
        if all(p.endswith(" 0") for p in parts)
        else " (per point: the table *Every point* below)"
    )


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
