"""One step of one request, as ``KVCacheManager.allocate_slots`` runs it (docs/vllm-rules.md section 7):
(1) ``remove_skipped_blocks`` for every group on the processed tokens, (2) at admission the hit is touched
(``BlockCacheManager.admit``), (3) ``allocate_new_blocks`` for every group, (4) ``cache_blocks``. All in
group order; each group frees with one ``free_blocks`` call, highest block first."""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress, repeat
from typing import Any, cast

from sim.align import ceil_div
from sim.cache.blocks import by_id, null_runs, tail_runs
from sim.cache.blocks.hashed_positions import HashedPositions
from sim.cache.blocks.keys import BlockKeys
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.lazy_keys import cache_unkeyed, key_cap, private_positions
from sim.cache.blocks.out_of_map import cache_private, private_blocks
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.retention import reachable_indices
from sim.cache.blocks.skips_told import tell_skipped
from sim.models import FULL, MAMBA, SWA


def release_skipped(
    layout: Layout,
    pool: BlockPool,
    req: BlockRequest,
    processed: int,
    early: bool = False,
    hashed: HashedPositions | None = None,  # the window's frees split by position, no block's key read
) -> None:
    """``early``: DELIBERATELY WRONG (a negative control): SWA releases one block more than the window allows.
    Most steps release nothing: each group's "has its first live block moved" is tested here, before a call."""
    swa_top, state_last = window_top(layout, processed, int(early)), last_state(layout, processed)
    for group, kind in enumerate(layout.group_kinds):
        table = req.tables[group]
        if kind == SWA:
            top = min(len(table) - 1, swa_top)
            if top >= 0 and table[top] is not None:
                release_window(layout, pool, table, group, processed, int(early), hashed, req)
        elif kind == MAMBA and processed > 1 and state_last > req.retired[group]:
            release_states(layout, pool, req, group, processed)


