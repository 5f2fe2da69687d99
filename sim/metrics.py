"""Per-request and per-step tables, and the summaries of SPEC section 6."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.cache.components import Component
from sim.trace import Trace

REQUEST_COLUMNS = [
    "id", "session", "prompt_tokens", "output_tokens", "cached_tokens", "full_depth", "blocked",
    "recomputed_tokens", "reuse_fraction", "followup", "previous_prompt_tokens", "decode_region_hit",
    "arrival_at", "first_token_at", "finished_at", "ttft_s", "tpot_s", "e2e_s", "retractions", "rejected",
    "relies_on_freed_window",
]


POOL_COLUMNS = tuple(f"{comp}_{held}" for comp in Component for held in ("free", "running", "tree"))


def pool_values(usage: dict) -> tuple[int, ...]:
    """A step row's pool columns (POOL_COLUMNS order) from ``CacheManager.usage()``: each PoolUsage is a
    (free, running, tree) tuple already."""
    return usage[Component.FULL] + usage[Component.SWA] + usage[Component.MAMBA]


def previous_prompt_len(trace: Trace, request_id: str) -> int | None:
    """The prompt a follow-up turn extends: the request whose output it quotes, else its ``after``."""
    request = trace.request(request_id)
    quoted = [s.output_of for s in request.prompt if s.output_of is not None]
    target = quoted[-1] if quoted else request.after
    return None if target is None else trace.prompt_len(target)


def request_row(trace: Trace, request_id: str, match, times: dict, retractions: int, rejected: str) -> dict:
    request = trace.request(request_id)
    prompt_len = trace.prompt_len(request_id)
    cached = match.cached_len if match is not None else 0
    previous = previous_prompt_len(trace, request_id)
    first, finished, arrived = times.get("first"), times.get("finished"), times.get("arrived")
    return {
        "id": request_id, "session": request.session, "prompt_tokens": prompt_len,
        "output_tokens": request.output_len, "cached_tokens": cached,
        "full_depth": match.full_depth if match is not None else 0,
        "blocked": match.blocked if match is not None else 0,
        "recomputed_tokens": prompt_len - cached, "reuse_fraction": cached / prompt_len,
        "followup": previous is not None, "previous_prompt_tokens": previous,
        "decode_region_hit": None if previous is None else cached > previous + 1,
        "arrival_at": arrived, "first_token_at": first, "finished_at": finished,
        "ttft_s": _diff(first, arrived), "e2e_s": _diff(finished, arrived),
        "tpot_s": _diff(finished, first) / (request.output_len - 1)
        if request.output_len > 1 and first is not None and finished is not None else None,
        "retractions": retractions, "rejected": rejected,
        "relies_on_freed_window": bool(match is not None and match.relies_on_freed_window),
    }


def _diff(later, earlier):
    return None if later is None or earlier is None else later - earlier


def summarize(requests: pd.DataFrame, steps: pd.DataFrame, page_size: int) -> dict:
    served = requests[requests["rejected"] == ""]
    followups = served[served["followup"]]
    makespan = float(requests["finished_at"].max()) if len(requests) else 0.0
    summary = {
        "requests": int(len(requests)), "rejected_requests": int(len(requests) - len(served)),
        "prompt_tokens": int(served["prompt_tokens"].sum()), "cached_tokens": int(served["cached_tokens"].sum()),
        "recomputed_tokens": int(served["recomputed_tokens"].sum()),
        "blocked_tokens": int(served["blocked"].sum()),
        "mean_reuse_fraction": _round(served["reuse_fraction"].mean()),
        "hits": int((served["cached_tokens"] > 0).sum()),
        "followup_requests": int(len(followups)),
        "decode_region_hits": int(followups["decode_region_hit"].astype(bool).sum()),
        "makespan_s": _round(makespan),
        "output_tokens_per_s": _round(served["output_tokens"].sum() / makespan) if makespan > 0 else 0.0,
        "mean_ttft_s": _round(served["ttft_s"].mean()), "retractions": int(requests["retractions"].sum()),
        "num_steps": int(len(steps)),
    }
    summary.update(latency_percentiles(served))
    summary.update(occupancy(steps, page_size))
    return summary


LATENCIES = (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2e", "e2e_s"))
PERCENTILES = (50, 90, 99)


def latency_percentiles(served: pd.DataFrame) -> dict:
    """``ttft_p50_s`` ... ``e2e_p99_s`` over the served requests (linear interpolation between ranks, as
    numpy's default); 0.0 where no request has the figure (replay mode has no time)."""
    out = {}
    for name, column in LATENCIES:
        values = served[column].dropna().astype(float).to_numpy() if column in served else np.array([])
        for percentile in PERCENTILES:
            out[f"{name}_p{percentile}_s"] = _round(np.percentile(values, percentile)) if len(values) else 0.0
    return out


def pool_capacity(sizes, page_size: int, has_swa: bool = True, has_mamba: bool = True) -> dict:
    """Each pool's size, in the units occupancy is counted in (KV in token slots, MAMBA in states). With one
    shared block pool (vLLM) every component's capacity is the whole pool (a MAMBA state takes a block)."""
    if getattr(sizes, "blocks", 0):
        blocks = int(sizes.blocks)
        return {"capacity_full_slots": blocks * page_size, "capacity_swa_slots": blocks * page_size if has_swa else 0,
                "capacity_mamba_states": blocks if has_mamba else 0, "capacity_blocks": blocks}
    return {"capacity_full_slots": int(sizes.full_pages * page_size),
            "capacity_swa_slots": int(sizes.swa_pages * page_size), "capacity_mamba_states": int(sizes.states)}


def occupancy(steps: pd.DataFrame, page_size: int) -> dict:
    """Peak and mean held slots per pool (KV in token slots, MAMBA in states)."""
    out = {}
    for comp, name, unit in ((Component.FULL, "full_slots", page_size),
                             (Component.SWA, "swa_slots", page_size), (Component.MAMBA, "mamba_states", 1)):
        held = (steps[f"{comp}_running"] + steps[f"{comp}_tree"]) * unit if len(steps) else pd.Series([0])
        out[f"peak_{name}"] = int(held.max())
        out[f"mean_{name}"] = _round(float(held.mean()))
    return out


def compare(base: pd.DataFrame, other: pd.DataFrame) -> dict:
    """Requests whose reuse improved or regressed from ``base`` to ``other``."""
    joined = base.set_index("id")["cached_tokens"].to_frame("base").join(
        other.set_index("id")["cached_tokens"].to_frame("other"))
    return {"improved_requests": int((joined["other"] > joined["base"]).sum()),
            "regressed_requests": int((joined["other"] < joined["base"]).sum())}


def _round(value) -> float:
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 6)
