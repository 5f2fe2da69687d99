"""The block pool's run paths against the block-by-block pool they replaced (``tests/vllm_pool_reference.py``):
the tail as a list whose entries a hit leaves stale (skipped when the front reaches them, the list cut when its
consumed front is most of it), reference counts kept for hashed blocks only, a hit's table touched, looked up
and counted in one pass each. Random gets, per-group gets, frees (with nulls, shared blocks, single blocks),
hashes, hits and evictions on both; after each, the free queue in order, every handed-out block's count, the
cache map, the counters and every event either pool told (evictions in order, discarded blocks) agree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks.layout import Layout
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import BlocksDiscarded, BlocksEvicted, EventBus
from tests.vllm_pool_reference import ReferenceBlockPool

KINDS = ("swa", "swa", "full", "mamba")
NAMES = ("get", "per_group", "free", "free_one", "cache", "cache_all", "touch")


def _pools(num_blocks: int):
    told: dict[str, list] = {"run": [], "reference": []}
    pools = []
    for name, cls in (("run", BlockPool), ("reference", ReferenceBlockPool)):
        bus = EventBus()
        bus.subscribe(BlocksEvicted, lambda event, log=told[name]: log.append(("evicted", list(event.keys))))
        bus.subscribe(
            BlocksDiscarded, lambda e, log=told[name]: log.append(("discarded", e.group, list(e.blocks)))
        )
        pools.append(cls(num_blocks, KINDS, bus))
    pools[0]._tail.compact_at = 1  # cut the consumed front as soon as it is most of the list
    return pools[0], pools[1], told


def _hit_table(pool: BlockPool, group: int, amount: int) -> list[int | None]:
    """Distinct hashed blocks of ``group`` (held or free), with a null in front as a SWA table has."""
    blocks = sorted(block for block, (_, owner) in pool.key_of.items() if owner == group)
    return [None] + blocks[amount % (len(blocks) or 1) :: 2] if blocks else []


def _apply(pool, name: str, amount: int, group: int, held: list[tuple[int, int]]) -> None:
    mine = [block for block, owner in held if owner == group]
    if name == "get" and amount <= pool.num_free:
        held += [(block, group) for block in pool.get_new_blocks(amount, group)]
    elif name == "per_group" and len(KINDS) <= pool.num_free:
        held += [(block, owner) for owner, block in enumerate(pool.get_block_per_group())]
    elif name in ("free", "free_one") and mine:
        chosen = mine[-(amount % len(mine) + 1) :] if name == "free" else mine[-1:]
        for block in chosen:
            held.remove((block, group))
        if name == "free_one":
            pool.free_one(chosen[0], group)
        else:  # the table tail first, a null among them
            pool.free_blocks([*reversed(chosen[1:]), None, *chosen[:1]], group)
    elif name == "cache" and mine:
        block = mine[amount % len(mine)]
        pool.cache(block, ((block + amount) % 5, group))
    elif name == "cache_all" and mine:
        chosen = mine[-(amount % 3 + 1) :]
        pool.cache_all(chosen, [((position // 2 + amount) % 4, group) for position in range(len(chosen))])
    elif name == "touch":
        table = _hit_table(pool, group, amount)
        pool.touch(table, group)
        held += [(block, group) for block in table if block is not None]


def _state(pool, reference: bool):
    counts = pool.ref_cnt if reference else pool.ref_counts()
    counters = (pool.held, pool.cached_free, pool.num_evictions, pool.num_free)
    return pool.queue(), counts, pool.key_of, pool.blocks_of, repr(counters)


operation = st.tuples(st.sampled_from(NAMES), st.integers(0, 7), st.integers(0, len(KINDS) - 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=90), st.integers(6, 20))
def test_the_run_pool_matches_the_block_by_block_pool(operations, num_blocks):
    pool, reference, told = _pools(num_blocks)
    held_run: list[tuple[int, int]] = []
    held_reference: list[tuple[int, int]] = []
    for name, amount, group in operations:
        _apply(pool, name, amount, group, held_run)
        _apply(reference, name, amount, group, held_reference)
        assert held_run == held_reference
        assert _state(pool, False) == _state(reference, True)
        assert told["run"] == told["reference"]
        for owner in range(len(KINDS)):
            keys = [(position + amount) % 5 for position in range(6)]
            assert pool.cached_blocks(keys, owner) == [reference.cached((key, owner)) for key in keys]
            run = 0
            while run < len(keys) and reference.cached((keys[run], owner)) is not None:
                run += 1
            assert pool.num_cached_from(keys, owner) == run
            table = _hit_table(pool, owner, amount)
            assert pool.num_evictable(table) == sum(map(reference.is_evictable, table))


def test_a_long_leading_run_is_counted_across_stretches():
    pool = BlockPool(200, ("full",))
    blocks = pool.get_new_blocks(100, 0)
    pool.cache_all(blocks, [(index, 0) for index in range(100)])
    keys = list(range(100))
    assert pool.num_cached_from(keys, 0) == 100
    pool.free_blocks([blocks[70], *blocks[:70], *blocks[71:]], 0)  # key 70's block first in the tail
    pool.get_new_blocks(99 + 1, 0)  # the 99 never-used blocks, then one eviction: key 70
    assert pool.num_cached_from(keys, 0) == 70  # three stretches of 32: the third ends the run
    pool.get_new_blocks(1, 0)  # key 0
    assert pool.num_cached_from(keys, 0) == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 3)), max_size=12), max_size=8))
def test_the_watcher_files_evicted_runs_as_key_by_key(evictions):
    bus = EventBus()
    layout = Layout(4, KINDS, 0, 8, 0)
    tracker = BlockMissTracker(layout, BlockPool(2, layout.group_kinds), bus)
    expected: dict[int, set] = {}
    for keys in evictions:
        bus.publish(BlocksEvicted([bytes([key]) for key, _ in keys], [group for _, group in keys]))
        for key, group in keys:
            expected.setdefault(group, set()).add(bytes([key]))
    assert tracker.evicted == expected
