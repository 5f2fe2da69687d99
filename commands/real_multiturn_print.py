"""What ``cli.py experiment real-multiturn`` prints: the pair table, why follow-ups miss, the requests
whose decode-region hit changed, each as plain text or markdown."""

from __future__ import annotations

import sys

from reports.tables import markdown
from sim.experiments.real_multiturn import PAIRS, pool_settings, real_multiturn
from sim.trace import load_trace
from sim.trace.stats import structure


def run_real_multiturn(
    trace_path: str, large_kv_gb: float, pair_names: str, mode: str, as_markdown: bool
) -> str:
    pairs = _pairs(pair_names)
    trace = load_trace(trace_path)
    found = structure(trace)
    if not found["followup_requests"]:
        raise ValueError(
            f"{trace_path}: no follow-up requests (import a Mooncake trace with its chains: "
            "python cli.py trace import mooncake FILE -o trace.jsonl)"
        )
    runs = 2 * len(pairs) * 2
    print(
        f"real-multiturn: {runs} simulations of {len(trace)} requests ({found['followup_requests']} follow-ups)",
        file=sys.stderr,
    )
    result = real_multiturn(trace, pool_settings(large_kv_gb), pairs, mode)
    show = markdown if as_markdown else (lambda t: t.to_string(index=False))
    changed = result.changed[
        ["pools", "policies"] + [c for c in result.changed.columns if c not in ("pools", "policies")]
    ]
    sections = [
        ("Follow-ups, base -> other", result.pairs),
        ("Why follow-ups miss the decode region", result.misses),
        ("Follow-ups whose decode-region hit changed (first few per pair)", changed),
    ]
    return "\n\n".join(
        f"{title}\n{show(table) if not table.empty else '(none)'}" for title, table in sections
    )


def _pairs(pair_names: str) -> tuple:
    by_name = {base: (base, other, model) for base, other, model in PAIRS}
    names = [n.strip() for n in pair_names.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown or not names:
        raise ValueError(
            f"--pairs: unknown pair {unknown[0] if unknown else pair_names!r} (known: {', '.join(by_name)})"
        )
    return tuple(by_name[n] for n in names)
