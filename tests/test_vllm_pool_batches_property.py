"""The block pool's batched paths against block-at-a-time models written from its rules: evictions taken a
whole allocation at once (one ``BlocksEvicted``, in the free queue's order), the cache map kept as each key's
oldest block plus its rare newer duplicates, ``cache_all``'s two-update path; and the step helpers that slice
instead of visiting each index (the blocks a step hashes, the keys it tells skipped, the window's release),
with the why watcher's shared skip sets against one set per group."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks import steps
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import BlocksEvicted, BlocksSkipped, EventBus

KINDS = ("swa", "swa", "full", "mamba")


class BlockModel:
    """The cache map and the evictions one block at a time: every key lists its blocks, oldest first."""

    def __init__(self) -> None:
        self.key_of: dict[int, tuple] = {}
        self.blocks_of: dict[tuple, list[int]] = {}
        self.evicted: list[tuple] = []

    def cache(self, block: int, key: tuple) -> None:
        if block not in self.key_of:
            self.key_of[block] = key
            self.blocks_of.setdefault(key, []).append(block)

    def taken(self, blocks: list[int]) -> None:
        for block in blocks:
            key = self.key_of.pop(block, None)
            if key is not None:
                self.evicted.append(key)
                self.blocks_of[key].remove(block)
                if not self.blocks_of[key]:
                    del self.blocks_of[key]


operation = st.tuples(
    st.sampled_from(("get", "free", "cache_all", "touch")), st.integers(0, 7), st.integers(0, 3)
)


@settings(max_examples=150, deadline=None)
@given(st.lists(operation, max_size=80))
def test_batched_evictions_and_cache_map_match_a_block_at_a_time_model(operations):
    bus, told = EventBus(), []
    bus.subscribe(BlocksEvicted, lambda event: told.extend(event.keys))
    pool, model, held = BlockPool(14, KINDS, bus), BlockModel(), []
    for name, amount, group in operations:
        if name == "get" and amount <= pool.num_free:
            got = pool.get_new_blocks(amount, group)
            model.taken(got)
            held += [(block, group) for block in got]
        elif name == "free" and held:
            chosen, held[-(amount % len(held) + 1) :] = held[-(amount % len(held) + 1) :], []
            for block, owner in reversed(chosen):
                pool.free_blocks([block], owner)
        elif name == "cache_all" and held:
            # the blocks taken last (most often new to the map); three keys a group: a key repeats within
            # a call (positions 0 and 1 share one) and across calls
            chosen = held[-(group + 1) :]
            keys = [((position // 2 + amount) % 3, owner) for position, (_, owner) in enumerate(chosen)]
            pool.cache_all([block for block, _ in chosen], keys)
            for (block, _), key in zip(chosen, keys, strict=True):
                model.cache(block, key)
        elif name == "touch" and pool.key_of:
            block = sorted(pool.key_of)[amount % len(pool.key_of)]
            owner = pool.key_of[block][1]
            pool.touch([block], owner)
            held.append((block, owner))
        assert pool.key_of == model.key_of
        assert pool.blocks_of == model.blocks_of
        assert {key: pool.cached(key) for key in model.blocks_of} == {
            k: b[0] for k, b in model.blocks_of.items()
        }
        assert told == model.evicted
    assert sum(pool.num_evictions.values()) == len(model.evicted)
    cached_free = {kind: 0 for kind in pool.cached_free}
    for block, (_, group) in pool.key_of.items():
        cached_free[KINDS[group]] += not pool.count_of(block)
    assert pool.cached_free == cached_free


table_entry = st.one_of(st.none(), st.integers(1, 99))


@settings(max_examples=200, deadline=None)
@given(st.lists(table_entry, min_size=1, max_size=40), st.integers(1, 3), st.data())
def test_sliced_step_helpers_match_their_index_by_index_forms(table, stride, data):
    keys_of = [bytes([i]) for i in range(len(table) * stride)]
    first = data.draw(st.integers(0, len(table)))
    stop = data.draw(st.integers(first, len(table)))
    every = data.draw(st.booleans())
    indices = (
        range(first, stop) if every else sorted(data.draw(st.sets(st.integers(first, max(first, stop - 1)))))
    )
    indices = [i for i in indices if i < stop] if not every else indices
    blocks, keys = steps._hashed_blocks(table, keys_of, stride, indices)
    assert blocks == [table[i] for i in indices if table[i] is not None]
    assert keys == [keys_of[(i + 1) * stride - 1] for i in indices if table[i] is not None]
    unhashed = steps._unhashed_keys(table, keys_of, stride, first, stop, indices)
    assert unhashed == [
        keys_of[(i + 1) * stride - 1] for i in range(first, stop) if table[i] is not None and i not in indices
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), max_size=30), st.integers(0, 140))
def test_the_window_release_matches_a_scan_down_to_the_first_null(nulls, processed):
    layout = Layout(4, ("full", "swa"), 0, 8, 0)  # a window of 8 tokens, blocks of 4
    pool = BlockPool(64, layout.group_kinds)
    table: list[int | None] = [
        None if null else block for null, block in zip(nulls, pool.get_new_blocks(len(nulls), 1), strict=True)
    ]
    expected, freed = list(table), []
    top = min(len(table), max(0, (processed - 8 + 1) // 4)) - 1
    if top >= 0 and table[top] is not None:
        for index in range(top, -1, -1):
            if expected[index] is None:
                break
            freed.append(expected[index])
            expected[index] = None
    steps.release_window(layout, pool, table, 1, processed)
    assert table == expected
    assert pool.queue()[: len(freed)] == freed  # unhashed: onto the head, the first given first out
    assert sum(count == 0 for count in pool.ref_counts().values()) == len(freed)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.integers(0, 5), st.lists(st.integers(0, 9), max_size=4)), max_size=8))
def test_shared_skip_sets_answer_as_one_set_per_group(tellings):
    bus = EventBus()
    layout = Layout(4, ("swa",) * 6, 0, 8, 0)
    tracker = BlockMissTracker(layout, BlockPool(2, layout.group_kinds), bus)
    handlers = bus.channel(BlocksSkipped)
    per_group: dict[int, set] = {}
    for keys_of_group in tellings:
        steps.tell_skipped(
            handlers, {group: [bytes([k]) for k in keys] for group, keys in keys_of_group.items()}
        )
        for group, keys in keys_of_group.items():
            per_group.setdefault(group, set()).update(bytes([k]) for k in keys)
    for group in range(6):
        for key in range(10):
            assert tracker._was_skipped(bytes([key]), group) == (bytes([key]) in per_group.get(group, ()))
