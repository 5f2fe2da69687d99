"""An eviction of listed blocks in one pass over them (``ONE_PASS_EVICT``): ``BlockPool._evicted`` where no
discard is told.

The reference reads the evicted blocks' keys, groups and private marks, and writes their keys, counts and marks,
each in its own pass (``by_id``), then counts the groups, splits off the private blocks, picks the listed ones
and unlists them, a pass each again: about ten passes a block, a fifth of a compiled ``vllm`` replay. Compiled,
one loop reads and writes each block's entries once, counts its group, lists it for the telling or not, and takes
it out of its group's dict (a key with newer blocks as ``_forget_duplicate`` does; the others cannot gain one
while blocks are evicted, so the order is the reference's). Pure Python keeps the C passes (a loop would run in
the interpreter), each entry read once and the one-group case found once. A kept-out run's blocks (``tail_runs``)
have their key, count and mark written in one loop, compiled. Only the miss tracker listens to evictions, and it
reads no pool entry, so the map is unlisted before it is told. Off: ``_evicted``'s passes, the reference
(tests/test_vllm_evict_pass_property.py holds the two equal).
"""

from __future__ import annotations

from collections import deque
from itertools import compress
from operator import not_
from typing import Any

from sim.cache.blocks import by_id
from sim.cache.blocks.out_of_map import KEPT_OUT
from sim.cache.events import BlocksEvicted, emit

ONE_PASS_EVICT = True


def evicted(pool: Any, blocks: list[int], told_each: bool) -> list[int]:
    """``pool._evicted(blocks, told_each)`` (no discard told; ``blocks`` not empty), in one pass compiled."""
    if by_id.LOOPS:
        keys, groups, counts = _each_once(pool, blocks)
    else:
        keys, groups, counts = _in_passes(pool, blocks)
    for group, num_group in enumerate(counts):
        if num_group:
            kind = pool.group_kinds[group]
            pool.cached_free[kind] -= num_group
            pool.num_evictions[kind] += num_group
    if keys and pool.on_evict:
        if told_each:
            for at in range(len(keys)):
                emit(pool.on_evict, BlocksEvicted(keys[at : at + 1], groups[at : at + 1]))
        else:
            emit(pool.on_evict, BlocksEvicted(keys, groups))
    return blocks


def _each_once(pool: Any, blocks: list[int]) -> tuple[list[Any], list[int], list[int]]:
    """Each block's entries read and reset once, counted by group, told unless private, unlisted unless kept
    out: the keys and groups to tell, and the count of each group's blocks."""
    # typed: each read and write indexes a list by a machine int (an ``Any`` list boxes the id a use)
    key_at: list[Any] = pool.key_at
    group_at: list[int] = pool.group_at
    count_at: list[int] = pool.count_at
    private: list[int] = pool.private
    first_in: list[dict[Any, int]] = pool.first_in
    more_in: list[dict[Any, list[int]]] = pool.more_in
    marked: bool = pool.marks_private
    kept_out: int = KEPT_OUT  # a typed local: compiled, a machine compare a block
    any_more = any(more_in)  # no key gains a newer block while blocks are evicted
    counts = [0] * len(first_in)
    keys: list[Any] = []
    groups: list[int] = []
    for block in blocks:
        key, group = key_at[block], group_at[block]
        key_at[block] = None
        count_at[block] = 1  # counted 0: unhashed, 1
        counts[group] += 1
        mark: int = private[block] if marked else 0
        if mark:
            private[block] = 0
        else:
            keys.append(key)
            groups.append(group)
        if mark == kept_out:
            continue
        if any_more and key in more_in[group]:
            pool._forget_duplicate(block, key, group)
        else:
            del first_in[group][key]
    return keys, groups, counts


def _in_passes(pool: Any, blocks: list[int]) -> tuple[list[Any], list[int], list[int]]:
    """``_each_once`` in C passes: each entry read once, the blocks' one group (the usual case) found once."""
    keys = list(map(pool.key_at.__getitem__, blocks))
    groups = list(map(pool.group_at.__getitem__, blocks))
    by_id.fill(pool.key_at, blocks, None)
    by_id.fill(pool.count_at, blocks, 1)
    counts = [0] * len(pool.first_in)
    one_group = groups.count(groups[0]) == len(groups)
    for group in (groups[0],) if one_group else dict.fromkeys(groups):
        counts[group] = len(groups) if one_group else groups.count(group)
    marks = list(map(pool.private.__getitem__, blocks)) if pool.marks_private else []
    if marks.count(0) == len(marks):  # none private: each told and unlisted
        _unlist(pool, blocks, keys, groups, one_group)
        return keys, groups, counts
    by_id.fill(pool.private, list(compress(blocks, marks)), 0)
    listed = list(map(KEPT_OUT.__ne__, marks))
    if True in listed:  # the listed blocks of one group are of one group still
        listed_keys, listed_groups = list(compress(keys, listed)), list(compress(groups, listed))
        _unlist(pool, list(compress(blocks, listed)), listed_keys, listed_groups, one_group)
    told = list(map(not_, marks))
    return list(compress(keys, told)), list(compress(groups, told)), counts


def _unlist(pool: Any, blocks: list[int], keys: list[Any], groups: list[int], one_group: bool) -> None:
    """``pool._unlist``, the one-group case known: its dict popped in one C call where no key has newer blocks."""
    if one_group:
        more_of = pool.more_in[groups[0]]
        if not more_of or more_of.keys().isdisjoint(keys):
            deque(map(pool.first_in[groups[0]].pop, keys), 0)
            return
    pool._unlist(blocks, keys, groups)


def run_evicted(pool: Any, run: list[int]) -> None:
    """A kept-out run's blocks lose their keys, counts and marks (``tail_runs.evict_runs``): one loop compiled."""
    if not by_id.LOOPS:
        by_id.fill(pool.key_at, run, None)
        by_id.fill(pool.count_at, run, 1)
        by_id.fill(pool.private, run, 0)
        return
    key_at: list[Any] = pool.key_at
    count_at: list[int] = pool.count_at
    private: list[int] = pool.private
    for block in run:
        key_at[block] = None
        count_at[block] = 1  # counted 0: unhashed, 1
        private[block] = 0
