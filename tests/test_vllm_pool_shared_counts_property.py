"""Reference counts where a count of 1 is not written (``CacheMap.ref_cnt`` holds the hashed blocks counted 0
or 2 and more) against the block-by-block pool (``tests/vllm_pool_reference.py``), on the shape the run
pools' random walk seldom reaches: several requests hash runs of blocks, others hit the same blocks (counts 2
and 3), and each frees its whole table in one ``free_blocks`` call (the batch path with shared blocks), in any
order; tight pools evict. After each step the free queue, every count, the cache map and the evictable counts
agree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks.pool import BlockPool
from tests.vllm_pool_reference import ReferenceBlockPool

KINDS = ("full", "swa")


def _run(pool, steps: list[tuple[str, int, int]]) -> list:
    """Each step: ``new`` (a request of ``n`` blocks in ``group``, hashed), ``hit`` (a request touching the
    first hashed blocks of any earlier request's table, running or freed: counts 0 and 1 up), ``free``
    (running request ``n mod live`` frees its table)."""
    tables: list[tuple[list[int | None], int]] = []
    sources: list[tuple[list[int | None], int]] = []
    states = []
    for name, n, group in steps:
        if name == "new" and n <= pool.num_free:
            blocks = pool.get_new_blocks(n, group)
            pool.cache_all(blocks, [(index, group) for index in range(n)])
            tables.append((list(blocks), group))
            sources.append((list(blocks), group))
        elif name == "hit" and sources:
            source, owner = sources[n % len(sources)]
            table = [block for block in source[: n + 1] if pool.key_of.get(block) is not None]
            pool.touch(table, owner)
            tables.append((table, owner))
        elif name == "free" and tables:
            table, owner = tables.pop(n % len(tables))
            pool.free_blocks(list(reversed(table)), owner)
        counts = (
            {b: pool.ref_cnt.get(b, 0) for b in pool.key_of}
            if isinstance(pool, ReferenceBlockPool)
            else {b: pool.count_of(b) for b in pool.key_of}
        )
        evictable = [
            pool.num_evictable(t) if isinstance(pool, BlockPool) else sum(map(pool.is_evictable, t))
            for t, _ in tables
        ]
        states.append((pool.queue(), counts, dict(pool.key_of), pool.blocks_of, evictable, repr(pool.held)))
    return states


step = st.tuples(st.sampled_from(("new", "hit", "hit", "free")), st.integers(0, 6), st.integers(0, 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=40), st.integers(4, 24))
def test_counts_of_shared_blocks_freed_in_batches_match_the_reference(steps, num_blocks):
    assert _run(BlockPool(num_blocks, KINDS), steps) == _run(ReferenceBlockPool(num_blocks, KINDS), steps)


def test_a_shared_block_freed_in_a_batch_stays_held():
    pool = BlockPool(10, ("full",))
    blocks = pool.get_new_blocks(3, 0)
    pool.cache_all(blocks, [(index, 0) for index in range(3)])
    pool.touch([None, *blocks[:2]], 0)  # a second request hits two of them: counted 2
    pool.free_blocks(list(reversed(blocks)), 0)  # the first request finishes
    assert pool.ref_counts() == {blocks[0]: 1, blocks[1]: 1, blocks[2]: 0}
    assert pool.queue()[-1:] == blocks[2:]
