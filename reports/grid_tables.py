"""A grid's reuse as tables in the seeds' own shape (``16/32 -> 32/32``), ready to paste into a PR."""

from __future__ import annotations

import pandas as pd

from reports.formatting import count
from reports.grid_data import FOLLOWUP, SCOPED, GridData, in_scope
from sim.cache.components import Component
from sim.cache.reasons import (
    BLOCKED_OTHER,
    FULL_EVICTED,
    MAMBA_EVICTED,
    MAMBA_STATE,
    NEVER_KEPT,
    NOT_CACHED,
    PAGE_ROUNDING,
    RETENTION,
    SWA_EVICTION,
    SWA_FINISH_TRIM,
    SWA_TRIGGER,
)
from sim.run.metrics import compare
from sim.run.why import why_key

SHORT = {"page_size": "page", "track_interval": "interval"}


def scoped_why(reason: str) -> str:
    """A point's column of tokens recomputed for ``reason`` over the requests in scope."""
    return SCOPED + why_key(reason)


def hits_label(scope: str) -> str:
    return "decode-region hits" if scope == FOLLOWUP else "hits"


def comparison_table(data: GridData, baseline: str, other: str) -> pd.DataFrame:
    """One row per setting that both policies ran: each reuse figure as ``baseline -> other``."""
    points = data.points
    others = {row["setting"]: row for _, row in points[points["policy"] == other].iterrows()}
    rows = []
    for _, base in points[points["policy"] == baseline].iterrows():
        if base["setting"] not in others:
            continue
        row = _setting_columns(data, base)
        row.update(_compare_columns(data, base, others[base["setting"]]))
        rows.append(row)
    return pd.DataFrame(rows)


def _setting_columns(data: GridData, point: pd.Series) -> dict:
    return {SHORT.get(name, name): value for name, value in zip(data.settings, point["setting"], strict=True)}


def _compare_columns(data: GridData, base: pd.Series, other: pd.Series) -> dict:
    changes = compare(
        in_scope(data.requests(base["key"]), data.scope), in_scope(data.requests(other["key"]), data.scope)
    )
    return {
        hits_label(data.scope): f"{_hits(base)} -> {_hits(other)}",
        "reused tokens": f"{count(base['scoped_cached_tokens'])} -> {count(other['scoped_cached_tokens'])}",
        "recomputed tokens": f"{count(base['scoped_recomputed_tokens'])} -> {count(other['scoped_recomputed_tokens'])}"
        + _percent(base["scoped_recomputed_tokens"], other["scoped_recomputed_tokens"]),
        "mean reuse": f"{base['scoped_mean_reuse_fraction']:.3f} -> {other['scoped_mean_reuse_fraction']:.3f}",
        "upper bound": upper_bound_text(base),
        "reused / bound (all requests)": f"{bound_text(base)} -> {bound_text(other)}",
        GAP_LABEL: f"{gap_text(base)} -> {gap_text(other)}",
        "improved / regressed": f"{count(changes['improved_requests'])} / {count(changes['regressed_requests'])}",
        "points": f"{base['key']} -> {other['key']}",
    }


def upper_bound_text(point: pd.Series) -> str:
    """The ideal (infinite FULL cache, page 1) hits and reused tokens over the requests in scope."""
    if pd.isna(point["scoped_ideal_hits"]):
        return "-"
    return f"{count(point['scoped_ideal_hits'])}/{count(point['scoped_requests'])}, {count(point['scoped_ideal_cached_tokens'])} tokens"


GAP_LABEL = "gap: FULL missing / never kept / blocked / page rounding"
FULL_MISSING, BLOCKED = (
    (FULL_EVICTED, NOT_CACHED),
    (MAMBA_STATE, MAMBA_EVICTED, SWA_TRIGGER, SWA_FINISH_TRIM, SWA_EVICTION, RETENTION, BLOCKED_OTHER),
)


