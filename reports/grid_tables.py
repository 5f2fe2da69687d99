"""A grid's reuse as tables to paste into a pull request: one figure per cell, one line per cell at GitHub's
width, a legend beside each table (``LEGEND``).

The comparison puts, for each setting of the axes held fixed, the baseline's point first and every other value
of the compared axis after it; changes are each point's against the baseline row of its setting.
"""

from __future__ import annotations

import pandas as pd

from reports.axes import POLICY, Baseline, others, rest_of, shown, value_of
from reports.formatting import change, count, percent, seconds
from reports.grid_data import FOLLOWUP, GridData, in_scope
from reports.tables import cell_text
from sim.cache.components import Component
from sim.engines.pool_views import SUMMARY_NAMES
from sim.run.metrics import compare, served_apart
from sim.run.why import why_key

SHORT = {"page_size": "page", "track_interval": "interval", "retention_interval": "retention"}


def column_name(axis: str) -> str:
    return SHORT.get(axis, axis)


def cell_value(value: object) -> object:
    """A setting in a table cell: numbers stay numbers (right-aligned, sorted as numbers), None is ``none``."""
    return shown(value) if value is None or isinstance(value, bool) else value


def scoped_why(reason: str) -> str:
    """A point's column of tokens recomputed for ``reason`` over the requests in scope."""
    return "scoped_" + why_key(reason)


def hits_label(scope: str) -> str:
    return "decode-region hits" if scope == FOLLOWUP else "hits"


def legend(data: GridData, baseline: Baseline) -> str:
    """What each column of the comparison says (a table's cells carry one figure each)."""
    return (
        f"Legend: each setting's `{baseline.label}` point first, every other value of `{baseline.axis}` after it. "
        f"*{hits_label(data.scope)}*, *reused* and *recomputed* count {_scope_words(data)} (n/N: of N in scope); "
        "*Δ reused* is the change from the baseline row of the same setting; *mean reuse* is cached / prompt "
        "tokens per request; *of bound* is the run's reused tokens over the most any policy could reuse with "
        "the point's pools (docs/bounds.md); *served* counts requests that ran (the rest were refused); "
        "*improved* / *regressed* count requests both points served whose reused tokens rose / fell."
    )


def _scope_words(data: GridData) -> str:
    return "the follow-up requests" if data.scope == FOLLOWUP else "all served requests"


def comparison_table(data: GridData, baseline: Baseline) -> pd.DataFrame:
    """One row per point: grouped by the setting of the other axes, the baseline's point first."""
    points = data.points
    groups: dict[tuple, list[pd.Series]] = {}
    for _, row in points.iterrows():
        groups.setdefault(rest_of(data, row, baseline.axis), []).append(row)
    rows = []
    for group in groups.values():
        base = next((r for r in group if value_of(data, r, baseline.axis) == baseline.value), None)
        if base is None or len(group) < 2:
            continue
        for point in [base] + [r for r in group if r is not base]:
            rows.append(_comparison_row(data, baseline, base, point))
    return pd.DataFrame(rows)


def _comparison_row(data: GridData, baseline: Baseline, base: pd.Series, point: pd.Series) -> dict:
    row = {column_name(axis): cell_value(value_of(data, point, axis)) for axis in others(data, baseline.axis)}
    value = cell_value(value_of(data, point, baseline.axis))
    row[column_name(baseline.axis)] = f"{cell_text(value)} (baseline)" if point is base else value
    row[hits_label(data.scope)] = _hits(point)
    row["reused"] = int(point["scoped_cached_tokens"])
    row["Δ reused"] = (
        "" if point is base else change(base["scoped_cached_tokens"], point["scoped_cached_tokens"])
    )
    row["recomputed"] = int(point["scoped_recomputed_tokens"])
    row["mean reuse"] = f"{point['scoped_mean_reuse_fraction']:.3f}"
    row["of bound"] = _of_bound(point)
    row["served"] = f"{count(_served(point))}/{count(point['requests'])}"
    if point is base:
        row["improved"] = row["regressed"] = ""
        return row
    before, after = (
        in_scope(data.requests(base["key"]), data.scope),
        in_scope(data.requests(point["key"]), data.scope),
    )
    changes = compare(before, after)
    row["improved"], row["regressed"] = changes["improved_requests"], changes["regressed_requests"]
    return row


