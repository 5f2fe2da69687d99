"""Private blocks kept out of the cache map (``OUT_OF_MAP``): a prefill step's blocks only their own request can
ever hold (``private.py``) are hashed and marked, but not listed under their keys, and their eviction unlists
nothing.

No other request's chain holds a private block's key, so no other request's hit asks the map for it; its own
request asks only at an admission, before it hashes it, unless it is preempted and admitted again. Of ``vllm``'s
~711 FULL blocks hashed a request at 4,000 Mooncake requests, ~413 are private: each a dict insert and, once
evicted, a dict pop the map no longer makes. At the first preemption (``list_kept_out``) every block kept out is
listed, as the reference holds them then (a private key is hashed once before it), and none is kept out again.
Off: every hashed block listed, the reference (tests/test_vllm_out_of_map_property.py holds the two equal).
"""

from __future__ import annotations

from itertools import compress
from typing import Any, cast

from sim.cache.blocks import by_id

OUT_OF_MAP = True
LISTED, KEPT_OUT = 1, 2  # a private block's marks (``BlockPool.private``; 0: not private)


class Unkeyed:
    """A kept-out block's key not computed (``lazy_keys.py``): one a request, unequal to any key."""

    __slots__ = ()


def cache_private(pool: Any, blocks: list[int], keys: list[Any], private: list[int], group: int) -> None:
    """``cache_group`` of ``blocks`` with their ``keys``, then ``private`` (a suffix of ``blocks``) marked: the
    private ones out of the map where the pool keeps them out and none is hashed yet (else the reference's)."""
    num_listed = len(blocks) - len(private)
    if not pool.keeps_private_out or not private or not by_id.all_none(pool.key_at, private):
        pool.cache_group(blocks, keys, group)
        if private:
            pool.mark_private(private)
        return
    pool.cache_group(blocks[:num_listed], keys[:num_listed], group)
    pool.key_blocks(private, keys[num_listed:], group)
    by_id.fill(pool.private, private, KEPT_OUT)


def private_blocks(table: list[int | None], indices: range | list[int], cut: int) -> list[int]:
    """The held blocks at ``indices`` from ``cut`` on (a block id is never 0, the null block)."""
    if isinstance(indices, range):
        return cast(list[int], list(filter(None, table[max(cut, indices.start) : indices.stop])))
    return [block for index in indices if index >= cut and (block := table[index]) is not None]


def listed_of(
    marks: list[int], blocks: list[int], keys: list[Any], groups: list[int]
) -> tuple[list[int], list[Any], list[int]]:
    """Of evicted ``blocks`` (with their ``keys``, ``groups`` and private ``marks``), those in the map."""
    if KEPT_OUT not in marks:
        return blocks, keys, groups
    listed = [mark != KEPT_OUT for mark in marks]
    return list(compress(blocks, listed)), list(compress(keys, listed)), list(compress(groups, listed))


def list_kept_out(pool: Any) -> None:
    """A request preempted may ask the map for its own blocks when admitted again: every block kept out is
    listed (in block order: each key has that one block) and none is kept out from now on. A finished
    request's blocks left unkeyed (``lazy_keys.py``) stay out: nobody can ask for them."""
    pool.keeps_private_out = False
    pool._tail.flatten()  # a run's blocks may be listed now, and hit (``tail_runs.py``)
    marks, key_at, group_at = pool.private, pool.key_at, pool.group_at
    for block in [block for block, mark in enumerate(marks) if mark == KEPT_OUT]:
        if isinstance(key_at[block], Unkeyed):
            continue
        marks[block] = LISTED
        pool.list_block(block, key_at[block], group_at[block])
