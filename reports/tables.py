"""Plain-text and markdown tables in the seeds' own shape, ready to paste into a pull request."""
from __future__ import annotations

import pandas as pd

SUMMARY_ROWS = [
    ("requests", "requests"), ("rejected", "rejected_requests"), ("hits", "hits"),
    ("decode-region hits", "decode_region_hits"), ("follow-up requests", "followup_requests"),
    ("prompt tokens", "prompt_tokens"), ("reused (cached) tokens", "cached_tokens"),
    ("recomputed tokens", "recomputed_tokens"), ("blocked tokens", "blocked_tokens"),
    ("mean reuse fraction", "mean_reuse_fraction"), ("peak FULL slots", "peak_full_slots"),
    ("peak SWA slots", "peak_swa_slots"), ("mean SWA slots", "mean_swa_slots"),
    ("peak MAMBA states", "peak_mamba_states"), ("makespan (s)", "makespan_s"),
    ("output tokens/s", "output_tokens_per_s"), ("mean TTFT (s)", "mean_ttft_s"),
    ("retractions", "retractions"), ("evictions FULL / SWA / MAMBA (nodes)", "evictions"),
    ("upper bound: ideal reused tokens", "ideal_cached_tokens"),
    ("upper bound: ideal decode-region hits", "ideal_decode_region_hits"),
    ("gap: evicted or not finished", "gap_evicted_tokens"),
    ("gap: never kept (past the last checkpoint)", "gap_never_kept_tokens"),
    ("gap: blocked by SWA / MAMBA", "gap_blocked_tokens"),
    ("bound: Belady (FULL, same budget)", "bound_belady_tokens"),
    ("bound: any policy with these pools", "bound_tokens"),
    ("reused / bound", "cached_of_bound"),
    ("bounds", "bound_skipped"),
]


TIME_KEYS = ("makespan_s", "output_tokens_per_s", "mean_ttft_s")


def summary_table(summary: dict, title: str, timed: bool = True) -> str:
    """``timed=False`` (replay mode): the time rows read "none (replay)", not a misleading 0."""
    if "evictions_full" in summary:
        summary = dict(summary, evictions=f"{summary['evictions_full']} / {summary['evictions_swa']} / "
                                          f"{summary['evictions_mamba']}")
    width = max(len(label) for label, _ in SUMMARY_ROWS)
    lines = [title]
    for label, key in SUMMARY_ROWS:
        if key in summary:
            text = "none (replay)" if key in TIME_KEYS and not timed else _fmt(summary[key])
            lines.append(f"  {label:<{width}}  {text}")
    return "\n".join(lines)


def compare_table(base: dict, other: dict, base_name: str, other_name: str, changes: dict) -> str:
    """``base -> other`` per figure, as PR #34729 reports it (``16/32 -> 32/32``)."""
    rows = [("hits", f"{base['hits']}/{base['requests']} -> {other['hits']}/{other['requests']}")]
    if base["followup_requests"]:
        rows.append(("decode-region hits", f"{base['decode_region_hits']}/{base['followup_requests']} -> "
                                           f"{other['decode_region_hits']}/{other['followup_requests']}"
                                           + _bound(base, "ideal_decode_region_hits")))
    for label, key in SUMMARY_ROWS:
        if key in ("cached_tokens", "recomputed_tokens", "mean_reuse_fraction", "peak_swa_slots",
                   "peak_mamba_states", "makespan_s"):
            rows.append((label, f"{_fmt(base[key])} -> {_fmt(other[key])}{_pct(base[key], other[key])}"))
    if "gap_blocked_tokens" in base:
        rows.append(("upper bound: ideal reused tokens", _fmt(base["ideal_cached_tokens"])))
        rows.append(("gap: evicted / never kept / blocked", f"{_gap(base)} -> {_gap(other)}"))
    if "bound_tokens" in base and "bound_tokens" in other:
        rows.append(("bound: any policy with these pools", f"{base['bound_tokens']} -> {other['bound_tokens']}"))
        rows.append(("reused / bound", f"{base['cached_of_bound']:.1%} -> {other['cached_of_bound']:.1%}"))
    rows.append(("improved / regressed requests",
                 f"{changes['improved_requests']} / {changes['regressed_requests']}"))
    width = max(len(label) for label, _ in rows)
    return "\n".join([f"{base_name} -> {other_name}"] + [f"  {label:<{width}}  {text}" for label, text in rows])


def markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule] + body)


def _gap(summary: dict) -> str:
    return f"{summary['gap_evicted_tokens']} / {summary['gap_never_kept_tokens']} / {summary['gap_blocked_tokens']}"


def _bound(summary: dict, key: str) -> str:
    return f" (ideal {summary[key]})" if key in summary else ""


def _pct(before, after) -> str:
    if not isinstance(before, (int, float)) or not before or before == after:
        return ""
    return f" ({(after - before) / before:+.1%})"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)
