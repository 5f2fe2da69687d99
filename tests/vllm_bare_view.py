"""A pool's per-block entries as the reference holds them, bare blocks dressed (``sim/cache/blocks/bare_runs.py``):
a run's blocks in the free queue's tail keyed by their request's ``Unkeyed`` mark (named by its kind), counted 0,
kept out. A block's group is shown only while it is hashed: nothing reads it after, and a bare block's group
is never written."""

from __future__ import annotations

from sim.cache.blocks import bare_runs
from sim.cache.blocks.out_of_map import KEPT_OUT, Unkeyed


def dressed_entries(pool) -> tuple[list, list, list, list]:
    """The keys (an ``Unkeyed`` mark by its kind's name), counts, private marks and groups, block for block."""
    keys, counts, marks, groups = (
        list(pool.key_at),
        list(pool.count_at),
        list(pool.private),
        list(pool.group_at),
    )
    for block, group in bare_runs.run_blocks(pool).items():
        keys[block], counts[block], marks[block], groups[block] = Unkeyed(), 0, KEPT_OUT, group
    named = [type(key).__name__ if isinstance(key, Unkeyed) else key for key in keys]
    return (
        named,
        counts,
        marks,
        [None if key is None else group for key, group in zip(keys, groups, strict=True)],
    )
