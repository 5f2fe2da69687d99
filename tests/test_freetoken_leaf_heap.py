"""FreeToken's FULL eviction from the kept ``LeafHeap`` (``evict_full``) takes the same leaves in the same order
as FreeToken's own scan and heapify of every unlocked leaf (``evict_full_scan``), as a property over page
sizes, models (SWA, SWA + GDN, GDN), the three FreeToken presets, small pools and both modes.

Each example runs one generated trace twice, once with each eviction; every call's request, tokens freed, the
FULL pool's free-id stack after it (the freed pages in the order they were freed: which leaves, in which
order) and the eviction count must be equal, and so must the run's tables.
"""

from __future__ import annotations

import hashlib

import pytest
from cache_helpers import seq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

import sim.cache.engines.freetoken_common as common
from sim.cache.components import FULL
from sim.cache.engines.freetoken_scans import evict_full_scan
from sim.cache.engines.freetoken_tree import FreeTokenClock, LeafHeap, evict_full
from sim.cache.locks import lock, unlock
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn


def logged(evict, log: list):
    def run(tree, num_tokens, has_swa):
        freed = evict(tree, num_tokens, has_swa)
        stack = hashlib.sha256(repr(tree.full_pool.returned_ids()).encode()).hexdigest()
        log.append((num_tokens, freed, stack, tree.num_evictions[FULL]))
        return freed

    return run


def run_with(evict, trace, config, monkeypatch) -> tuple[list, object]:
    log: list = []
    monkeypatch.setattr(common, "evict_full", logged(evict, log))
    monkeypatch.setattr("sim.run.simulate.ANONYMOUS_IDS", False)  # real ids: their stack is compared
    return log, simulate(trace, config)


@st.composite
def cases(draw):
    seed = draw(st.integers(0, 10_000))
    if draw(st.booleans()):
        trace = multiturn(
            num_sessions=draw(st.integers(2, 6)),
            num_turns=draw(st.integers(2, 4)),
            system_len=draw(st.integers(100, 600)),
            user_len=draw(st.integers(10, 300)),
            output_len=draw(st.integers(10, 300)),
            think_time=0.2,
            request_rate=4.0,
            seed=seed,
        )
    else:
        trace = fanout(
            num_groups=draw(st.integers(1, 4)),
            prompts_per_group=draw(st.integers(2, 6)),
            system_len=draw(st.integers(50, 600)),
            question_len=draw(st.integers(5, 100)),
            output_len=draw(st.integers(10, 200)),
            request_rate=6.0,
            seed=seed,
        )
    page = draw(st.sampled_from([1, 2, 16]))
    model = draw(st.sampled_from(["gemma-4-26b-a4b", "inkling", "qwen3-next"]))
    config = SimConfig(
        policy=draw(st.sampled_from(["freetoken", "freetoken-lazy", "freetoken-budget"])),
        model=model,
        knobs=dict(
            page_size=page,
            chunked_prefill_size=page * draw(st.integers(8, 64)),
            max_running_requests=draw(st.integers(1, 4)),
        ),
        pool_tokens=draw(st.integers(600, 2_500)) // page * page,
        mamba_states=64,
        mode=draw(st.sampled_from(["replay", "timed"])),
        bounds=False,
    )
    return trace, config


@pytest.mark.interpreted  # patches freetoken_common.evict_full, which the compiled core calls directly
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_kept_heap_evicts_as_the_scan(case, monkeypatch):
    trace, config = case
    same_both_ways(lambda kept: run_with(evict_full if kept else evict_full_scan, trace, config, monkeypatch))


@pytest.mark.interpreted  # patches freetoken_common.evict_full, which the compiled core calls directly
def test_the_property_meets_evictions(monkeypatch):
    """The generated cases do evict (a test of the generator: a heap never asked would pass anything)."""
    trace = multiturn(
        num_sessions=4,
        num_turns=3,
        system_len=300,
        user_len=100,
        output_len=100,
        think_time=0.2,
        request_rate=4.0,
        seed=3,
    )
    config = SimConfig(
        policy="freetoken",
        model="gemma-4-26b-a4b",
        knobs=dict(page_size=1),
        pool_tokens=2_000,
        mode="timed",
        bounds=False,
    )
    log, _ = run_with(evict_full, trace, config, monkeypatch)
    assert sum(freed for _, freed, _, _ in log) > 0


def twin_tree(evict):
    """Leaves a, b, c (c locked), everything evicted, c unlocked, a newer leaf d; then one token evicted:
    the unlocked c, popped and dropped while locked, must be a candidate again, and older than d."""
    tree = RadixTree(1, Pool("full", 100), Pool("swa", 0), Pool("state", 0), LeafHeap())
    clock = FreeTokenClock()
    clock.leaves = tree.eviction
    leaves = {}
    for name in "abc":
        leaves[name] = tree.add_leaf(tree.root, seq((name, 4)), tree.full_pool.alloc(4), None)
        clock.stamp_new(leaves[name])
    held = lock(tree, "r", leaves["c"], 0, False, False)
    first = evict(tree, 100, False)
    unlock(tree, held)
    leaves["d"] = tree.add_leaf(tree.root, seq(("d", 4)), tree.full_pool.alloc(4), None)
    clock.stamp_new(leaves["d"])
    return first, evict(tree, 1, False), sorted(name for name, node in leaves.items() if node.alive)


def test_an_unlocked_leaf_is_a_candidate_again():
    assert twin_tree(evict_full) == twin_tree(evict_full_scan) == (8, 4, ["d"])
