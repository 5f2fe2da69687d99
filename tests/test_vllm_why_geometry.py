"""The why watcher of vLLM (sim/cache/blocks/misses.py) names a SWA block by the key vLLM caches it under:
with SWA blocks larger than the hash block (a SWA layer storing fewer bytes a token than a FULL one), block
``i`` is keyed by hash block ``(i + 1) * stride - 1`` (``Layout.key_index``), not by hash block ``i``."""

from __future__ import annotations

from sim.cache.blocks.layout import Layout
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import EventBus
from sim.cache.reasons import BLOCKED_OTHER, RETENTION
from sim.models import FULL, SWA


def _tracker() -> tuple[BlockMissTracker, Layout, BlockPool]:
    # SWA blocks of 32 beside FULL blocks of 16: hash block 16, a SWA block is keyed by every second hash block
    layout = Layout(32, (SWA, FULL), 1, 64, 0, ((FULL, 16),))
    assert (layout.hash_block, layout.key_index(SWA, 1), layout.swa_need) == (16, 3, 2)
    pool = BlockPool(64, layout.group_kinds)
    return BlockMissTracker(layout, pool, EventBus()), layout, pool


def test_a_window_block_cached_again_is_not_counted_missing():
    tracker, layout, pool = _tracker()
    chain = [bytes([k]) for k in range(8)]  # hash blocks 0..7: SWA blocks 0..3 are keyed 1, 3, 5, 7
    blocks = pool.get_new_blocks(3, 0)
    for index, block in enumerate(blocks):
        pool.cache(block, (chain[layout.key_index(SWA, index)], 0))
    tracker.evicted[0] = {chain[5]}  # SWA block 2 was evicted once, and is cached again since
    tracker.skipped[(0,)] = {chain[7]}  # SWA block 3 was computed and left unhashed by retention
    # the window before 128 tokens (blocks 2 and 3) lacks block 3 only: retention, not an eviction
    assert tracker._window_cause(chain, 128) == RETENTION
    assert tracker._window_cause(chain, 64) == BLOCKED_OTHER  # blocks 0 and 1 are there
