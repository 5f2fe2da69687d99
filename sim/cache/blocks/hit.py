"""The prefix-cache hit at admission (docs/vllm-rules.md section 4; ``KVCacheManager.get_computed_blocks`` ->
``HybridKVCacheCoordinator.find_longest_cache_hit`` -> each manager's ``find_longest_cache_hit``).

Each group kind answers "the largest hit point <= h" it accepts, in blocks of its own size, aligned to the
scheduler block (``alignment_tokens``: the lcm of the groups' block sizes; one block size for most models);
the groups of one kind are looked up together (a block counts only if every one of them has it cached). FULL
answers first, then the other kinds in group order, each passing on ``h``; the pass repeats while it shrank
``h``. The junction is FULL's answer when it beats the reconciled hit (``shared_prefix_boundary``), else 0.
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


def is_cached(pool: BlockPool, chain: list[BlockKey], groups: list[int], stride: int, index: int) -> bool:
    """Block ``index`` of ``groups`` (a kind's, ``stride`` hash blocks a block: ``Layout.key_index``) is cached
    in every one of them. The caller reads the kind's figures from the layout once: its methods run
    interpreted even in the compiled core (``layout.py`` is not compiled)."""
    key = (index + 1) * stride - 1
    if index < 0 or key >= len(chain):
        return False
    block_key = chain[key]
    for group in groups:
        if pool.cached_in(block_key, group) is None:
            return False
    return True


def answer(
    layout: Layout, pool: BlockPool, chain: list[BlockKey], kind: str, limit: int, past_state: bool = False
) -> int:
    """The largest hit point ``<= limit`` the groups of ``kind`` accept. ``past_state``: DELIBERATELY WRONG
    (a negative control): Mamba also accepts the boundary one block after a cached state."""
    B, A = layout.block_of(kind), layout.block_size
    top = limit // B
    if kind == FULL:  # the leading run of cached blocks, floored to the alignment
        return _full_run(layout, pool, chain, top) * B // A * A
    if kind != SWA:  # Mamba: the state right at an aligned point
        late, groups, stride = int(past_state), layout.groups_of(kind), layout.key_stride[kind]
        for end in range(top, 0, -1):
            if end * B % A == 0 and is_cached(pool, chain, groups, stride, end - 1 - late):
                return end * B
        return 0
    return _swa_answer(layout, pool, chain, top)


def _full_run(layout: Layout, pool: BlockPool, chain: list[BlockKey], top: int) -> int:
    """The blocks ``0 .. run - 1`` below ``top`` cached in every FULL group (``is_cached`` from block 0 while
    it holds: a block past the chain is not cached). A block is in every group's run: the least run."""
    stride = layout.key_stride[FULL]
    keys = chain[stride - 1 : min(top, len(chain) // stride) * stride : stride]
    return min(pool.num_cached_from(keys, group) for group in layout.groups_of(FULL))


def _swa_answer(layout: Layout, pool: BlockPool, chain: list[BlockKey], top: int) -> int:
    """Right to left: the first run of ``need`` cached blocks ending on an aligned point ends the hit; without
    one, the run of cached blocks from block 0, popped back to an aligned point."""
    B, A, need = layout.block_of(SWA), layout.block_size, layout.swa_need
    if not need:  # a window of one token needs no block before the point
        return top * B // A * A
    run = 0  # cached blocks from ``index`` rightwards
    groups, stride = layout.groups_of(SWA), layout.key_stride[SWA]
    for index in range(top - 1, -1, -1):
        if not is_cached(pool, chain, groups, stride, index):
            run = 0
            continue
        if run == 0 and (index + 1) * B % A:
            continue  # a run must end on an aligned point
        run += 1
        if run >= need:
            return (index + run) * B
    return run * B // A * A


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
