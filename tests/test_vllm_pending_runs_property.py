"""A prefill step's blocks listed late (``sim/cache/blocks/pending_runs.py``, ``PENDING_RUNS``) held to the
reference, every block listed when hashed.

The pool alone: generated steps over a few digests and ends (a key often hashed to two blocks, in one call or
two), hashing a call's blocks at once or one at a time, looking keys up three ways, and evicting hashed blocks
in batches (their blocks hashed again later: a block's old entry is stale), with the one-pass eviction and its
reference, loops and C passes: every lookup's answer, every eviction told, and the map at the end alike. Whole
runs: the private-blocks property's fixed and generated traces and configs with the switch on and off are the same
run, their pools, maps and the why watcher's evicted keys alike at the end, loops and C passes; the fixed runs
forget pending blocks at their eviction and list some at a lookup."""

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

from sim.cache.blocks import by_id, evict_pass, pending_runs
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import BlocksEvicted, EventBus

NUM_BLOCKS = 12
KINDS = ("full", "swa", "full")
key_of = st.builds(lambda digest, end: (digest + 1) << 64 | end * 16, st.integers(0, 2), st.integers(0, 3))
blocks_of = st.lists(st.integers(1, NUM_BLOCKS - 1), max_size=6)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("hash"), blocks_of, st.lists(key_of, min_size=6, max_size=6), st.integers(0, 2)),
        st.tuples(
            st.just("hash_each"), blocks_of, st.lists(key_of, min_size=6, max_size=6), st.integers(0, 2)
        ),
        st.tuples(st.sampled_from(["in", "blocks", "from"]), st.lists(key_of, max_size=5), st.integers(0, 2)),
        st.tuples(st.just("evict"), blocks_of, st.booleans()),
    ),
    max_size=14,
)
HASH = ("hash", [1, 2, 3], [1 << 64 | 16, 1 << 64 | 32, 2 << 64 | 16], 0)
# key (1, 16) hashed to blocks 1 and 4 in two calls, block 1 evicted while pending, then asked: block 4 answers
DUPLICATE_FORGOTTEN = [
    HASH,
    ("hash", [4, 5], [1 << 64 | 16, 3 << 64 | 16], 0),
    ("evict", [3, 1], False),
    ("in", [1 << 64 | 16], 0),
    ("from", [1 << 64 | 16, 1 << 64 | 32], 0),
    ("hash", [1, 6], [1 << 64 | 16, 1 << 64 | 48], 0),
    ("evict", [4, 2], True),
    ("blocks", [1 << 64 | 16, 1 << 64 | 48], 0),
]


def stepped(steps: list, late: bool, one_pass: bool, loops: bool, monkeypatch) -> list:
    """Every lookup's answer and eviction's events over ``steps``, then the map and the blocks' keys."""
    monkeypatch.setattr(pending_runs, "PENDING_RUNS", late)
    monkeypatch.setattr(evict_pass, "ONE_PASS_EVICT", one_pass)
    monkeypatch.setattr(by_id, "LOOPS", loops)
    bus, log = EventBus(), []
    bus.subscribe(BlocksEvicted, lambda event: log.append((list(event.block_keys), list(event.groups))))
    pool = BlockPool(NUM_BLOCKS, KINDS, bus)
    pool.get_new_blocks(NUM_BLOCKS - 1, 0)
    for step in steps:
        log.append(_take(pool, step))
    return [log, pool.blocks_of, list(pool.key_at), list(pool.group_at)]


def _take(pool: BlockPool, step: tuple) -> object:
    """One step on ``pool``: its answer (a lookup's), else None."""
    kind = step[0]
    if kind in ("hash", "hash_each"):
        blocks = [block for block in dict.fromkeys(step[1]) if pool.key_at[block] is None]
        keys = step[2][: len(blocks)]
        if kind == "hash":
            pool.cache_group(blocks, keys, step[3])
        for block, key in zip(blocks, keys, strict=True) if kind == "hash_each" else ():
            pool.cache_in(block, key, step[3])
        return None
    if kind == "evict":
        blocks = [block for block in dict.fromkeys(step[1]) if pool.key_at[block] is not None]
        return blocks and pool._evicted(blocks, step[2])
    keys, group = step[1], step[2]
    if kind == "in":
        return [pool.cached_in(key, group) for key in keys]
    return pool.cached_blocks(keys, group) if kind == "blocks" else pool.num_cached_from(keys, group)


# key (1, 16) pending on block 1, then hashed alone to block 2: block 1, the older, answers
ONE_AT_A_TIME = [HASH, ("hash_each", [4], [1 << 64 | 16], 0), ("in", [1 << 64 | 16], 0)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(steps=ONE_AT_A_TIME)
@example(steps=DUPLICATE_FORGOTTEN)
@given(steps=steps)
def test_late_listing_answers_as_the_reference(steps, monkeypatch):
    reference = stepped(steps, False, False, False, monkeypatch)
    for one_pass in (True, False):
        for loops in (True, False):
            assert stepped(steps, True, one_pass, loops, monkeypatch) == reference


def test_a_key_whose_pending_block_left_answers_its_newer_block(monkeypatch):
    log = stepped(DUPLICATE_FORGOTTEN, True, True, True, monkeypatch)[0]
    assert log[2] == ([2 << 64 | 16, 1 << 64 | 16], [0, 0]) and log[3] == [3, 1]  # told in order
    assert (
        log[4] == [4] and log[5] == 2
    )  # block 1 forgotten pending: block 4 answers, (1, 32) still block 2's
    assert log[-1] == [1, 6]  # block 4 evicted listed: block 1, hashed again, answers
    assert stepped(ONE_AT_A_TIME, True, True, True, monkeypatch)[0][-1] == [1]


def run_with(trace_spec, config_spec, late: bool, loops: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; ``seen`` gets its pool, map and the watcher's evicted keys at the end."""
    monkeypatch.setattr(pending_runs, "PENDING_RUNS", late)
    monkeypatch.setattr(by_id, "LOOPS", loops)

    def ended(manager, watcher):
        evicted = None if watcher is None else dict(watcher.evicted)
        seen[late] = (pool_at_end(manager.pool), manager.pool.blocks_of, evicted)

    return run_seen_at_end(trace_spec, config_spec, monkeypatch, ended)


def same_runs(trace_spec, config_spec, monkeypatch) -> dict:
    """Both runs held equal, loops and C passes, and their pools, maps and evicted keys at the end."""
    for loops in (False, True):
        seen: dict = {}
        both_ways_or_skip(
            lambda on, loops=loops, seen=seen: run_with(trace_spec, config_spec, on, loops, monkeypatch, seen)
        )
        assert seen[True] == seen[False]
    return seen


@on_fixed_and_generated(60, *FIXED)
def test_late_listing_leaves_the_runs_as_the_reference(trace_spec, config_spec, monkeypatch):
    reached(same_runs, trace_spec, config_spec, monkeypatch)


def test_the_fixed_runs_forget_pending_blocks_and_list_some_late(monkeypatch):
    counts = {"forgotten": 0, "listed": 0}
    gone, flush_entry = pending_runs.gone, pending_runs._flush_entry

    def counted_gone(pool, entry, count):
        counts["forgotten"] += count
        gone(pool, entry, count)

    def counted_flush(pool, entry):
        counts["listed"] += entry.live
        flush_entry(pool, entry)

    monkeypatch.setattr(pending_runs, "gone", counted_gone)
    monkeypatch.setattr(pending_runs, "_flush_entry", counted_flush)
    for case in FIXED:
        same_runs(*case, monkeypatch)
    assert counts["forgotten"] > 0 and counts["listed"] > 0, counts
