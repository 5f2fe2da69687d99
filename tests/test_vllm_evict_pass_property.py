"""An eviction of listed blocks in one pass (``sim/cache/blocks/evict_pass.py``, ``ONE_PASS_EVICT``) held to the
reference, ``BlockPool._evicted``'s passes.

The pool alone: generated blocks hashed to a small alphabet of keys in three groups (a key often has newer blocks),
some marked private (listed or kept out of the map), evicted in generated batches, told at once or a block at a
time, loops (the compiled core's) and C passes (pure Python's): the same events, and the same entries, map and
counts by kind after each batch; a kept-out run's entries reset alike. The miss tracker told mixed groups keeps the
same sets. Whole runs: the private-blocks property's fixed and generated traces and configs with the switch on and
off are the same run, their pools and the why watcher's evicted keys alike at the end, loops and C passes."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_vllm_private_blocks_property import (
    FIXED,
    both_ways_or_skip,
    on_fixed_and_generated,
    reached,
    run_seen_at_end,
)
from test_vllm_tail_runs_property import pool_at_end

from sim.cache.blocks import by_id, evict_pass
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.out_of_map import KEPT_OUT, LISTED
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import BlocksEvicted, EventBus

NUM_BLOCKS = 12
KINDS = ("full", "swa", "full")
# each block (1 .. 11): its key of a small alphabet, its group, its private mark (0, listed, kept out)
hashed = st.lists(
    st.tuples(
        st.integers(1, NUM_BLOCKS - 1), st.integers(0, 3), st.integers(0, 2), st.sampled_from([0, 0, 1, 2])
    ),
    max_size=11,
    unique_by=lambda made: made[0],
)
# the batches, each the positions of its blocks in the made ones and whether each block is told alone
batches = st.lists(st.tuples(st.lists(st.integers(0, 10), max_size=6), st.booleans()), max_size=4)
# key 0 in group 0 three times (newer blocks, one kept out), mixed groups, a private block told apart
SHARED_MIXED = (
    [(1, 0, 0, 0), (2, 0, 0, LISTED), (3, 1, 1, 0), (4, 0, 0, 0), (5, 2, 2, 0), (6, 0, 0, KEPT_OUT)],
    [([0, 2, 5, 4], False), ([1, 3], True)],
)


def made_pool(made: list, marked: bool) -> tuple[BlockPool, list]:
    """A pool whose made blocks are hashed (a kept-out one not listed), marked and freed to the tail, in order;
    and the events it tells."""
    bus, told = EventBus(), []
    bus.subscribe(BlocksEvicted, lambda event: told.append((list(event.block_keys), list(event.groups))))
    pool = BlockPool(NUM_BLOCKS, KINDS, bus)
    pool.marks_private = marked
    pool.get_new_blocks(NUM_BLOCKS - 1, 0)
    for block, key, group, mark in made:
        pool.key_blocks([block], [key], group)
        if mark != KEPT_OUT or not marked:
            pool.list_block(block, key, group)
        pool.private[block] = mark  # unmarked pools leave a mark alone (and list the block)
        pool.count_at[block] = 0  # free: in the tail
        pool.cached_free[KINDS[group]] += 1
    return pool, told


def evicted_each(made: list, batches: list, marked: bool, one_pass: bool, loops: bool, monkeypatch) -> list:
    """The events told and the pool's entries, map and counts after each batch of ``made``'s blocks evicted."""
    monkeypatch.setattr(evict_pass, "ONE_PASS_EVICT", one_pass)
    monkeypatch.setattr(by_id, "LOOPS", loops)
    pool, told = made_pool(made, marked)
    log = []
    for positions, told_each in batches:
        blocks = [made[at][0] for at in dict.fromkeys(positions) if at < len(made)]
        blocks = [block for block in blocks if pool.key_at[block] is not None]
        if blocks:
            assert pool._evicted(blocks, told_each) is blocks
        maps = (
            [list(first.items()) for first in pool.first_in],
            [{key: list(newer) for key, newer in more.items()} for more in pool.more_in],
        )
        entries = list(pool.key_at), list(pool.count_at), list(pool.private), list(pool.group_at)
        log.append((list(told), maps, entries, dict(pool.cached_free), dict(pool.num_evictions)))
    return log


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(made=SHARED_MIXED[0], batches=SHARED_MIXED[1], marked=True)
@given(made=hashed, batches=batches, marked=st.booleans())
def test_one_pass_evicts_as_the_reference(made, batches, marked, monkeypatch):
    reference = evicted_each(made, batches, marked, False, False, monkeypatch)
    for loops in (True, False):
        assert evicted_each(made, batches, marked, True, loops, monkeypatch) == reference
    assert evicted_each(made, batches, marked, False, True, monkeypatch) == reference


def test_the_fixed_batches_tell_apart_and_unlist_a_key_with_newer_blocks(monkeypatch):
    log = evicted_each(*SHARED_MIXED, True, True, True, monkeypatch)
    assert log[0][0] == [([0, 1, 2], [0, 1, 2])]  # block 6 kept out: neither told nor unlisted
    assert log[0][1][0][0] == [(0, 2)] and log[0][1][1][0] == {0: [4]}  # key 0: block 2 first, 4 newer
    assert log[1][0][1:] == [([0], [0])]  # block 2 private: only block 4 told, alone
    assert log[1][1][0][0] == [] and log[1][1][1][0] == {}


HEALTH = [HealthCheck.function_scoped_fixture]


@settings(deadline=None, suppress_health_check=HEALTH)
@given(run=st.lists(st.integers(1, NUM_BLOCKS - 1), unique=True, max_size=6))
def test_a_kept_out_runs_entries_reset_as_the_reference(run, monkeypatch):
    after = []
    for loops in (True, False):
        monkeypatch.setattr(by_id, "LOOPS", loops)
        pool, _ = made_pool([(block, block, 0, KEPT_OUT) for block in run], True)
        evict_pass.run_evicted(pool, run)
        after.append((list(pool.key_at), list(pool.count_at), list(pool.private)))
    assert after[0] == after[1]
    assert all(
        after[0][0][block] is None and after[0][1][block] == 1 and not after[0][2][block] for block in run
    )


@settings(deadline=None, suppress_health_check=HEALTH)
@given(told=st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=8), max_size=4))
def test_the_tracker_told_mixed_groups_keeps_the_same_sets(told, monkeypatch):
    sets = []
    for one_pass, loops in ((True, True), (False, True), (False, False)):
        monkeypatch.setattr(evict_pass, "ONE_PASS_EVICT", one_pass)
        monkeypatch.setattr(by_id, "LOOPS", loops)
        tracker = BlockMissTracker.__new__(BlockMissTracker)  # only its evicted sets: no layout, no bus
        tracker.evicted = {}
        for pairs in told:
            tracker._on_evicted(BlocksEvicted([key for key, _ in pairs], [group for _, group in pairs]))
        sets.append(tracker.evicted)
    assert sets[0] == sets[1] == sets[2]


def run_with(trace_spec, config_spec, one_pass: bool, loops: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; ``seen`` gets its pool and the watcher's evicted keys at the end."""
    monkeypatch.setattr(evict_pass, "ONE_PASS_EVICT", one_pass)
    monkeypatch.setattr(by_id, "LOOPS", loops)

    def ended(manager, watcher):
        evicted = None if watcher is None else dict(watcher.evicted)
        seen[one_pass] = (pool_at_end(manager.pool), evicted)

    return run_seen_at_end(trace_spec, config_spec, monkeypatch, ended)


def same_runs(trace_spec, config_spec, monkeypatch) -> dict:
    """Both runs held equal, loops and C passes, and their pools and evicted keys at the end."""
    for loops in (False, True):
        seen: dict = {}
        both_ways_or_skip(
            lambda on, loops=loops, seen=seen: run_with(trace_spec, config_spec, on, loops, monkeypatch, seen)
        )
        assert seen[True] == seen[False]
    return seen


@on_fixed_and_generated(60, *FIXED)
def test_one_pass_eviction_leaves_the_runs_as_the_reference(trace_spec, config_spec, monkeypatch):
    reached(same_runs, trace_spec, config_spec, monkeypatch)


def test_the_fixed_cases_evict_told_and_private_blocks(monkeypatch):
    seen = same_runs(*FIXED[0], monkeypatch)
    assert seen[True][1] and any(seen[True][0][3]), "evictions told, private marks set"
