"""vLLM's one block pool (sim/cache/blocks/pool.py): the free queue's order and the cache map, by hand and
against a plain list model of FreeKVCacheBlockQueue under random operations."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks.pool import BlockPool


def test_frees_prepend_unhashed_in_order_and_append_hashed_in_order():
    pool = BlockPool(8, ("full",))
    assert pool.get_new_blocks(4, 0) == [1, 2, 3, 4]
    pool.cache(2, (20, 0))
    pool.cache(3, (30, 0))
    pool.free_blocks([4, 3, 2, 1], 0)  # a finish: tail first
    assert pool.queue() == [4, 1, 5, 6, 7, 3, 2]
    assert pool.get_new_blocks(3, 0) == [4, 1, 5]  # unhashed first, then never used
    assert pool.num_evictions["full"] == 0


def test_popping_a_hashed_block_evicts_it_and_a_hit_takes_a_block_out_of_the_queue():
    pool = BlockPool(4, ("full", "mamba"))
    blocks = pool.get_new_blocks(3, 0)
    for block, key in zip(blocks, (10, 11, 12), strict=True):
        pool.cache(block, (key, 0))
    pool.free_blocks(list(reversed(blocks)), 0)
    assert pool.queue() == [3, 2, 1] and pool.cached_free == {"full": 3, "mamba": 0}
    pool.touch([pool.cached((11, 0))], 0)  # block 2: held again, still cached
    assert pool.queue() == [3, 1] and pool.held["full"] == 1
    assert pool.get_new_blocks(1, 1) == [3]  # LRU: the tail block freed first goes first
    assert pool.cached((12, 0)) is None and pool.num_evictions["full"] == 1
    assert pool.held == {"full": 1, "mamba": 1}


def test_no_deduplication_the_oldest_copy_answers_until_it_is_evicted():
    pool = BlockPool(6, ("full",))
    first, second = pool.get_new_blocks(2, 0)
    pool.cache(first, (7, 0))
    pool.cache(second, (7, 0))  # the same prefix computed twice
    assert pool.cached((7, 0)) == first
    pool.free_blocks([first, second], 0)
    pool.get_new_blocks(3, 0)  # the three never-used blocks
    pool.get_new_blocks(1, 0)  # evicts the older copy
    assert pool.cached((7, 0)) == second


class ListQueue:
    """The free queue as a plain list, written from FreeKVCacheBlockQueue's description."""

    def __init__(self, num_blocks: int):
        self.queue = list(range(1, num_blocks))
        self.refs: dict[int, int] = {}
        self.hashed: set[int] = set()

    def get(self, count: int) -> list[int]:
        taken, self.queue = self.queue[:count], self.queue[count:]
        for block in taken:
            self.hashed.discard(block)
            self.refs[block] = 1
        return taken

    def touch(self, block: int) -> None:
        if self.refs[block] == 0:
            self.queue.remove(block)
        self.refs[block] += 1

    def free(self, ordered: list[int]) -> None:
        released = []
        for block in ordered:
            self.refs[block] -= 1
            if self.refs[block] == 0:
                released.append(block)
        self.queue = [b for b in released if b not in self.hashed] + self.queue + [b for b in released
                                                                                     if b in self.hashed]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("get", "free", "cache", "touch")), st.integers(0, 5)), max_size=60))
def test_the_queue_matches_a_list_model(operations):
    pool, model = BlockPool(12, ("full",)), ListQueue(12)
    held: list[int] = []
    for operation, amount in operations:
        if operation == "get" and amount <= pool.num_free:
            got = pool.get_new_blocks(amount, 0)
            assert got == model.get(amount)
            held += got
        elif operation == "free" and held:
            chosen = held[-(amount % len(held) + 1):]
            del held[-len(chosen):]
            pool.free_blocks(list(reversed(chosen)), 0)
            model.free(list(reversed(chosen)))
        elif operation == "cache" and held:
            block = held[amount % len(held)]
            pool.cache(block, (block * 100 + amount, 0))
            model.hashed.add(block)
        elif operation == "touch" and pool.key_of:
            block = sorted(pool.key_of)[amount % len(pool.key_of)]
            pool.touch([block], 0)
            model.touch(block)
            held.append(block)
        assert pool.queue() == model.queue
        assert pool.num_free == len(model.queue)
