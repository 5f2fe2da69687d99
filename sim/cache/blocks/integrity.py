"""``check_integrity`` for the block cache: every block is in the free queue or held, never both; reference
counts equal the running requests' table entries; the cache map and the blocks' keys agree (a block marked
private is hashed); the counters behind ``usage()`` are what a recount gives."""

from __future__ import annotations

from collections import Counter

from sim.cache.blocks import bare_runs, out_of_map
from sim.cache.integrity import IntegrityError
from sim.models import MAMBA


def check_integrity(manager) -> None:
    pool = manager.pool
    queue = pool.queue()
    _expect(len(queue) == len(set(queue)) == pool.num_free, "free queue has duplicates or a wrong length")
    _expect(
        0 not in queue and all(1 <= b < pool.num_blocks for b in queue), "free queue holds a bad block id"
    )
    refs: Counter = Counter()
    for req in manager.requests.values():
        _check_request(manager, req)
        refs.update(req.blocks())
    in_queue, counts = set(queue), pool.ref_counts()
    counts.update(dict.fromkeys(bare_runs.run_blocks(pool), 0))  # free, in the tail, with no entry (bare)
    for block in range(1, pool.num_blocks):
        count = counts.get(block)
        _expect(refs[block] == (count or 0), f"block {block}: ref count {count}, held {refs[block]} times")
        _expect((block in in_queue) == (not refs[block]), f"block {block}: free and held, or neither")
    _check_cache_map(pool)
    _check_counters(manager, pool)


def _check_request(manager, req) -> None:
    layout = manager.layout
    for group, (kind, table) in enumerate(zip(layout.group_kinds, req.tables, strict=True)):
        _expect(
            len(table) * layout.block_of(kind) >= req.kv_len,
            f"{req.request_id}: group {group} has {len(table)} blocks for {req.kv_len} tokens",
        )
        if kind == MAMBA:
            live = [index for index, block in enumerate(table) if block is not None]
            _expect(
                len(live) <= 3 + layout.checkpoint_blocks * 2,
                f"{req.request_id}: Mamba group {group} holds {len(live)} state blocks",
            )


def _check_cache_map(pool) -> None:
    listed: Counter[int] = Counter()
    key_of = pool.key_of
    for key, blocks in pool.blocks_of.items():
        _expect(bool(blocks), f"cache key {key} maps to no block")
        for block in blocks:
            _expect(
                key_of.get(block) == key,
                f"block {block} listed under {key}, keyed {key_of.get(block)}",
            )
            listed[block] += 1
    # a private block kept out of the map (``out_of_map.py``) is listed nowhere
    kept_out = {block for block, mark in enumerate(pool.private) if mark == out_of_map.KEPT_OUT}
    _expect(
        all(listed[b] == (b not in kept_out) for b in key_of), "a hashed block is missing from the cache map"
    )
    marked = [block for block, mark in enumerate(pool.private) if mark and block not in key_of]
    _expect(not marked, f"blocks {marked[:5]} are marked private with no hash (``private.py``)")


def _check_counters(manager, pool) -> None:
    """Blocks held per kind (a block two running requests hit counts once), hashed free blocks per kind."""
    held: dict[str, set] = {kind: set() for kind in pool.held}
    for req in manager.requests.values():
        for kind, table in zip(manager.layout.group_kinds, req.tables, strict=True):
            held[kind].update(block for block in table if block is not None)
    cached = Counter(
        pool.group_kinds[group] for block, (_, group) in pool.key_of.items() if not pool.count_of(block)
    )
    cached.update(pool.group_kinds[group] for group in bare_runs.run_blocks(pool).values())
    for kind in pool.held:
        _expect(
            pool.held[kind] == len(held[kind]), f"{kind}: held counter {pool.held[kind]} != {len(held[kind])}"
        )
        _expect(
            pool.cached_free[kind] == cached[kind],
            f"{kind}: cached counter {pool.cached_free[kind]} != {cached[kind]}",
        )


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise IntegrityError(message)
