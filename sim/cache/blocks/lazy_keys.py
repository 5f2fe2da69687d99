"""Kept-out blocks left unkeyed (``LAZY_KEYS``): a private block kept out of the cache map (``out_of_map.py``)
gets no key until the first preemption asks for it.

A private block's key is read only when the block is listed: nobody asks the map for it, its eviction is not
told (``private.py``) and unlists nothing. So while the pool keeps private blocks out, a request's key chain
is computed only to its private cut (``key_cap``: ~428 of ~853 keys a request at 4,000 Mooncake requests),
and its private blocks are hashed with its own ``Unkeyed`` mark in place of a key (``keep_out``), each step's
blocks and their places in the chain noted on the request. At the first preemption (``list_late``) every
running request's unkeyed blocks get their keys (the chain extended to them) and are listed with the other
kept-out blocks; a finished request's stay unkeyed and out of the map: it never comes back to ask for them.
Off: every key computed, the kept-out blocks keyed (tests/test_vllm_lazy_keys_property.py holds the two equal).
"""

from __future__ import annotations

from typing import Any

from sim.cache.blocks import bare_runs, by_id, out_of_map
from sim.cache.blocks.out_of_map import KEPT_OUT
from sim.cache.blocks.private import NEVER

LAZY_KEYS = True


def key_cap(pool: Any, private_from: int, hash_block: int) -> int:
    """How many of a request's keys are computed for now: those of its blocks before its private cut while the
    pool keeps its private blocks out unkeyed, else every one (``NEVER``)."""
    return private_from // hash_block if pool.keeps_private_out and pool.keys_late else NEVER


def keep_out(pool: Any, req: Any, group: int, private: list[int], positions: range | list[int]) -> bool:
    """``private`` (none yet hashed: else False, nothing done) kept out of the map unkeyed, their keys'
    places in ``req``'s chain (``positions``) noted for a preemption (a FULL group's left bare: ``bare_runs.py``)."""
    if bare_runs.is_bare(pool, group):
        req.kept_unkeyed.append((group, private, positions))
        return True
    if not by_id.all_none(pool.key_at, private):
        return False
    by_id.fill(pool.key_at, private, req.unkeyed)
    by_id.fill(pool.group_at, private, group)
    by_id.fill(pool.private, private, KEPT_OUT)
    req.kept_unkeyed.append((group, private, positions))
    return True


def cache_unkeyed(
    pool: Any,
    block_keys: Any,
    req: Any,
    group: int,
    blocks: list[int],
    keys: list,
    private: list[int],
    positions: Any,
) -> list:
    """``cache_private`` of ``blocks`` whose ``keys`` stop at the cap: the ``private`` rest (at ``positions`` in
    the chain) kept out unkeyed, or, where one of them is hashed already, keyed now, as the reference. The keys
    given."""
    if keep_out(pool, req, group, private, positions):
        pool.cache_group(blocks[: len(keys)], keys, group)
        return keys
    chain = block_keys.chain(req.tokens, positions[-1] + 1, req.chain).keys
    keys = [*keys, *[chain[at] for at in positions]]
    out_of_map.cache_private(pool, blocks, keys, private, group)
    return keys


def private_positions(
    table: list[int | None], indices: range | list[int], cut: int, stride: int, private: list[int]
) -> Any:
    """Where the keys of ``private``, the held blocks at ``indices`` from ``cut`` on, are in the chain (a run
    of indices with no null: a range)."""
    if isinstance(indices, range) and len(private) == len(range(max(cut, indices.start), indices.stop)):
        return range((max(cut, indices.start) + 1) * stride - 1, indices.stop * stride, stride)
    return [(i + 1) * stride - 1 for i in indices if i >= cut and table[i] is not None]


def list_late(pool: Any, running: list[Any], block_keys: Any) -> None:
    """``out_of_map.list_kept_out`` where kept-out blocks may be unkeyed: the ``running`` requests' get their
    keys first (a block evicted since is another's or unhashed: its mark is not the request's)."""
    keyed: dict[int, object] = {}  # a block noted twice (evicted, then taken again): its last
    for req in running:
        bare_runs.dress(pool, req)
        for _, blocks, positions in req.kept_unkeyed:
            keys = block_keys.chain(req.tokens, positions[-1] + 1, req.chain).keys
            for block, at in zip(blocks, positions, strict=True):
                if pool.key_at[block] is req.unkeyed:
                    keyed[block] = keys[at]
        req.kept_unkeyed.clear()
    for block, key in keyed.items():
        pool.key_at[block] = key
    bare_runs.dress_runs(pool)  # the runs made entries again next
    out_of_map.list_kept_out(pool)
