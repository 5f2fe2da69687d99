"""The why watcher's stateless ranges (past the deepest Mamba state: ``mamba_evicted``, ``retention``,
``mamba_state``) found by slicing the chain and looking each set up in C, against the point-by-point form
they replaced (``_stateless_stepwise``): evicted keys per group, skipped keys per set of groups told alike
(some holding Mamba groups, some not), ranges starting on and off the scheduler block, blocks of 1 to 64."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks.layout import Layout
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import EventBus

KINDS = ("swa", "full", "mamba", "swa", "mamba")
key = st.integers(0, 11).map(lambda k: bytes([k]))
keys = st.sets(key, max_size=8)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from((1, 2, 16, 64)),
    st.lists(key, max_size=24),
    st.dictionaries(st.integers(0, 4), keys, max_size=5),
    st.dictionaries(st.sets(st.integers(0, 4), min_size=1).map(lambda g: tuple(sorted(g))), keys, max_size=4),
    st.data(),
)
def test_sliced_stateless_ranges_match_the_point_by_point_ones(B, chain, evicted, skipped, data):
    layout = Layout(B, KINDS, 0, 8 * B, 0)
    tracker = BlockMissTracker(layout, BlockPool(2, KINDS), EventBus())
    tracker.evicted.update(evicted)
    tracker.skipped.update(skipped)
    full = data.draw(st.integers(0, len(chain) * B), label="full")  # the points' keys lie in the chain
    start = data.draw(st.integers(0, full), label="start")
    assert tracker._stateless(chain, start, full) == tracker._stateless_stepwise(chain, start, full)
