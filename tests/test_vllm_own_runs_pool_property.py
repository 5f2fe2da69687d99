"""A request's kept-out run freed at the pool (``tail_runs.free_own_run``, switch ``OWN_RUNS``) against the
reference ``free_blocks``, on generated tables: hashed and unhashed blocks before and after the run (beyond what
a finished FULL table holds: its unhashed blocks come after), blocks another table shares, a plain tail ahead of
the run, the run noted over one or two steps; with and without a ``BlocksDiscarded`` handler. Then every free
block evicted. The queue, the pool's per-block entries, its counts by kind and every event told come out the same."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vllm_bare_view import dressed_entries

from sim.cache.blocks import lazy_keys, tail_runs
from sim.cache.blocks.out_of_map import Unkeyed
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.steps import free_request
from sim.cache.events import BlocksDiscarded, BlocksEvicted, EventBus
from sim.models import FULL

# each block before / after the run: 0 unhashed, 1 hashed, 2 hashed and held by another table too
blocks_around = st.lists(st.integers(0, 2), max_size=6)


def freed_and_evicted(shape: tuple, with_runs: bool, hears_discards: bool, monkeypatch) -> tuple:
    """The pool after the request's free and after every free block is evicted, and the events told."""
    monkeypatch.setattr(tail_runs, "OWN_RUNS", with_runs)
    before, num_run, split_at, after, num_plain = shape
    bus, told = EventBus(), []
    bus.subscribe(BlocksEvicted, told.append)
    if hears_discards:
        bus.subscribe(BlocksDiscarded, told.append)
    pool = BlockPool(64, (FULL,), bus)
    pool.marks_private = True  # as the manager sets it where blocks are kept out
    plain = pool.get_new_blocks(num_plain, 0)
    pool.cache_group(plain, [("plain", at) for at in range(num_plain)], 0)
    pool.free_blocks(plain, 0)  # the tail's entries ahead of the run
    table: list[int | None] = list(pool.get_new_blocks(len(before) + num_run + len(after), 0))
    req = SimpleNamespace(unkeyed=Unkeyed(), kept_unkeyed=[], tables=[table])
    run = table[len(before) : len(before) + num_run]
    for part in (run[:split_at], run[split_at:]) if num_run else ():
        lazy_keys.keep_out(pool, req, 0, part, range(len(part)))
    for at, kind in [*enumerate(before), *enumerate(after, len(before) + num_run)]:
        if kind:
            pool.cache_in(table[at], ("key", at), 0)
        if kind == 2:
            pool.touch([table[at]], 0)  # another table holds it: freed to 1, not to the tail
    free_request(pool, req)
    freed = pool_state(pool)
    pool.get_new_blocks(pool.num_free, 0)
    return freed, pool_state(pool), told


def pool_state(pool: BlockPool) -> tuple:
    by_kind = (dict(pool.held), dict(pool.cached_free), dict(pool.num_evictions))
    return pool.queue(), *dressed_entries(pool), by_kind  # bare blocks dressed (``bare_runs.py``)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=blocks_around,
    num_run=st.integers(0, 8),
    split=st.integers(0, 8),
    after=blocks_around,
    num_plain=st.integers(0, 4),
    hears_discards=st.booleans(),
)
def test_a_named_run_freed_and_evicted_as_the_reference(
    before, num_run, split, after, num_plain, hears_discards, monkeypatch
):
    shape = (before, num_run, min(split, num_run), after, num_plain)
    on = freed_and_evicted(shape, True, hears_discards, monkeypatch)
    assert on == freed_and_evicted(shape, False, hears_discards, monkeypatch)


def test_a_run_is_made_and_evicted_where_no_discard_is_told(monkeypatch):
    """The floor: the run made (one tail entry) and evicted whole, unhashed blocks on both sides of it."""
    made = []
    extend_run = tail_runs.RunTail.extend_run
    monkeypatch.setattr(
        tail_runs.RunTail, "extend_run", lambda tail, *a: made.append(a) or extend_run(tail, *a)
    )
    freed, evicted, told = freed_and_evicted(([0, 1, 2], 5, 2, [0, 1], 2), True, False, monkeypatch)
    assert len(made) == 1 and len(made[0][0]) == 5
    assert evicted[5][2] == {
        FULL: 2 + 1 + 5 + 1
    }  # the plain two, the hashed before, the run, the hashed after
