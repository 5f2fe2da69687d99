"""Admission: the hit's blocks per group (what ``allocate_new_computed_blocks`` touches) and the admission gate
``allocate_slots(full_sequence_must_fit=True)`` (``scheduler_reserve_full_isl``: a waiting request is admitted
only if its whole prompt fits the free blocks, hit blocks it takes out of the free queue included).
"""

from __future__ import annotations

from sim.align import ceil_div
from sim.cache.blocks.keys import BlockKey
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.steps import blocks_to_allocate
from sim.models import FULL, MAMBA, SWA


def hit_tables(
    layout: Layout, pool: BlockPool, chain: list[BlockKey], hit: int, past_state: bool = False
) -> list[list[int | None]]:
    """Per group, the blocks a hit of ``hit`` tokens reuses: FULL all of them, SWA those from the window's
    first block on (older ones become null untouched), Mamba the one state block at the hit (``past_state``,
    DELIBERATELY WRONG: the one a block before it where the hit's own is not cached)."""
    tables: list[list[int | None]] = []
    for group, kind in enumerate(layout.group_kinds):
        B = layout.block_of(kind)
        num_blocks = hit // B
        if kind == FULL:
            first = 0
        elif kind == SWA:
            first = max(0, (hit - layout.window + 1) // B)
        else:
            first = max(0, num_blocks - 1)
        unread: list[int | None] = [None] * first
        stride = layout.key_stride[kind]  # block i's key: chain[(i + 1) * stride - 1]
        blocks = pool.cached_blocks(chain[(first + 1) * stride - 1 : num_blocks * stride : stride], group)
        if past_state and kind not in (FULL, SWA) and blocks and blocks[-1] is None and num_blocks > 1:
            blocks[-1] = pool.cached_in(chain[layout.key_index(kind, num_blocks - 2)], group)
        tables.append(unread + blocks)
    return tables


def admission_need(
    layout: Layout, pool: BlockPool, tables: list[list[int | None]], prompt_len: int, swa_cap_tokens: int
) -> int:
    """Blocks the whole prompt needs from the free queue (``get_num_blocks_to_allocate`` with the admission
    cap, ``swa_cap_tokens``: what a SWA group holds at most, less a block's worth of slack): new blocks per
    group plus the hit blocks that are eviction candidates now."""
    total = 0
    for kind, table in zip(layout.group_kinds, tables, strict=True):
        needed = ceil_div(prompt_len, layout.block_of(kind))
        swa_cap_blocks = ceil_div(swa_cap_tokens, layout.block_of(kind)) + 1
        evictable = pool.num_evictable(table)
        if kind == FULL:
            new = needed - len(table)
        elif kind == SWA:
            new = min(needed, swa_cap_blocks) - len(table)
        else:
            new = min(needed - len(table), 1 + layout.checkpoint_blocks)
        total += max(new, 0) + evictable
    return total


def first_chunk_need(
    layout: Layout, pool: BlockPool, tables: list[list[int | None]], end: int, checkpoint: bool
) -> int:
    """``allocate_slots``' second check, for the first chunk ``[hit, end)``: its new blocks plus the hit blocks
    it takes out of the free queue (a prompt that fits whole can still find its first chunk refused)."""
    new = sum(count for _, count in blocks_to_allocate(layout, tables, end, checkpoint))
    return new + sum(map(pool.num_evictable, tables))


def state_cached_this_step(
    layout: Layout, pool: BlockPool, tables: list[list[int | None]], keys: set
) -> bool:
    """``MambaManager.get_num_blocks_to_allocate``: a hit whose state another request hashed in this step is not
    admitted now (it asks for more blocks than the pool has)."""
    return any(
        kind == MAMBA and table and table[-1] is not None and pool.hashed_key(table[-1]) in keys
        for kind, table in zip(layout.group_kinds, tables, strict=True)
    )
