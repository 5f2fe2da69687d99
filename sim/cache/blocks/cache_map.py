"""The block pool's cache map and reference counts (``BlockPool``'s base).

The map keys ``(block key, group)`` to every block hashed to it, oldest first: there is no de-duplication,
and a lookup takes the oldest one still cached. A key almost always has one block, so the map is kept as its
oldest block (``first_of``) and, for the rare keys with more, the newer ones in a list (``more_of``): a list
per key held hundreds of thousands of lists the collector walks after a run.

Reference counts are kept for hashed blocks only: only a hit shares a block and a hit takes hashed blocks, so
an unhashed block is held once or is free, and allocating, freeing and re-allocating the hundreds of unhashed
blocks of a prefill step (every SWA block the window leaves) writes no count. A block is hashed while the
request that computed it holds it alone: its count starts at 1, and a count of 1 is not written at all
(``count_at`` holds 1 for every block but the hashed blocks counted 0, free in the tail, or 2 and more, shared:
``count_of``), so hashing the hundreds of blocks of a prefill step writes no count either.

A block's key and count are lists indexed by block id (``by_id.py``: the ids are dense), not dicts: the compiled
core reads and writes them a batch at a time in its own loops.
"""

from __future__ import annotations

from collections import deque
from itertools import compress, repeat
from operator import not_
from typing import Any

from sim.cache.blocks import by_id

Key = tuple[object, int]  # (block key, group index)


class CacheMap:
    def __init__(self, num_blocks: int) -> None:
        self.count_at: list[int] = [1] * num_blocks  # by block id: 1 unless hashed and counted otherwise
        self.key_at: list[Key | None] = [None] * num_blocks  # by block id: its key, None while unhashed
        self.first_of: dict[Key, int] = {}  # each cached key's oldest block
        self.more_of: dict[Key, list[int]] = {}  # its newer blocks, oldest first, where it has any

    def cache(self, block: int, key: Key) -> None:
        """``cache_full_blocks`` for one block (a block hashed once keeps its first key)."""
        if self.key_at[block] is None:
            self.key_at[block] = key  # counted 1: not written
            self._list(block, key)

    def _list(self, block: int, key: Key) -> None:
        if key in self.first_of:
            self.more_of.setdefault(key, []).append(block)
        else:
            self.first_of[key] = block

    def cache_all(self, blocks: list[int], keys: list[Key]) -> None:
        """``cache`` for each block with its key, in order (a prefill step hashes hundreds). Usually every
        block is new to the map and every key too, each once: then in three updates. The keys go straight into
        the map; where it grew by fewer than the blocks (a key twice in ``keys``: all of them were new), they
        are taken out again and cached one by one. Compiled (``by_id.LOOPS``), each key is listed in one probe
        instead (``_list_new``): the map's lookups are most of a prefill step's cost there."""
        if by_id.LOOPS and by_id.all_none(self.key_at, blocks):
            by_id.write(self.key_at, blocks, keys)  # each counted 1: not written
            self._list_new(blocks, keys)
            return
        first_of = self.first_of
        if by_id.all_none(self.key_at, blocks) and first_of.keys().isdisjoint(keys):
            num_keys = len(first_of)
            first_of.update(zip(keys, blocks, strict=True))
            if len(first_of) - num_keys == len(blocks):
                by_id.write(self.key_at, blocks, keys)  # each counted 1: not written
                return
            deque(map(first_of.pop, dict.fromkeys(keys)), 0)  # each new key once: the map as it was
        for block, key in zip(blocks, keys, strict=True):
            self.cache(block, key)

    def _list_new(self, blocks: list[Any], keys: list[Any]) -> None:
        """``_list`` of each block (none yet listed) with its key, in order: ``setdefault`` lists a new key and
        answers an old one's first block, another block (the objects typed ``Any``: no int unboxed, none boxed)."""
        first_of: dict[Any, Any] = self.first_of
        for index in range(len(blocks)):
            block, key = blocks[index], keys[index]
            if first_of.setdefault(key, block) is not block:  # the key has a block already
                self.more_of.setdefault(key, []).append(block)

    def count_of(self, block: int) -> int:
        """A hashed block's reference count (0: free, in the tail)."""
        return self.count_at[block]

    @property
    def key_of(self) -> dict[int, Key]:
        """Every hashed block's key (for tests and integrity checks)."""
        return {block: key for block, key in enumerate(self.key_at) if key is not None}

    @property
    def ref_cnt(self) -> dict[int, int]:
        """The hashed blocks counted other than 1 (for tests)."""
        key_at = self.key_at
        return {block: n for block, n in enumerate(self.count_at) if n != 1 and key_at[block] is not None}

    def cached(self, key: Key) -> int | None:
        """``get_cached_block``: the oldest block hashed to ``key`` that is still cached."""
        return self.first_of.get(key)

    def cached_blocks(self, keys: list[object], group: int) -> list[int | None]:
        """``cached`` of each of ``keys`` in ``group`` (a hit's table)."""
        return list(map(self.first_of.get, zip(keys, repeat(group))))

    def num_cached_from(self, keys: list[object], group: int) -> int:
        """How many of ``keys``, from the first, are cached in ``group`` (a hit's leading run: about 146
        blocks of a prompt's 860), looked up a stretch at a time in C, block by block in the stretch that ends
        the run."""
        contains, run = self.first_of.__contains__, 0
        while run < len(keys):
            stretch = keys[run : run + 32]
            if not all(map(contains, zip(stretch, repeat(group)))):
                return run + list(map(contains, zip(stretch, repeat(group)))).index(False)
            run += len(stretch)
        return run

    @property
    def blocks_of(self) -> dict[Key, list[int]]:
        """Every cached key's blocks, oldest first (for tests and integrity checks)."""
        return {key: [block, *self.more_of.get(key, ())] for key, block in self.first_of.items()}

    def num_evictable(self, table: list[int | None]) -> int:
        """``is_evictable`` counted over a hit's table (a block unhashed is counted 1)."""
        return by_id.read(self.count_at, list(filter(None, table))).count(0)

    def is_evictable(self, block: int | None) -> bool:
        """A cached block no running request holds: touching it takes it out of the free queue. (Asked of a
        hit's blocks, which are hashed; an unhashed block, counted 1, answers False.)"""
        return block is not None and self.count_at[block] == 0

    def _unlist(self, blocks: list[int], keys: list[Key]) -> None:
        """Evicted ``blocks`` (their ``keys`` in order) leave the map."""
        first_of, more_of = self.first_of, self.more_of
        # each evicted key has one block (a key has more in a few of hundreds): it leaves the map
        if not more_of or more_of.keys().isdisjoint(keys):
            deque(map(first_of.pop, keys), 0)  # consumed in C
            return
        shared = list(map(more_of.__contains__, keys))
        # a key with one block gains no second while blocks are evicted: those leave the map in C; the keys
        # with more (a few of hundreds) one by one, in order, as before
        deque(map(first_of.pop, compress(keys, map(not_, shared))), 0)
        for block, key in zip(compress(blocks, shared), compress(keys, shared), strict=True):
            if key in more_of:
                self._forget_duplicate(block, key)
            else:
                del first_of[key]

    def _forget_duplicate(self, block: int, key: Key) -> None:
        """``block`` leaves a key that has more than one block: the next oldest becomes its first."""
        newer = self.more_of[key]
        if self.first_of[key] == block:
            self.first_of[key] = newer.pop(0)
        else:
            newer.remove(block)
        if not newer:
            del self.more_of[key]
