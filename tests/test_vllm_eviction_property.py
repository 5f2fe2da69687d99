"""An eviction's two cheaper parts held to their references. The free queue's tail (``sim/cache/blocks/tail.py``):
its pops past stale entries taken a slice at a time (``LIVE_IN_SLICES`` on) pop the same blocks and leave the
same tail as the reference, an entry at a time (off), over generated appends, hits and pops (blocks hit and
freed again: a block's stale and live entries in one slice, a pop that takes a second slice). The cache map's
pure unlisting of one group's keys in one C call a dict (``cache_map.ONE_GROUP_UNLIST``) leaves the map as the
reference (keys with newer blocks, several groups). A prompt's frees split their blocks into hashed and
unhashed reading each key once (``by_id.ONE_PASS_SPLIT``), as the reference does, loops or C passes. Whole
``vllm`` runs with each switch on and off are the same run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.blocks import by_id, cache_map, tail
from sim.cache.blocks.cache_map import CacheMap
from sim.cache.blocks.tail import FreeTail
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn

NUM_BLOCKS = 10
# each op: ("free", blocks not in the tail, how many), ("hit", which tail blocks), ("pop", how many)
ops = st.lists(
    st.tuples(st.sampled_from(["free", "hit", "pop"]), st.integers(0, NUM_BLOCKS), st.integers(0, 1 << 10)),
    max_size=40,
)
# blocks 1 and 2 hit and freed again (a stale entry each, their live ones after): a pop of 4 meets both
STALE_RUNS = [("free", 4, 0), ("hit", 1, 1), ("free", 1, 0), ("hit", 1, 1), ("free", 1, 0), ("pop", 4, 0)]


def replay(made: list, sliced: bool, monkeypatch) -> tuple:
    """Each op on a tail with compaction at 4 entries: the pops' blocks and the tail's live blocks after each."""
    monkeypatch.setattr(tail, "LIVE_IN_SLICES", sliced)
    queue, held, log = FreeTail(NUM_BLOCKS, compact_at=4), list(range(1, NUM_BLOCKS)), []
    for op, num, pick in made:
        if op == "free" and held:
            freed, held = held[: num % (len(held) + 1)], held[num % (len(held) + 1) :]
            queue.extend(freed)
        elif op == "hit" and queue.size:
            live = queue.live()
            hit = [block for index, block in enumerate(live) if pick >> index & 1][: max(1, num)]
            queue.take(hit)
            held = hit + held  # freed first
        elif op == "pop" and queue.size:
            popped = queue.pop_oldest(min(max(1, num), queue.size))
            held += popped
            log.append(popped)
        log.append((queue.live(), queue.size, queue._num_stale))
    return log, list(queue._stale)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(made=STALE_RUNS)
@given(made=ops)
def test_pops_in_slices_pop_as_the_reference(made, monkeypatch):
    assert replay(made, True, monkeypatch) == replay(made, False, monkeypatch)


def test_the_fixed_ops_pop_past_stale_entries(monkeypatch):
    log, _ = replay(STALE_RUNS, True, monkeypatch)
    assert log[-3] == ([3, 4, 1, 2], 4, 2)  # entries 1 2 3 4 1 2: the first 1 and 2 stale
    assert log[-2] == [3, 4, 1, 2] and log[-1] == ([], 0, 0)  # the pop took a second slice


# each block (1 .. 9) hashed to a key of a small alphabet in group 0 or 1 (a key often has newer blocks), then
# evicted in batches: (block, key, group) and the batches as blocks' positions
cached = st.lists(
    st.tuples(st.integers(1, NUM_BLOCKS - 1), st.integers(0, 3), st.integers(0, 1)),
    max_size=9,
    unique_by=lambda bkg: bkg[0],
)
batches = st.lists(st.integers(0, 3), max_size=6)
SHARED_KEYS = ([(1, 0, 0), (2, 0, 0), (3, 1, 0), (4, 2, 1)], [[0, 2], [1], [3]])  # key 0 twice in group 0


def unlisted(made: list, batches: list, one_group: bool, monkeypatch) -> tuple:
    """The map's dicts after each batch of ``made``'s blocks is unlisted (pure Python's passes)."""
    monkeypatch.setattr(by_id, "LOOPS", False)
    monkeypatch.setattr(cache_map, "ONE_GROUP_UNLIST", one_group)
    cache, after = CacheMap(NUM_BLOCKS, 2), []
    for block, key, group in made:
        cache.cache_in(block, key, group)
    for batch in batches:
        blocks = [made[at][0] for at in dict.fromkeys(batch) if at < len(made)]
        blocks = [block for block in blocks if cache.key_at[block] is not None]
        keys, groups = by_id.take(cache.key_at, blocks, None), by_id.read(cache.group_at, blocks)
        cache._unlist(blocks, keys, groups)
        after.append(
            ([list(first.items()) for first in cache.first_in], [dict(more) for more in cache.more_in])
        )
    return after


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(made=SHARED_KEYS[0], batches=SHARED_KEYS[1])
@given(made=cached, batches=st.lists(st.lists(st.integers(0, 8), max_size=5), max_size=4))
def test_one_groups_unlisting_leaves_the_map_as_the_reference(made, batches, monkeypatch):
    assert unlisted(made, batches, True, monkeypatch) == unlisted(made, batches, False, monkeypatch)


def test_the_fixed_batches_unlist_a_key_with_a_newer_block(monkeypatch):
    after = unlisted(*SHARED_KEYS, True, monkeypatch)
    assert after[0][0][0] == [(0, 2)] and after[0][1][0] == {}  # block 1 left key 0: block 2 its first


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(entries=[None, 0, None, (b"a", 1)], blocks=[3, 2, 1, 2])  # a falsy key, a block twice
@example(entries=[None] * 4, blocks=[])  # an empty call: no block with an entry
@given(entries=st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=4, max_size=4), blocks=batches)
def test_a_split_in_one_pass_splits_as_the_reference(entries, blocks, monkeypatch):
    done = []
    for loops, one_pass in ((True, True), (False, True), (True, False), (False, False)):
        monkeypatch.setattr(by_id, "LOOPS", loops)
        monkeypatch.setattr(by_id, "ONE_PASS_SPLIT", one_pass)
        done.append(by_id.split_set(entries, blocks))
    assert done[0] == done[1] == done[2] == done[3]
    assert done[0] == (
        [b for b in blocks if entries[b] is not None],
        [b for b in blocks if entries[b] is None],
    )


RUNS = (
    (fanout(2, 12, 200, 40, 60), SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=2000)),
    (multiturn(3, 4, 200, 48, 60), SimConfig(policy="vllm", mode="timed", bounds=False, pool_tokens=4000)),
)
SWITCHES = ((tail, "LIVE_IN_SLICES"), (cache_map, "ONE_GROUP_UNLIST"), (by_id, "ONE_PASS_SPLIT"))


@pytest.mark.parametrize("case", range(len(RUNS)))
@pytest.mark.parametrize("switch", range(len(SWITCHES)))
def test_whole_runs_are_the_same_with_each_switch(case, switch, monkeypatch):
    trace, config = RUNS[case]

    def run(on: bool) -> tuple:
        monkeypatch.setattr(*SWITCHES[switch], on)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    assert on[1].summary.requests == len(trace.requests) and on[1].summary.cached_tokens > 0
