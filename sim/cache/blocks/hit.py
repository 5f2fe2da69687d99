"""The prefix-cache hit at admission (docs/vllm-rules.md section 4; ``KVCacheManager.get_computed_blocks`` ->
``HybridKVCacheCoordinator.find_longest_cache_hit`` -> each manager's ``find_longest_cache_hit``).

Each group kind answers "the largest hit point <= h" it accepts; the groups of one kind are looked up
together (a block counts only if every one of them has it cached). FULL answers first, then the other kinds
in group order, each passing on ``h``; the pass repeats while it shrank ``h``. The junction is FULL's answer
when it beats the reconciled hit (``shared_prefix_boundary``), else 0.
"""

from __future__ import annotations

from typing import NamedTuple

from sim.cache.blocks.keys import BlockKey
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.models import FULL, SWA


class Hit(NamedTuple):
    tokens: int  # the reconciled hit: every kind accepts it
    full_tokens: int  # FULL's answer alone (the longest single-group answer)
    junction: int  # shared_prefix_boundary: full_tokens if it beats the hit, else 0


def is_cached(pool: BlockPool, chain: list[BlockKey], groups: list[int], index: int) -> bool:
    return 0 <= index < len(chain) and all(pool.cached((chain[index], g)) is not None for g in groups)


def answer(
    layout: Layout, pool: BlockPool, chain: list[BlockKey], kind: str, limit: int, past_state: bool = False
) -> int:
    """The largest hit point ``<= limit`` the groups of ``kind`` accept. ``past_state``: DELIBERATELY WRONG
    (a negative control): Mamba also accepts the boundary one block after a cached state."""
    groups, B = layout.groups_of(kind), layout.block_size
    top = limit // B
    if kind == FULL:  # the leading run of cached blocks
        run = 0
        while run < top and is_cached(pool, chain, groups, run):
            run += 1
        return run * B
    if kind != SWA:  # Mamba: the state right at the point
        late = int(past_state)
        found = (end * B for end in range(top, 0, -1) if is_cached(pool, chain, groups, end - 1 - late))
        return next(found, 0)
    need, run = layout.swa_need, 0  # run: cached blocks from ``index`` rightwards
    if not need:  # a window of one token needs no block before the point
        return top * B
    for index in range(top - 1, -1, -1):  # right to left: the first run of ``need`` ends the hit
        run = run + 1 if is_cached(pool, chain, groups, index) else 0
        if run >= need:
            return (index + need) * B
    return run * B  # no full window: the run of cached blocks from block 0


def longest_hit(
    layout: Layout, pool: BlockPool, chain: list[BlockKey], prompt_len: int, past_state: bool = False
) -> Hit:
    """The hit of a prompt of ``prompt_len`` tokens whose block keys are ``chain`` (capped at ``N - 1``)."""
    full = hit = answer(layout, pool, chain, FULL, prompt_len - 1)
    others = [kind for kind in layout.kinds if kind != FULL]
    while True:
        before = hit
        for kind in others:
            hit = answer(layout, pool, chain, kind, hit, past_state)
        if hit >= before:
            return Hit(hit, full, full if full > hit else 0)
