"""Per-request and per-step tables, and the summary's sections (docs/figures.md)."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.interface import CacheModel
from sim.cache.sizing import PoolSizes
from sim.run.table_chunks import frame_of_rows
from sim.sched.request import REQUEST_COLUMNS, RequestState
from sim.sched.request import served as served_rows

# True: each pool's held slots summed from the columns as numpy arrays, in place; False: as pandas Series (the
# reference: ``Series.mean`` is the same float64 sum over the count; tests/test_table_figures_lean.py)
OCCUPANCY_BY_ARRAY = True

POOL_COLUMNS = tuple(f"{comp}_{held}" for comp in Component for held in ("free", "running", "tree"))


def pool_values(usage: dict) -> tuple[int, ...]:
    """A step row's pool columns (POOL_COLUMNS order) from ``CacheManager.usage()``: each PoolUsage is a
    (free, running, tree) tuple already."""
    return usage[FULL] + usage[SWA] + usage[MAMBA]


def request_table(states: Iterable[RequestState]) -> pd.DataFrame:
    """The request table: one row per request, in the order given (the trace's)."""
    states = states if isinstance(states, Collection) else list(states)
    return frame_of_rows(lambda: (state.row() for state in states), REQUEST_COLUMNS)


@dataclass(frozen=True, kw_only=True)
class ReuseFigures:
    """The summary's reuse section, over the served requests."""

    requests: int
    rejected_requests: int
    prompt_tokens: int
    cached_tokens: int
    recomputed_tokens: int
    blocked_tokens: int
    mean_reuse_fraction: float
    hits: int
    followup_requests: int
    decode_region_hits: int


@dataclass(frozen=True, kw_only=True)
class TimeFigures:
    """The summary's time section (0 in replay mode)."""

    makespan_s: float
    output_tokens_per_s: float
    mean_ttft_s: float
    retractions: int
    num_steps: int
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    e2e_p50_s: float
    e2e_p90_s: float
    e2e_p99_s: float


@dataclass(frozen=True, kw_only=True)
class PoolFigures:
    """The summary's pools section: held (KV in token slots, MAMBA in states), capacity, evictions."""

    peak_full_slots: int
    mean_full_slots: float
    peak_swa_slots: int
    mean_swa_slots: float
    peak_mamba_states: int
    mean_mamba_states: float
    capacity_full_slots: int
    capacity_swa_slots: int
    capacity_mamba_states: int
    capacity_blocks: int | None = None  # one shared block pool (vLLM)
    evictions_full: int
    evictions_swa: int
    evictions_mamba: int


def reuse_figures(requests: pd.DataFrame) -> ReuseFigures:
    served = served_rows(requests)
    followups = served[served["followup"]]
    return ReuseFigures(
        requests=int(len(requests)),
        rejected_requests=int(len(requests) - len(served)),
        prompt_tokens=int(served["prompt_tokens"].sum()),
        cached_tokens=int(served["cached_tokens"].sum()),
        recomputed_tokens=int(served["recomputed_tokens"].sum()),
        blocked_tokens=int(served["blocked"].sum()),
        mean_reuse_fraction=_round(served["reuse_fraction"].mean()),
        hits=int((served["cached_tokens"] > 0).sum()),
        followup_requests=int(len(followups)),
        decode_region_hits=int(followups["decode_region_hit"].astype(bool).sum()),
    )


def time_figures(requests: pd.DataFrame, steps: pd.DataFrame) -> TimeFigures:
    served = served_rows(requests)
    makespan = float(requests["finished_at"].max()) if len(requests) else 0.0
    return TimeFigures(
        makespan_s=_round(makespan),
        output_tokens_per_s=_round(served["output_tokens"].sum() / makespan) if makespan > 0 else 0.0,
        mean_ttft_s=_round(served["ttft_s"].mean()),
        retractions=int(requests["retractions"].sum()),
        num_steps=int(len(steps)),
        **latency_percentiles(served),
    )


def pool_figures(steps: pd.DataFrame, sizes: PoolSizes, manager: CacheModel) -> PoolFigures:
    page, evictions = manager.page_size, manager.num_evictions()
    counts = {eviction_key(comp): evictions[comp] for comp in Component}
    capacity = pool_capacity(sizes, page, manager.has_swa, manager.has_mamba)
    return PoolFigures(**occupancy(steps, page), **capacity, **counts)


def eviction_key(comp: Component) -> str:
    """The summary's figure for a component's evictions (``evictions_swa``)."""
    return f"evictions_{comp.layer_kind}"


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


def pool_capacity(sizes: PoolSizes, page_size: int, has_swa: bool, has_mamba: bool) -> dict:
    """Each pool's size, in the units occupancy is counted in (KV in token slots, MAMBA in states). With one
    shared block pool (vLLM) every component's capacity is the whole pool (a MAMBA state takes a block)."""
    if sizes.blocks:
        return {
            "capacity_full_slots": sizes.blocks * page_size,
            "capacity_swa_slots": sizes.blocks * page_size if has_swa else 0,
            "capacity_mamba_states": sizes.blocks if has_mamba else 0,
            "capacity_blocks": sizes.blocks,
        }
    return {
        "capacity_full_slots": int(sizes.full_pages * page_size),
        "capacity_swa_slots": int(sizes.swa_pages * page_size),
        "capacity_mamba_states": int(sizes.states),
    }


def occupancy(steps: pd.DataFrame, page_size: int) -> dict:
    """Peak and mean held slots per pool (KV in token slots, MAMBA in states)."""
    out: dict[str, float] = {}
    for comp, name, unit in (
        (FULL, "full_slots", page_size),
        (SWA, "swa_slots", page_size),
        (MAMBA, "mamba_states", 1),
    ):
        if OCCUPANCY_BY_ARRAY:
            peak, mean = _held_figures(steps, comp, unit)
        else:
            held = (steps[f"{comp}_running"] + steps[f"{comp}_tree"]) * unit if len(steps) else pd.Series([0])
            peak, mean = int(held.max()), float(held.mean())
        out[f"peak_{name}"] = peak
        out[f"mean_{name}"] = _round(mean)
    return out


def _held_figures(steps: pd.DataFrame, comp: Component, unit: int) -> tuple[int, float]:
    """The peak and mean of a pool's running + tree columns times ``unit`` (0 and 0.0 without steps)."""
    if not len(steps):
        return 0, 0.0
    held = np.add(steps[f"{comp}_running"].to_numpy(), steps[f"{comp}_tree"].to_numpy())
    if unit != 1:
        np.multiply(held, unit, out=held)
    return int(held.max()), float(held.mean())


def compare(base: pd.DataFrame, other: pd.DataFrame) -> dict:
    """Requests whose reuse improved or regressed from ``base`` to ``other``, among those both served (a request
    one run never served has no reuse to compare: ``served_apart`` counts those)."""
    joined = _served_both(base, other)
    return {
        "improved_requests": int((joined["other"] > joined["base"]).sum()),
        "regressed_requests": int((joined["other"] < joined["base"]).sum()),
    }


def served_apart(base: pd.DataFrame, other: pd.DataFrame) -> dict:
    """How many requests both runs served, and how many only one of them did."""
    served_base, served_other = set(served_rows(base)["id"]), set(served_rows(other)["id"])
    return {
        "served_by_both": len(served_base & served_other),
        "served_by_base_only": len(served_base - served_other),
        "served_by_other_only": len(served_other - served_base),
    }


def _served_both(base: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    base, other = served_rows(base), served_rows(other)
    return (
        base.set_index("id")["cached_tokens"]
        .to_frame("base")
        .join(other.set_index("id")["cached_tokens"].to_frame("other"), how="inner")
    )


def _round(value) -> float:
    return (
        0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 6)
    )
