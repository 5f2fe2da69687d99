"""The block pool's cache map and reference counts (``BlockPool``'s base).

The map keys ``(block key, group)`` to every block hashed to it, oldest first: there is no de-duplication,
and a lookup takes the oldest one still cached. A key almost always has one block, so the map is kept as its
oldest block (``first_of``) and, for the rare keys with more, the newer ones in a list (``more_of``): a list
per key held hundreds of thousands of lists the collector walks after a run.

Reference counts are kept for hashed blocks only (``ref_cnt``'s keys are ``key_of``'s): only a hit shares a
block and a hit takes hashed blocks, so an unhashed block is held once or is free, and allocating, freeing
and re-allocating the hundreds of unhashed blocks of a prefill step (every SWA block the window leaves)
writes no count. A block is hashed while the request that computed it holds it alone: its count starts at 1.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat

Key = tuple[object, int]  # (block key, group index)


class CacheMap:
    def __init__(self) -> None:
        self.ref_cnt: dict[int, int] = {}  # hashed blocks only (an unhashed one: 1 held, 0 free)
        self.key_of: dict[int, Key] = {}
        self.first_of: dict[Key, int] = {}  # each cached key's oldest block
        self.more_of: dict[Key, list[int]] = {}  # its newer blocks, oldest first, where it has any

    def cache(self, block: int, key: Key) -> None:
        """``cache_full_blocks`` for one block (a block hashed once keeps its first key)."""
        if block not in self.key_of:
            self.key_of[block] = key
            self.ref_cnt[block] = 1
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
        are taken out again and cached one by one."""
        key_of, first_of = self.key_of, self.first_of
        if key_of.keys().isdisjoint(blocks) and first_of.keys().isdisjoint(keys):
            num_keys = len(first_of)
            first_of.update(zip(keys, blocks, strict=True))
            if len(first_of) - num_keys == len(blocks):
                key_of.update(zip(blocks, keys, strict=True))
                self.ref_cnt.update(dict.fromkeys(blocks, 1))
                return
            deque(map(first_of.pop, dict.fromkeys(keys)), 0)  # each new key once: the map as it was
        for block, key in zip(blocks, keys, strict=True):
            self.cache(block, key)

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
        """``is_evictable`` counted over a hit's table."""
        return list(map(self.ref_cnt.get, filter(None, table))).count(0)

    def is_evictable(self, block: int | None) -> bool:
        """A cached block no running request holds: touching it takes it out of the free queue. (Asked of a
        hit's blocks, which are hashed; an unhashed block answers False.)"""
        return block is not None and self.ref_cnt.get(block) == 0

    def _unlist(self, blocks: list[int], keys: list[Key]) -> None:
        """Evicted ``blocks`` (their ``keys`` in order) leave the map."""
        first_of, more_of = self.first_of, self.more_of
        if not more_of:  # no key has a second block: each evicted key leaves the map
            deque(map(first_of.pop, keys), 0)  # consumed in C
            return
        for block, key in zip(blocks, keys, strict=True):
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