def bound_text(point: pd.Series) -> str:
    """Reused tokens of all served requests over the bound no policy could beat with the point's pools
    (sim/bounds/), and the Belady FULL bound beside it; "-" for a store written before the bounds."""
    if "bound_tokens" not in point or pd.isna(point["bound_tokens"]):
        return "-"
    bound, cached = int(point["bound_tokens"]), int(point["cached_tokens"])
    share = f" ({cached / bound:.1%})" if bound else ""
    return f"{count(cached)}/{count(bound)}{share}, Belady {count(int(point['bound_belady_tokens']))}"


def gap_text(point: pd.Series) -> str:
    """ideal - reused over the requests in scope, split by the ``why`` reasons (sim/run/why.py): FULL KV missing
    (evicted, or not cached yet) / never kept past the previous turn's insert / blocked by a missing SWA window
    or MAMBA state / page rounding. A store without ``why`` gives the upper bound's three-way split with
    page rounding inside the first two."""
    if scoped_why(NEVER_KEPT) in point and not pd.isna(point[scoped_why(NEVER_KEPT)]):
        parts = [
            sum(point[scoped_why(r)] for r in FULL_MISSING),
            point[scoped_why(NEVER_KEPT)],
            sum(point[scoped_why(r)] for r in BLOCKED),
            point[scoped_why(PAGE_ROUNDING)],
        ]
        return " / ".join(count(part) for part in parts)
    if pd.isna(point["scoped_gap_evicted_tokens"]):
        return f"- / - / {count(point['scoped_blocked_tokens'])}"
    return (
        f"{count(point['scoped_gap_evicted_tokens'])} / {count(point['scoped_gap_never_kept_tokens'])} / "
        f"{count(point['scoped_blocked_tokens'])}"
    )


def _hits(point: pd.Series) -> str:
    return f"{count(point['scoped_hits'])}/{count(point['scoped_requests'])}"


def _percent(before: int, after: int) -> str:
    return f" ({(after - before) / before:+.0%})" if before and before != after else ""


def setting_columns(data: GridData) -> dict[str, list]:
    """The varying settings of every point, as columns named for a table (page, interval, ...)."""
    return {
        SHORT.get(name, name): [setting[i] for setting in data.points["setting"]]
        for i, name in enumerate(data.settings)
    }


def points_table(data: GridData) -> pd.DataFrame:
    """Every finished point: its settings, its reuse in scope, and its peak pool occupancy."""
    points = data.points
    table = pd.DataFrame({"point": points["key"], "policy": points["policy"]})
    for name, values in setting_columns(data).items():
        table[name] = values
    table[hits_label(data.scope)] = [_hits(row) for _, row in points.iterrows()]
    table["reused tokens"] = points["scoped_cached_tokens"].values
    table["recomputed tokens"] = points["scoped_recomputed_tokens"].values
    table["mean reuse"] = [f"{v:.3f}" for v in points["scoped_mean_reuse_fraction"]]
    table["upper bound"] = [upper_bound_text(row) for _, row in points.iterrows()]
    table["reused / bound (all requests)"] = [bound_text(row) for _, row in points.iterrows()]
    table[GAP_LABEL] = [gap_text(row) for _, row in points.iterrows()]
    table["peak SWA (tokens)"] = [
        _used(row, "peak_swa_slots", "capacity_swa_slots") for _, row in points.iterrows()
    ]
    table["peak MAMBA (states)"] = [
        _used(row, "peak_mamba_states", "capacity_mamba_states") for _, row in points.iterrows()
    ]
    table["evictions FULL / SWA / MAMBA"] = [
        " / ".join(count(row.get(f"evictions_{c.layer_kind}")) for c in Component)
        for _, row in points.iterrows()
    ]
    return table


def _used(point: pd.Series, used: str, capacity: str) -> str:
    """``peak / capacity`` (a store from before capacities were recorded: the peak alone)."""
    if capacity not in point or pd.isna(point[capacity]):
        return count(point[used])
    return f"{count(point[used])} / {count(point[capacity])}"
