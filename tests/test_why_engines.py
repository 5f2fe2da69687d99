"""The ``why`` totals of every engine agree with what the run records (issue 25, item 3): they add up to the
recomputed and blocked tokens and to the FULL gap; no range is left unexplained (``blocked_other``); in replay
mode, where every earlier request has finished, FULL KV that is missing was evicted (never "not cached yet");
an engine that evicted nothing of a pool blames no eviction of it."""

from __future__ import annotations

import pytest

from sim.cache.reasons import (
    BLOCKED_OTHER,
    FULL_EVICTED,
    MAMBA_EVICTED,
    MAMBA_STATE,
    NEVER_KEPT,
    NEW,
    NOT_CACHED,
    PAGE_ROUNDING,
    REASONS,
    RETENTION,
    SWA_EVICTION,
)
from sim.run.config import SimConfig
from sim.run.simulate import simulate
from sim.run.why import why_key
from sim.sched.request import served
from sim.trace import Trace, load_trace

PRESSURE = {  # pools that evict on the first 300 requests of the Mooncake sample
    "sglang-retain": dict(model="inkling", pool_tokens=300_000, mamba_states=300),
    "freetoken": dict(model="inkling", pool_tokens=300_000, mamba_states=300),
    "marconi": dict(model="qwen3.5-4b", cache_bytes=3e9),
    "vllm": dict(model="qwen3.5-4b", pool_tokens=300_000),
}
BLOCKED = (
    MAMBA_STATE,
    MAMBA_EVICTED,
    RETENTION,
    SWA_EVICTION,
    "swa_trigger",
    "swa_finish_trim",
    BLOCKED_OTHER,
)


@pytest.fixture(scope="module")
def trace() -> Trace:
    whole = load_trace("traces/mooncake_conversation_500.jsonl")
    return Trace(whole.requests[:300])


def why(summary, reason: str) -> int:
    return summary[why_key(reason)]


def check_totals(result) -> None:
    summary, requests = result.summary, served(result.requests)
    assert sum(why(summary, r) for r in REASONS) == summary["recomputed_tokens"]
    assert sum(why(summary, r) for r in BLOCKED) == summary["blocked_tokens"]
    full_gap = int((requests["ideal_cached_tokens"] - requests["full_depth"]).clip(lower=0).sum())
    missing = (FULL_EVICTED, NOT_CACHED, NEVER_KEPT, PAGE_ROUNDING)
    assert sum(why(summary, r) for r in missing) == full_gap
    assert why(summary, BLOCKED_OTHER) == 0
    for reason, pool in ((FULL_EVICTED, "full"), (MAMBA_EVICTED, "mamba"), (SWA_EVICTION, "swa")):
        if summary[f"evictions_{pool}"] == 0:
            assert why(summary, reason) == 0, reason


@pytest.mark.parametrize("policy", sorted(PRESSURE))
def test_replay_blames_every_missing_prefix_on_its_eviction(trace, policy):
    result = simulate(trace, SimConfig(policy=policy, mode="replay", bounds=False, **PRESSURE[policy]))
    check_totals(result)
    summary = result.summary
    assert summary["evictions_full"] > 0 and why(summary, FULL_EVICTED) > 0
    assert why(summary, NOT_CACHED) == 0  # every earlier request finished: what is missing was evicted
    assert why(summary, NEW) > 0


def test_vllm_timed_names_its_evictions_and_its_retention():
    """The issue's case: vLLM's blocked ranges were all "blocked, other" and its evictions "not cached yet".
    The whole sample: under vLLM's own scheduler the first 300 requests evict no state a later one needed."""
    config = SimConfig(policy="vllm", model="qwen3.5-4b", knobs={"prefill_checkpoints": False}, bounds=False)
    result = simulate(load_trace("traces/mooncake_conversation_500.jsonl"), config)  # the 40 GiB default
    check_totals(result)
    summary = result.summary
    assert why(summary, FULL_EVICTED) > why(summary, NOT_CACHED)
    assert why(summary, RETENTION) + why(summary, MAMBA_EVICTED) > 0


def test_vllm_dense_retention_leaves_nothing_unkept():
    """Follow-ups whose state past the previous prompt was computed: interval 0 leaves it unhashed."""
    trace, base = load_trace("traces/multiturn.jsonl"), dict(policy="vllm", model="qwen3.5-4b", mode="replay")
    dense = simulate(trace, SimConfig(**base, knobs={"retention_interval": "none"}, bounds=False))
    sparse = simulate(trace, SimConfig(**base, knobs={"retention_interval": 0}, bounds=False))
    check_totals(dense)
    check_totals(sparse)
    assert why(dense.summary, RETENTION) == 0 < why(sparse.summary, RETENTION)


def test_vllm_sliding_window_models_name_the_window_cause():
    """Inkling under vLLM has SWA and short-conv groups: a stateful point's missing window is named."""
    result = simulate(
        load_trace("traces/multiturn.jsonl"),
        SimConfig(policy="vllm", model="inkling", mode="timed", bounds=False, pool_tokens=60_000),
    )
    check_totals(result)
    assert why(result.summary, RETENTION) > 0 and why(result.summary, MAMBA_EVICTED) > 0


def test_vllm_unequal_block_sizes_blame_the_eviction_of_each_groups_own_block(trace):
    """gemma-4: FULL blocks of 32 tokens beside SWA's 16, keyed in hash blocks of 16: the watcher reads the
    key of each group's own block (read as the scheduler block's index, FULL's next block was another)."""
    config = SimConfig(
        policy="vllm", model="gemma-4-26b-a4b", mode="replay", pool_tokens=100_000, bounds=False
    )
    result = simulate(Trace(trace.requests[:150]), config)
    check_totals(result)
    summary = result.summary
    assert summary["evictions_full"] > 0 and why(summary, FULL_EVICTED) > 0
    assert why(summary, NOT_CACHED) == 0  # every earlier request finished: what is missing was evicted
