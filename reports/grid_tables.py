"""A grid's reuse as tables in the seeds' own shape (``16/32 -> 32/32``), ready to paste into a PR."""
from __future__ import annotations

import pandas as pd

from reports.grid_data import FOLLOWUP, GridData, in_scope
from sim.metrics import compare

SHORT = {"page_size": "page", "track_interval": "interval"}


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
    changes = compare(in_scope(data.requests(base["key"]), data.scope),
                      in_scope(data.requests(other["key"]), data.scope))
    return {
        hits_label(data.scope): f"{base['hits']}/{base['num_requests']} -> {other['hits']}/{other['num_requests']}",
        "reused tokens": f"{base['reused_tokens']} -> {other['reused_tokens']}",
        "recomputed tokens": f"{base['recomputed_tokens']} -> {other['recomputed_tokens']}"
                             + _percent(base["recomputed_tokens"], other["recomputed_tokens"]),
        "mean reuse": f"{base['mean_reuse']:.3f} -> {other['mean_reuse']:.3f}",
        "upper bound": upper_bound_text(base),
        "reused / bound (all requests)": f"{bound_text(base)} -> {bound_text(other)}",
        "gap: evicted / never kept / blocked": f"{gap_text(base)} -> {gap_text(other)}",
        "improved / regressed": f"{changes['improved_requests']} / {changes['regressed_requests']}",
        "points": f"{base['key']} -> {other['key']}",
    }


def upper_bound_text(point: pd.Series) -> str:
    """The ideal (infinite FULL cache, page 1) hits and reused tokens over the requests in scope."""
    if pd.isna(point["ideal_hits"]):
        return "-"
    return f"{int(point['ideal_hits'])}/{point['num_requests']}, {int(point['ideal_reused_tokens'])} tokens"


def bound_text(point: pd.Series) -> str:
    """Reused tokens of all served requests over the bound no policy could beat with the point's pools
    (sim/bounds/), and the Belady FULL bound beside it; "-" for a store written before the bounds."""
    if "bound_tokens" not in point or pd.isna(point["bound_tokens"]):
        return "-"
    bound, belady = int(point["bound_tokens"]), int(point["bound_belady_tokens"])
    share = f" ({int(point['cached_tokens']) / bound:.1%})" if bound else ""
    return f"{int(point['cached_tokens'])}/{bound}{share}, Belady {belady}"


def gap_text(point: pd.Series) -> str:
    """ideal - reused, split (sim/upper_bound.py): FULL KV evicted or not finished / never kept past the
    previous turn's last checkpoint / blocked by a missing SWA window or MAMBA checkpoint."""
    if pd.isna(point["evicted_tokens"]):
        return f"- / - / {int(point['blocked_scope_tokens'])}"
    return (f"{int(point['evicted_tokens'])} / {int(point['never_kept_tokens'])} / "
            f"{int(point['blocked_scope_tokens'])}")


def _percent(before: int, after: int) -> str:
    return f" ({(after - before) / before:+.0%})" if before and before != after else ""


def setting_columns(data: GridData) -> dict[str, list]:
    """The varying settings of every point, as columns named for a table (page, interval, ...)."""
    return {SHORT.get(name, name): [setting[i] for setting in data.points["setting"]]
            for i, name in enumerate(data.settings)}


def points_table(data: GridData) -> pd.DataFrame:
    """Every finished point: its settings, its reuse in scope, and its peak pool occupancy."""
    points = data.points
    table = pd.DataFrame({"point": points["key"], "policy": points["policy"]})
    for name, values in setting_columns(data).items():
        table[name] = values
    table[hits_label(data.scope)] = [f"{h}/{n}" for h, n in zip(points["hits"], points["num_requests"], strict=True)]
    table["reused tokens"] = points["reused_tokens"].values
    table["recomputed tokens"] = points["recomputed_tokens"].values
    table["mean reuse"] = [f"{v:.3f}" for v in points["mean_reuse"]]
    table["upper bound"] = [upper_bound_text(row) for _, row in points.iterrows()]
    table["reused / bound (all requests)"] = [bound_text(row) for _, row in points.iterrows()]
    table["gap: evicted / never kept / blocked"] = [gap_text(row) for _, row in points.iterrows()]
    table["peak SWA (tokens)"] = points["peak_swa_slots"].values
    table["peak MAMBA (states)"] = points["peak_mamba_states"].values
    return table