def served_note(data: GridData, baseline: Baseline) -> str:
    """A warning where compared points served different requests: their latencies are not comparable."""
    differ = []
    for _, point in data.points.iterrows():
        if value_of(data, point, baseline.axis) == baseline.value:
            continue
        match = [
            r
            for _, r in data.points.iterrows()
            if value_of(data, r, baseline.axis) == baseline.value
            and rest_of(data, r, baseline.axis) == rest_of(data, point, baseline.axis)
        ]
        if match:
            apart = served_apart(data.requests(match[0]["key"]), data.requests(point["key"]))
            if apart["served_by_base_only"] or apart["served_by_other_only"]:
                differ.append(
                    f"`{point['key']}` ({apart['served_by_base_only']} served only by the baseline)"
                )
    if not differ:
        return ""
    return (
        "**Note**: these points served other requests than their baseline, so their reuse and latencies "
        "are over different requests: " + ", ".join(differ) + "."
    )


def _served(point: pd.Series) -> int:
    return int(point["requests"]) - int(point["rejected_requests"])


def _of_bound(point: pd.Series) -> str:
    if "bound_tokens" not in point or pd.isna(point["bound_tokens"]) or not point["bound_tokens"]:
        return "-"
    return percent(int(point["cached_tokens"]) / int(point["bound_tokens"]))


def _hits(point: pd.Series) -> str:
    return f"{count(point['scoped_hits'])}/{count(point['scoped_requests'])}"


def setting_columns(data: GridData) -> dict[str, list]:
    """The varying settings of every point, as columns named for a table (page, interval, ...)."""
    return {
        column_name(name): [cell_value(setting[i]) for setting in data.points["setting"]]
        for i, name in enumerate(data.settings)
    }


def components(data: GridData) -> list[Component]:
    """The components some point's cache holds (a FULL-only run draws no SWA or MAMBA column)."""
    held = {view.component for layout in data.layouts.values() if layout for view in layout.views}
    capacity = {c for c in Component if (data.points[f"capacity_{SUMMARY_NAMES[c]}"].fillna(0) > 0).any()}
    return [c for c in Component if c in (held or capacity)]


def points_table(data: GridData) -> pd.DataFrame:
    """Every finished point: its settings, its reuse in scope, its peaks and evictions, its latencies."""
    points = data.points
    table = pd.DataFrame({"point": points["key"]})
    if len(data.policies()) > 1 or not data.settings:
        table[POLICY] = points["policy"].values
    for name, values in setting_columns(data).items():
        table[name] = values
    table[hits_label(data.scope)] = [_hits(row) for _, row in points.iterrows()]
    table["reused"] = points["scoped_cached_tokens"].astype(int).values
    table["recomputed"] = points["scoped_recomputed_tokens"].astype(int).values
    table["mean reuse"] = [f"{v:.3f}" for v in points["scoped_mean_reuse_fraction"]]
    table["of bound"] = [_of_bound(row) for _, row in points.iterrows()]
    for comp in components(data):
        table[f"peak {comp.pool_name}"] = points[f"peak_{SUMMARY_NAMES[comp]}"].astype(int).values
    for comp in components(data):
        table[f"evicted {comp.pool_name}"] = points[f"evictions_{comp.layer_kind}"].astype(int).values
    if (points["mode"] == "timed").any():
        table["TTFT p99 (s)"] = [seconds(v) for v in points["ttft_p99_s"]]
    return table


POINTS_LEGEND = (
    "Legend: reuse over the requests in scope as in the comparison; *peak* is the most each pool held at "
    "once (KV in tokens, MAMBA in states; capacities in the header), *evicted* what each pool's eviction took "
    "(radix: nodes; vLLM: blocks)."
)
