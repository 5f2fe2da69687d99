"""The block pool's cache map and reference counts (``BlockPool``'s base).

The map keys ``(block key, group)`` to every block hashed to it, oldest first: there is no de-duplication,
and a lookup takes the oldest one still cached. It is kept as a map per group keyed by the block key alone
(``first_in[group]``, ``more_in[group]``): the group picks the dict, so no ``(key, group)`` tuple is made and
hashed a block (a bytes key's hash is cached in it). A key almost always has one block, so a group's map is
kept as its oldest block (``first_in``) and, for the rare keys with more, the newer ones in a list
(``more_in``): a list per key held hundreds of thousands of lists the collector walks after a run.

Reference counts are kept for hashed blocks only: only a hit shares a block and a hit takes hashed blocks, so
an unhashed block is held once or is free, and allocating, freeing and re-allocating the hundreds of unhashed
blocks of a prefill step (every SWA block the window leaves) writes no count. A block is hashed while the
request that computed it holds it alone: its count starts at 1, and a count of 1 is not written at all
(``count_at`` holds 1 for every block but the hashed blocks counted 0, free in the tail, or 2 and more, shared:
``count_of``), so hashing the hundreds of blocks of a prefill step writes no count either.

A block's key, group and count are lists indexed by block id (``by_id.py``: the ids are dense), not dicts: the compiled
core reads and writes them a batch at a time in its own loops.
"""

from __future__ import annotations

from collections import deque
from itertools import compress
from operator import itemgetter, not_
from typing import Any

from sim.cache.blocks import bare_runs, by_id, lazy_keys, out_of_map

Key = tuple[object, int]  # (block key, group index): how the map's entries are named outside it

# True: pure Python's ``_unlist`` of one group's keys (an eviction's usual batch) asks that group's dicts in one
# C call each; False: the reference, a dict looked up a key (tests/test_vllm_eviction_property.py)
ONE_GROUP_UNLIST = True