def window_top(layout: Layout, processed: int, extra: int = 0) -> int:
    """The highest block wholly below the window once ``processed`` tokens are processed (-1: none)."""
    return max(0, (processed - layout.window + 1) // layout.block_of(SWA) + extra) - 1


def last_state(layout: Layout, processed: int) -> int:
    """The running state's block once ``processed`` tokens are processed: every state block below it goes."""
    return (processed - 1) // layout.block_of(MAMBA)


def release_window(
    layout: Layout,
    pool: BlockPool,
    table: list[int | None],
    group: int,
    processed: int,
    extra: int = 0,
    hashed: HashedPositions | None = None,
    req: BlockRequest | None = None,
) -> None:
    """Blocks wholly below the window become null, scanning down until one already is (split by position)."""
    top = min(len(table) - 1, window_top(layout, processed, extra))
    if top < 0 or table[top] is None:
        return  # most steps: the window's first block has not moved
    if hashed is None or req is None:  # the live run ends at the first null under it (a prefill: hundreds)
        below = table[top::-1]
        num_freed = by_id.first_none(below)
        pool.free_held(cast(list[int], below[:num_freed]), group)  # at least one, none null
    else:
        num_freed = hashed.release(req, pool, group, top)
    table[top + 1 - num_freed : top + 1] = [None] * num_freed


def release_states(layout: Layout, pool: BlockPool, req: BlockRequest, group: int, processed: int) -> None:
    """Every state block below the running one (``floor((p - 1)/B)``) goes, the prompt checkpoint too."""
    table, retired = req.tables[group], req.retired[group]
    last = min(last_state(layout, processed), len(table))
    if last <= retired:
        return  # most steps: the running state's block has not moved
    freed = null_runs.states_below(table, retired, last)  # highest first, the slots then null
    if freed:
        pool.free_held(freed, group)
    req.retired[group] = max(retired, last)


def blocks_to_allocate(
    layout: Layout, tables: list[list[int | None]], end: int, checkpoint: bool
) -> list[tuple[int, int]]:
    """Per group: (nulls to append, new blocks to take) for a step ending at ``end``."""
    B = layout.uniform_block
    if B and min(map(len, tables)) >= -(-end // B):
        return [(0, 0)] * len(tables)  # most decode steps: every table reaches the step's end
    plan = []
    for kind, B, table in zip(layout.group_kinds, layout.group_blocks, tables, strict=True):
        needed = -(-end // B)  # ceil_div inline: this runs for every group of every step
        have = len(table)
        if kind != MAMBA:
            plan.append((0, max(0, needed - have)))
        elif needed <= have and not checkpoint:
            plan.append((0, 0))
        else:
            nulls = max(0, needed - 1 - checkpoint - have)
            plan.append((nulls, max(0, needed - have - nulls)))
    return plan


def allocate(pool: BlockPool, req: BlockRequest, plan: list[tuple[int, int]]) -> None:
    for group, (nulls, count) in enumerate(plan):
        if nulls:
            req.tables[group].extend([None] * nulls)
        if count:
            req.tables[group].extend(pool.get_new_blocks(count, group))


def cache_blocks(
    layout: Layout,
    pool: BlockPool,
    keys: BlockKeys,
    req: BlockRequest,
    end: int,
    checkpoint: bool,
    retention: int | None,
    mamba_keys: set | None = None,
    on_skip: list[Callable[[Any], None]] | None = None,
) -> None:
    """Hash the blocks that became full, as each group's mask allows; a block skipped is never hashed later.
    An exported internal checkpoint is kept only at the prompt's last boundary or the junction. The Mamba
    groups' new keys go to ``mamba_keys`` (``MambaManager.cached_blocks_this_step``); ``on_skip`` (the
    handlers of ``BlocksSkipped``) hears of the held blocks the mask left unhashed. A hit is a multiple of the
    scheduler block, so only the tokens below the last one are hashed (``HybridKVCacheCoordinator.
    get_num_cacheable_tokens``): a group with smaller blocks leaves the ones past it unhashed."""
    cacheable = end // layout.block_size * layout.block_size
    B = layout.uniform_block
    if (
        cacheable // B <= min(req.num_cached)
        if B
        else all(cacheable // B <= num for B, num in zip(layout.group_blocks, req.num_cached, strict=True))
    ):
        return  # most decode steps: no block became full in any group
    cap = key_cap(pool, req.private_from, layout.hash_block)  # ``lazy_keys.py``
    keys_of = keys.chain(req.tokens, min(end // layout.hash_block, cap), req.chain).keys
    boundaries = (req.replay_boundary, req.junction)
    exported = _exported_checkpoint(layout, req, end) if checkpoint else -1
    stride_of = layout.key_stride
    skipped: dict[int, list] = {}
    # a kind's groups usually share (first, stop): their mask, and their skipped keys where no block in the
    # range is null, are worked out for the first and reused (the same values)
    masks: dict[tuple[str, int, int, int], range | list[int]] = {}
    skipped_of: dict[tuple[str, int, int, int], list] = {}
    for group, (kind, B) in enumerate(zip(layout.group_kinds, layout.group_blocks, strict=True)):
        full_blocks = cacheable // B
        table, first = req.tables[group], req.num_cached[group]
        stop = min(full_blocks, len(table))
        shape = (kind, B, first, stop)
        indices = masks.get(shape)
        if indices is None:
            indices = masks[shape] = _mask(layout, kind, B, first, stop, retention, boundaries, exported)
        stride = stride_of[kind]
        blocks, new_keys = _hashed_blocks(table, keys_of, stride, indices)
        cut = req.private_from // B  # the group's first block only this request holds (``private.py``)
        private = private_blocks(table, indices, cut) if cut < stop else []  # ``blocks``' last ones
        if len(new_keys) < len(blocks):  # the private ones past the key cap (``lazy_keys.py``)
            positions = private_positions(table, indices, cut, stride, private)
            new_keys = cache_unkeyed(pool, keys, req, group, blocks, new_keys, private, positions)
        else:
            cache_private(pool, blocks, new_keys, private, group)
        if kind == MAMBA and mamba_keys is not None:
            mamba_keys.update(zip(new_keys, repeat(group)))
        if on_skip and kind != FULL and first < stop:
            told = min(stop, max(first, cut))  # a private block's skip is not told
            if by_id.has_none(table[first:stop]):  # a null in the range: its own keys
                skipped[group] = _unhashed_keys(table, keys_of, stride, first, stop, indices, told)
            elif shape in skipped_of:
                skipped[group] = skipped_of[shape]
            else:
                skipped[group] = skipped_of[shape] = _unhashed_keys(
                    table, keys_of, stride, first, stop, indices, told
                )
        req.num_cached[group] = max(first, full_blocks)
    if on_skip and skipped:
        tell_skipped(on_skip, skipped)


def _mask(
    layout: Layout,
    kind: str,
    B: int,
    first: int,
    stop: int,
    retention: int | None,
    boundaries: tuple[int, int],
    exported: int,
) -> range | list[int]:
    """The indices in ``[first, stop)`` a ``kind`` group hashes: its mask, and the exported checkpoint."""
    indices = reachable_indices(
        kind, first, stop, retention, B, layout.swa_need, boundaries, layout.block_size
    )
    if kind == MAMBA and first <= exported < stop and exported not in indices:
        indices = sorted([*indices, exported])
    return indices


def _hashed_blocks(
    table: list[int | None], keys_of: list, stride: int, indices: range | list[int]
) -> tuple[list[int], list[object]]:
    """The held blocks at ``indices`` and their keys; a run with no null (FULL's, a dense mask's:
    hundreds a prefill step) by slicing. Block ``i``'s key is ``keys_of[(i + 1) * stride - 1]``."""
    if isinstance(indices, range) and indices:
        blocks = table[indices.start : indices.stop]
        if not by_id.has_none(blocks):
            keys = keys_of[(indices.start + 1) * stride - 1 : indices.stop * stride : stride]
            return cast(list[int], blocks), keys
    held = [index for index in indices if table[index] is not None]
    held_blocks = cast(list[int], list(map(table.__getitem__, held)))  # one cast, not a call per block
    return held_blocks, [keys_of[(i + 1) * stride - 1] for i in held if (i + 1) * stride <= len(keys_of)]


def _unhashed_keys(
    table: list[int | None], keys_of: list, stride: int, first: int, stop: int, kept, told: int = -1
) -> list:
    """The keys of the held blocks of ``[first, told)`` the mask left out of ``[first, stop)`` (a block id is
    never 0, the null block: a held block is truthy; ``told`` -1: ``stop``)."""
    end = stop if told < 0 else told
    if not null_runs.any_held(table, first, end):
        return []  # a Mamba group's chunk below its state (``null_runs.py``)
    held = table[first:stop]
    for index in kept:
        held[index - first] = None
    return list(compress(keys_of[(first + 1) * stride - 1 : end * stride : stride], held))


def _exported_checkpoint(layout: Layout, req: BlockRequest, end: int) -> int:
    """The Mamba block an internal checkpoint filled, if kept (the prompt's last boundary, the junction), else -1."""
    B = layout.block_of(MAMBA)
    kept = {req.replay_boundary // B * B, req.junction}
    return ceil_div(end, B) - 2 if ceil_div(end, B) - 1 in {k // B for k in kept} else -1


def free_request(pool: BlockPool, req: BlockRequest) -> None:
    """``KVCacheManager.free``: group by group, each table tail first (kept-out blocks one run: ``tail_runs``)."""
    for group, table in enumerate(req.tables):  # read once, by the pool's filter: no copy of a FULL table
        if not (req.kept_unkeyed and tail_runs.free_own_run(pool, req, group, table)):
            pool.free_blocks(null_runs.held_tail_first(table, pool.group_kinds[group] != FULL), group)
        table.clear()
