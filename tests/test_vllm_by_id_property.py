"""The block pool's per-block lists (``sim/cache/blocks/by_id.py``): each batch operation's two bodies, the loop
(``LOOPS`` on, the compiled core's) and the C pass (off, pure Python's), give the same answer and leave the same
list (a table's first null found alike), over generated lists and batches (repeated blocks, empty batches); and
whole ``vllm`` runs with the switch on and off are the same run (replay and timed: evictions, shared blocks,
preemptions); the compiled map's listing in one probe (``CacheMap._list_new``) leaves the map as the C passes do
(a key listed already, a key twice in one call)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from same_runs import same_both_ways

from sim.cache.blocks import by_id
from sim.cache.blocks.cache_map import CacheMap
from sim.run.simulate import SimConfig, simulate
from sim.trace.generate import fanout, multiturn

NUM_BLOCKS = 12
keys = st.lists(
    st.one_of(st.none(), st.integers(0, 3), st.tuples(st.binary(max_size=2), st.integers(0, 3))),
    min_size=NUM_BLOCKS,
    max_size=NUM_BLOCKS,
)
counts = st.lists(st.integers(0, 3), min_size=NUM_BLOCKS, max_size=NUM_BLOCKS)
batches = st.lists(st.integers(1, NUM_BLOCKS - 1), max_size=8)


def both(monkeypatch, call, entries: list) -> tuple:
    """``call(entries)`` with the loops and with the C passes, each on its own copy: (answer, list) each."""
    done = []
    for loops in (True, False):
        monkeypatch.setattr(by_id, "LOOPS", loops)
        copy = list(entries)
        done.append((call(copy), copy))
    return done[0], done[1]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=keys, count_entries=counts, blocks=batches, value=st.integers(0, 3))
def test_the_loops_and_the_c_passes_agree(entries, count_entries, blocks, value, monkeypatch):
    values = [(bytes([block]), block) for block in blocks]
    for call, on in (
        (lambda e: by_id.all_none(e, blocks), entries),
        (lambda e: by_id.is_set(e, blocks), entries),
        (lambda e: by_id.split_set(e, blocks), entries),
        (lambda e: by_id.read(e, blocks), entries),
        (lambda e: by_id.write(e, blocks, values), entries),
        (lambda e: by_id.take(e, blocks, None), entries),
        (lambda e: by_id.all_equal(e, blocks, value), count_entries),
        (lambda e: by_id.fill(e, blocks, value), count_entries),
        (by_id.first_none, entries),
        (by_id.has_none, entries),
    ):
        loops, passes = both(monkeypatch, call, on)
        assert loops == passes


def test_a_fixed_batch_reads_each_answer():
    entries: list = [None, ("a", 0), None, ("b", 1)]
    assert by_id.all_none(entries, [0, 2]) and not by_id.all_none(entries, [2, 3])
    assert by_id.is_set(entries, [2, 3, 1]) == [False, True, True]
    assert not by_id.all_none([0, None], [0])  # a falsy entry (a test's key 0) is an entry
    assert by_id.take(entries, [3, 1], None) == [("b", 1), ("a", 0)] and entries == [None] * 4
    assert by_id.all_equal([1, 0, 1], [0, 2], 1) and not by_id.all_equal([1, 0, 1], [0, 1], 1)
    assert by_id.first_none([3, 4, None, 5, None]) == 2 and by_id.first_none([3, 4]) == 2
    assert by_id.has_none([3, None]) and not by_id.has_none([3, 4]) and not by_id.has_none([])


RUNS = (
    (fanout(2, 12, 200, 40, 60), SimConfig(policy="vllm", mode="replay", bounds=False, pool_tokens=2000)),
    (
        multiturn(3, 4, 200, 48, 60),
        SimConfig(
            policy="vllm", mode="timed", bounds=False, pool_tokens=4000, knobs={"async_scheduling": True}
        ),
    ),
    (
        fanout(2, 8, 300, 60, 200),
        SimConfig(policy="vllm", model="tiny-swa", mode="timed", bounds=False, pool_tokens=2000),
    ),
)


@pytest.mark.parametrize("case", range(len(RUNS)))
def test_whole_runs_are_the_same_with_the_loops_and_the_c_passes(case, monkeypatch):
    trace, config = RUNS[case]

    def run(loops: bool) -> tuple:
        monkeypatch.setattr(by_id, "LOOPS", loops)
        return (), simulate(trace, config)

    on, _ = same_both_ways(run)
    assert on[1].summary.requests == len(trace.requests) and on[1].summary.cached_tokens > 0


# each call: distinct blocks of 1..11 with keys of a small alphabet, so a key is often listed already or twice
calls = st.lists(
    st.lists(
        st.tuples(st.integers(1, NUM_BLOCKS - 1), st.integers(0, 4)), max_size=6, unique_by=lambda bk: bk[0]
    ),
    max_size=6,
)
LISTED_AND_TWICE = [[(1, 0), (2, 1)], [(3, 1), (4, 2), (5, 2)], [(2, 3), (6, 0)]]  # key 1 listed, key 2 twice


def cached_map(calls_made: list, loops: bool, monkeypatch) -> tuple:
    """A map after ``cache_all`` of each call's blocks (group 0), every third call's first block then evicted."""
    monkeypatch.setattr(by_id, "LOOPS", loops)
    cache = CacheMap(NUM_BLOCKS)
    for number, call in enumerate(calls_made):
        cache.cache_all([block for block, _ in call], [(bytes([key]), 0) for _, key in call])
        listed = [block for block, _ in call if cache.key_at[block] is not None][:1]
        if number % 3 == 2 and listed:
            cache._unlist(listed, [cache.key_at[listed[0]]], [0])
            cache.key_at[listed[0]] = None
    first_of, more_of = cache.first_in[0], cache.more_in[0]
    return cache.key_at, list(first_of.items()), more_of, len(more_of)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(calls_made=LISTED_AND_TWICE)
@given(calls_made=calls)
def test_a_listing_in_one_probe_leaves_the_map_as_the_c_passes(calls_made, monkeypatch):
    loops = cached_map(calls_made, True, monkeypatch)
    assert loops[:3] == cached_map(calls_made, False, monkeypatch)[:3]


def test_the_fixed_calls_list_a_key_already_listed_and_one_twice(monkeypatch):
    assert cached_map(LISTED_AND_TWICE, True, monkeypatch)[3] == 2