class CacheMap:
    def __init__(self, num_blocks: int, num_groups: int = 1) -> None:
        self.count_at: list[int] = [1] * num_blocks  # by block id: 1 unless hashed and counted otherwise
        # by block id: its block key, None while unhashed; and the group it is hashed in
        self.key_at: list[object | None] = [None] * num_blocks
        self.group_at: list[int] = [0] * num_blocks
        # a map per group keyed by the block key alone: no (key, group) tuple made or hashed a block
        self.first_in: list[dict[object, int]] = [{} for _ in range(num_groups)]  # each key's oldest block
        self.more_in: list[dict[object, list[int]]] = [{} for _ in range(num_groups)]  # its newer ones
        # a prefill step's private blocks kept out of the map (``out_of_map.py``)
        self.keeps_private_out = out_of_map.OUT_OF_MAP
        self.keys_late = lazy_keys.LAZY_KEYS  # and left unkeyed (``lazy_keys.py``)
        self.bare_kept_out = bare_runs.BARE_RUNS  # a FULL group's with no entry written (``bare_runs.py``)

    def cache(self, block: int, key: Key) -> None:
        """``cache_full_blocks`` for one block (a block hashed once keeps its first key)."""
        self.cache_in(block, key[0], key[1])

    def cache_in(self, block: int, key: object, group: int) -> None:
        """``cache`` of ``block`` under ``key`` in ``group``."""
        if self.key_at[block] is None:
            self.key_at[block] = key  # counted 1: not written
            self.group_at[block] = group
            self.list_block(block, key, group)

    def list_block(self, block: int, key: object, group: int) -> None:
        """``block`` listed under ``key`` in ``group``: its first block, or one of its newer ones."""
        first_of = self.first_in[group]
        if key in first_of:
            self.more_in[group].setdefault(key, []).append(block)
        else:
            first_of[key] = block

    def cache_all(self, blocks: list[int], keys: list[Key]) -> None:
        """``cache`` for each block with its (key, group), in order (tests; a step hashes a group's blocks
        with ``cache_group``)."""
        groups = set(map(itemgetter(1), keys))
        if len(groups) == 1:
            self.cache_group(blocks, list(map(itemgetter(0), keys)), groups.pop())
            return
        for block, key in zip(blocks, keys, strict=True):
            self.cache(block, key)

    def cache_group(self, blocks: list[int], keys: list[object], group: int) -> None:
        """``cache_in`` for each block with its key, in order, in ``group`` (a prefill step hashes hundreds).
        Usually every block is new to the map and every key too, each once: then in three updates. The keys go
        straight into the group's map; where it grew by fewer than the blocks (a key twice in ``keys``: all of
        them were new), they are taken out again and cached one by one. Compiled (``by_id.LOOPS``), each key is
        listed in one probe instead (``_list_new``): the map's lookups are most of a prefill step's cost there."""
        if by_id.LOOPS and by_id.all_none(self.key_at, blocks):
            self.key_blocks(blocks, keys, group)
            self._list_new(blocks, keys, group)
            return
        first_of = self.first_in[group]
        if by_id.all_none(self.key_at, blocks) and first_of.keys().isdisjoint(keys):
            num_keys = len(first_of)
            first_of.update(zip(keys, blocks, strict=True))
            if len(first_of) - num_keys == len(blocks):
                self.key_blocks(blocks, keys, group)
                return
            deque(map(first_of.pop, dict.fromkeys(keys)), 0)  # each new key once: the map as it was
        for block, key in zip(blocks, keys, strict=True):
            self.cache_in(block, key, group)

    def key_blocks(self, blocks: list[int], keys: list[object], group: int) -> None:
        """Blocks none of which is hashed yet given their keys and ``group``, not listed (the caller lists them,
        or keeps them out: ``out_of_map.py``)."""
        by_id.write(self.key_at, blocks, keys)  # each counted 1: not written
        by_id.fill(self.group_at, blocks, group)

    def _list_new(self, blocks: list[Any], keys: list[Any], group: int) -> None:
        """``_list`` of each block (none yet listed) with its key, in order: ``setdefault`` lists a new key and
        answers an old one's first block, another block (the objects typed ``Any``: no int unboxed, none boxed)."""
        first_of: dict[Any, Any] = self.first_in[group]
        for index in range(len(blocks)):
            block, key = blocks[index], keys[index]
            if first_of.setdefault(key, block) is not block:  # the key has a block already
                self.more_in[group].setdefault(key, []).append(block)

    def count_of(self, block: int) -> int:
        """A hashed block's reference count (0: free, in the tail)."""
        return self.count_at[block]

    @property
    def key_of(self) -> dict[int, Key]:
        """Every hashed block's (key, group) (for tests and integrity checks)."""
        group_at = self.group_at
        return {block: (key, group_at[block]) for block, key in enumerate(self.key_at) if key is not None}

    @property
    def ref_cnt(self) -> dict[int, int]:
        """The hashed blocks counted other than 1 (for tests)."""
        key_at = self.key_at
        return {block: n for block, n in enumerate(self.count_at) if n != 1 and key_at[block] is not None}

    def cached(self, key: Key) -> int | None:
        """``get_cached_block``: the oldest block hashed to ``key`` (a block key and its group) still cached."""
        return self.first_in[key[1]].get(key[0])

    def cached_in(self, key: object, group: int) -> int | None:
        """``cached`` of ``key`` in ``group``."""
        return self.first_in[group].get(key)

    def cached_blocks(self, keys: list[object], group: int) -> list[int | None]:
        """``cached`` of each of ``keys`` in ``group`` (a hit's table)."""
        return list(map(self.first_in[group].get, keys))

    def num_cached_from(self, keys: list[object], group: int) -> int:
        """How many of ``keys``, from the first, are cached in ``group`` (a hit's leading run: about 146
        blocks of a prompt's 860), looked up a stretch at a time in C, block by block in the stretch that ends
        the run."""
        contains, run = self.first_in[group].__contains__, 0
        while run < len(keys):
            stretch = keys[run : run + 32]
            if not all(map(contains, stretch)):
                return run + list(map(contains, stretch)).index(False)
            run += len(stretch)
        return run

    def hashed_key(self, block: int) -> Key | None:
        """A block's (key, group), None while unhashed."""
        key = self.key_at[block]
        return None if key is None else (key, self.group_at[block])

    @property
    def blocks_of(self) -> dict[Key, list[int]]:
        """Every cached (key, group)'s blocks, oldest first (for tests and integrity checks)."""
        return {
            (key, group): [block, *self.more_in[group].get(key, ())]
            for group, first_of in enumerate(self.first_in)
            for key, block in first_of.items()
        }

    def num_evictable(self, table: list[int | None]) -> int:
        """``is_evictable`` counted over a hit's table (a block unhashed is counted 1)."""
        return by_id.read(self.count_at, list(filter(None, table))).count(0)

    def is_evictable(self, block: int | None) -> bool:
        """A cached block no running request holds: touching it takes it out of the free queue. (Asked of a
        hit's blocks, which are hashed; an unhashed block, counted 1, answers False.)"""
        return block is not None and self.count_at[block] == 0

    def _unlist(self, blocks: list[int], keys: list[object], groups: list[int]) -> None:
        """Evicted ``blocks`` (their ``keys`` and ``groups`` in order) leave the map."""
        if by_id.LOOPS and self._unlist_each(keys, groups):
            return
        if ONE_GROUP_UNLIST and groups and groups.count(groups[0]) == len(groups):
            more_of = self.more_in[groups[0]]  # usually all of one group: its two dicts read once, not a key
            if not more_of or more_of.keys().isdisjoint(keys):  # no key has newer blocks: no list built
                deque(map(self.first_in[groups[0]].pop, keys), 0)
                return
        first_in, more_in = self.first_in, self.more_in
        shared = list(map(dict.__contains__, map(more_in.__getitem__, groups), keys)) if any(more_in) else []
        if True not in shared:  # each evicted key has one block (a key has more in a few of hundreds)
            deque(map(dict.pop, map(first_in.__getitem__, groups), keys), 0)  # consumed in C
            return
        # a key with one block gains no second while blocks are evicted: those leave the map in C; the keys
        # with more (a few of hundreds) one by one, in order, as before
        single = list(map(not_, shared))
        deque(map(dict.pop, map(first_in.__getitem__, compress(groups, single)), compress(keys, single)), 0)
        for block, key, group in zip(
            compress(blocks, shared), compress(keys, shared), compress(groups, shared), strict=True
        ):
            if key in more_in[group]:
                self._forget_duplicate(block, key, group)
            else:
                del first_in[group][key]

    def _unlist_each(self, keys: list[Any], groups: list[int]) -> bool:
        """Compiled: where no evicted key has newer blocks, each leaves its group's dict in a native loop (no
        method looked up and called a key, as ``map(dict.pop, ...)`` does); else False, nothing done."""
        first_in, more_in = self.first_in, self.more_in
        if any(more_in):
            for index in range(len(keys)):
                if keys[index] in more_in[groups[index]]:
                    return False
        for index in range(len(keys)):
            del first_in[groups[index]][keys[index]]
        return True

    def _forget_duplicate(self, block: int, key: object, group: int) -> None:
        """``block`` leaves a key that has more than one block: the next oldest becomes its first."""
        first_of, more_of = self.first_in[group], self.more_in[group]
        newer = more_of[key]
        if first_of[key] == block:
            first_of[key] = newer.pop(0)
        else:
            newer.remove(block)
        if not newer:
            del more_of[key]
