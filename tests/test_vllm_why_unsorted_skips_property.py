"""The why watcher keeps skipped keys as their tellings until a question reads their set (``unsorted_skips``):
every answer must be the one the eager sets give (each telling added to its set at once, the form before).

Tellings, interleaved with the questions that read the sets (``_was_skipped`` of a key in a group, the stateless
ranges past the deepest state, which read the sets of groups holding a Mamba group), against a reference of
eager sets per set of groups told alike; caps from 0 (every telling sorted at once) to none reached, blocks of
1 to 64, groups told in sets with and without Mamba groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks.layout import Layout
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import BlocksSkipped, EventBus, emit
from sim.cache.reasons import RETENTION

KINDS = ("swa", "full", "mamba", "swa", "mamba", "swa")
key = st.integers(0, 11).map(lambda k: bytes([k]))
told_groups = st.sets(st.sampled_from((0, 2, 3, 4, 5)), min_size=1).map(lambda g: tuple(sorted(g)))
telling = st.tuples(st.just("tell"), told_groups, st.lists(key, max_size=6))
asked_skip = st.tuples(st.just("skipped"), st.integers(0, 5), key)
asked_ranges = st.tuples(st.just("ranges"), st.lists(key, max_size=12), st.data())


def _eager(layout: Layout, told: dict[tuple[int, ...], set]) -> BlockMissTracker:
    """A watcher whose sets hold every telling so far (nothing left unsorted)."""
    tracker = BlockMissTracker(layout, BlockPool(2, KINDS), EventBus())
    tracker.skipped.update({groups: set(keys) for groups, keys in told.items()})
    return tracker


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from((1, 2, 16, 64)),
    st.sampled_from((0, 1, 3, 8, 1 << 22)),
    st.lists(st.one_of(telling, asked_skip, asked_ranges), max_size=30),
)
def test_unsorted_skips_answer_as_eager_sets(B, cap, operations):
    layout, bus = Layout(B, KINDS, 0, 8 * B, 0), EventBus()
    tracker = BlockMissTracker(layout, BlockPool(2, KINDS), bus, unsorted_cap=cap)
    handlers = bus.channel(BlocksSkipped)
    told: dict[tuple[int, ...], set] = {}
    for operation in operations:
        if operation[0] == "tell":
            _, groups, keys = operation
            emit(handlers, BlocksSkipped(groups, list(keys)))
            told.setdefault(groups, set()).update(keys)
        elif operation[0] == "skipped":
            _, group, asked = operation
            expected = any(asked in keys for groups, keys in told.items() if group in groups)
            assert tracker._was_skipped(asked, group) == expected
        else:
            _, chain, data = operation
            full = data.draw(st.integers(0, len(chain) * B), label="full")
            start = data.draw(st.integers(0, full), label="start")
            eager = _eager(layout, told)
            assert tracker._stateless(chain, start, full) == eager._stateless(chain, start, full)
            assert sorted(map(sorted, tracker._sets_of(RETENTION))) == sorted(
                map(sorted, eager._sets_of(RETENTION))
            )
        assert tracker.num_unsorted == sum(map(len, sum(tracker.unsorted_skips.values(), [])))
        assert tracker.num_unsorted <= cap  # a telling past the cap sorts them all
