"""Experiment ``real-multiturn``: the seeds' effect on a real trace's conversations.

The seeds' whole effect is a second turn reusing the first turn's decode region. On the Mooncake
conversation trace, imported with its chains (``trace import mooncake``), this runs each pair of
policies (``sglang -> sglang-retain`` on the SWA+MAMBA ``inkling``, ``freetoken -> freetoken-lazy`` on the
SWA-only ``gemma-4-26b-a4b``) with pools large enough that eviction does not decide the outcome, and at
the default pool size (40 GB of KV split as SGLang does). It reports, over the follow-up requests,
decode-region hits ``n/N before -> after`` beside the ideal (an infinite FULL cache), reused tokens, SWA
held, and why each follow-up that misses, misses: the trace allows no hit; the previous turn's finish never
cached its answer (a MAMBA model's insert stops at the last checkpoint, so a short answer is freed); the
FULL KV was evicted (or the previous turn had not finished); or it was there but a SWA window or MAMBA
checkpoint was not.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sim.run.metrics import compare
from sim.run.simulate import SimConfig, SimResult, simulate
from sim.sched.request import served_mask
from sim.trace import Trace

PAIRS = (("sglang", "sglang-retain", "inkling"), ("freetoken", "freetoken-lazy", "gemma-4-26b-a4b"))
DEFAULT_KV_GB = 40.0  # SimConfig's default budget
LARGE_KV_GB = 3000.0  # inkling: 61M FULL tokens, 3.1M MAMBA states; gemma: 18.5M FULL tokens


def pool_settings(large_kv_gb: float = LARGE_KV_GB) -> dict[str, float]:
    return {"large": large_kv_gb, "default": DEFAULT_KV_GB}


@dataclass
class RealMultiturn:
    pairs: pd.DataFrame  # one row per pool setting and policy pair, each figure as ``base -> other``
    misses: pd.DataFrame  # one row per run: follow-ups that hit, and why the others miss
    changed: pd.DataFrame  # per pair, the first follow-ups whose decode-region hit differs


def real_multiturn(
    trace: Trace,
    pools: dict[str, float] | None = None,
    pairs=PAIRS,
    mode: str = "timed",
    num_changed: int = 5,
    on_point=None,
) -> RealMultiturn:
    pools = pool_settings() if pools is None else pools
    pair_rows, miss_rows, changed = [], [], []
    for setting, kv_gb in pools.items():
        label = f"{setting} ({kv_gb:g} GB)"
        for base, other, model in pairs:
            runs = {}
            for policy in (base, other):
                # no offline bounds: the table compares with the trace's ideal
                config = SimConfig(policy=policy, model=model, kv_memory_gb=kv_gb, mode=mode, bounds=False)
                runs[policy] = simulate(trace, config)
                miss_rows.append({"pools": label, "policy": policy, "model": model, **misses(runs[policy])})
                if on_point:
                    on_point()
            pair_rows.append(pair_row(label, runs[base], runs[other]))
            changed.append(
                changed_requests(runs[base], runs[other], num_changed).assign(
                    pools=label, policies=f"{base} -> {other}"
                )
            )
    return RealMultiturn(
        pd.DataFrame(pair_rows), pd.DataFrame(miss_rows), pd.concat(changed, ignore_index=True)
    )


def followups(result: SimResult) -> pd.DataFrame:
    requests = result.requests
    return requests[requests["followup"] & served_mask(requests)]


def pair_row(setting: str, base: SimResult, other: SimResult) -> dict:
    before, after = followups(base), followups(other)
    changes = compare(before, after)
    return {
        "pools": setting,
        "policies": f"{base.config.policy} -> {other.config.policy}",
        "model": base.config.model,
        "decode-region hits": f"{_hits(before)}/{len(before)} -> {_hits(after)}/{len(after)}",
        "ideal hits": base.summary.ideal_decode_region_hits,
        "reused tokens": f"{int(before['cached_tokens'].sum())} -> {int(after['cached_tokens'].sum())}",
        "ideal reused": int(before["ideal_cached_tokens"].sum()),
        "blocked (SWA/MAMBA)": f"{int(before['blocked'].sum())} -> {int(after['blocked'].sum())}",
        "peak SWA tokens": f"{base.summary.peak_swa_slots} -> {other.summary.peak_swa_slots}",
        "mean SWA tokens": f"{base.summary.mean_swa_slots:.0f} -> {other.summary.mean_swa_slots:.0f}",
        "FULL evictions": f"{base.summary.evictions_full} -> {other.summary.evictions_full}",
        "improved / regressed": f"{changes['improved_requests']} / {changes['regressed_requests']}",
    }


def misses(result: SimResult) -> dict:
    """Follow-ups by outcome: a decode-region hit, or why not (the first reason that applies)."""
    rows = followups(result)
    edge = rows["previous_prompt_tokens"].astype(float) + 1
    hit = rows["decode_region_hit"].astype(bool)
    no_ideal = ~hit & (rows["ideal_cached_tokens"] <= edge)
    never_kept = ~hit & ~no_ideal & (rows["previous_inserted_tokens"].astype(float) <= edge)
    not_cached = ~hit & ~no_ideal & ~never_kept & (rows["full_depth"] <= edge)
    return {
        "follow-ups": len(rows),
        "hits": int(hit.sum()),
        "miss: trace allows none": int(no_ideal.sum()),
        "miss: previous answer never cached": int(never_kept.sum()),
        "miss: evicted or unfinished": int(not_cached.sum()),
        "miss: blocked by SWA/MAMBA": int((~hit & ~no_ideal & ~never_kept & ~not_cached).sum()),
    }


def changed_requests(base: SimResult, other: SimResult, limit: int = 10) -> pd.DataFrame:
    """The follow-ups whose decode-region hit differs between two runs: the requests that explain it."""
    before, after = followups(base).set_index("id"), followups(other).set_index("id")
    changed = before.index[
        before["decode_region_hit"].astype(bool) != after["decode_region_hit"].astype(bool)
    ]
    columns = ["prompt_tokens", "previous_prompt_tokens", "full_depth", "ideal_cached_tokens"]
    table = before.loc[changed, columns].astype(int)
    table["cached"] = [
        f"{int(before.at[i, 'cached_tokens'])} -> {int(after.at[i, 'cached_tokens'])}" for i in changed
    ]
    return table.head(limit).reset_index()


def _hits(rows: pd.DataFrame) -> int:
    return int(rows["decode_region_hit"].astype(bool).sum())
