"""The block pool block by block, as it was before runs (main 2d997c3's ``sim/cache/blocks/pool.py``): a
reference count for every handed-out block, the tail an ordered map taken out of in place by a hit, one
dictionary entry per block freed, touched or evicted. ``tests/test_vllm_pool_runs_property.py`` holds the
pool's batched paths (the tail as a list with stale entries, counts for hashed blocks only, a hit's table
touched and looked up in one pass) to it."""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence

from sim.cache.events import BlocksDiscarded, BlocksEvicted, EventBus, emit

Key = tuple[object, int]  # (block key, group index)


class ReferenceBlockPool:
    def __init__(self, num_blocks: int, group_kinds: tuple[str, ...], events: EventBus | None = None):
        if num_blocks < 2:
            raise ValueError(
                f"a vLLM block pool needs at least 2 blocks (one is the null block), got {num_blocks}"
            )
        self.num_blocks = num_blocks
        self.group_kinds = group_kinds
        self._head: list[int] = []  # the queue's head part, its first block last
        self._fresh = 1  # ids fresh .. num_blocks - 1 were never handed out
        self._tail: OrderedDict[int, None] = OrderedDict()
        self.ref_cnt: dict[int, int] = {}  # handed-out ids only (absent: never used, 0 when free)
        self.key_of: dict[int, Key] = {}
        self.first_of: dict[Key, int] = {}  # each cached key's oldest block
        self.more_of: dict[Key, list[int]] = {}  # its newer blocks, oldest first, where it has any
        kinds = set(group_kinds)
        self.held = dict.fromkeys(kinds, 0)  # blocks with ref count > 0, by the kind of group holding them
        self.cached_free = dict.fromkeys(kinds, 0)  # hashed blocks in the free queue, by their group's kind
        self.num_evictions = dict.fromkeys(kinds, 0)
        bus = events if events is not None else EventBus()
        # blocks whose contents die are announced (BlocksDiscarded): the executor poisons them with NaN
        self._discarded = bus.channel(BlocksDiscarded)
        self.on_evict = bus.channel(
            BlocksEvicted
        )  # the cached blocks each allocation evicts (the why watcher)

    # ---- the free queue -----------------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """``get_num_free_blocks``: every block in the queue, cached or not."""
        return len(self._head) + self.num_blocks - self._fresh + len(self._tail)

    def get_new_blocks(self, count: int, group: int) -> list[int]:
        if count > self.num_free:
            raise RuntimeError(
                f"block pool: asked for {count} blocks, {self.num_free} free (check num_free first)"
            )
        kind = self.group_kinds[group]
        head = self._head
        taken = min(count, len(head))
        blocks = head[len(head) - taken :]
        blocks.reverse()
        del head[len(head) - taken :]
        if len(blocks) < count and self._fresh < self.num_blocks:
            fresh = min(count - len(blocks), self.num_blocks - self._fresh)
            blocks += range(self._fresh, self._fresh + fresh)
            self._fresh += fresh
        if len(blocks) < count:  # only the tail holds hashed blocks: these are evictions
            blocks += self._evict_oldest(count - len(blocks))
        self.ref_cnt.update(dict.fromkeys(blocks, 1))
        self.held[kind] += count
        return blocks

    def get_block_per_group(self) -> list[int]:
        """One new block for each group, in group order: what ``get_new_blocks(1, group)`` for each group in
        turn hands out (a decode step starting a block in every group), in one call."""
        if len(self.group_kinds) > self.num_free:
            raise RuntimeError(f"block pool: asked for a block per group, {self.num_free} free")
        head, ref_cnt, held = self._head, self.ref_cnt, self.held
        blocks: list[int] = []
        for kind in self.group_kinds:
            if head:
                block = head.pop()
            elif self._fresh < self.num_blocks:
                block = self._fresh
                self._fresh += 1
            else:  # only the tail holds hashed blocks: an eviction
                block = self._evict_oldest(1)[0]
            ref_cnt[block] = 1
            held[kind] += 1
            blocks.append(block)
        return blocks

    def _evict_oldest(self, count: int) -> list[int]:
        """Take ``count`` blocks off the tail's front, oldest first; each loses its hash and is told evicted
        (a prefill step evicts hundreds: batched, in the queue's order). Every tail block is hashed."""
        tail, key_of, group_kinds = self._tail, self.key_of, self.group_kinds
        blocks = [tail.popitem(last=False)[0] for _ in range(count)]
        keys = list(map(key_of.pop, blocks))
        if self._discarded:
            for block, key in zip(blocks, keys, strict=True):
                emit(self._discarded, BlocksDiscarded(key[1], [block]))
        for group, num_group in Counter(key[1] for key in keys).items():
            self.cached_free[group_kinds[group]] -= num_group
            self.num_evictions[group_kinds[group]] += num_group
        if self.on_evict:
            emit(self.on_evict, BlocksEvicted([key[0] for key in keys], [key[1] for key in keys]))
        first_of, more_of = self.first_of, self.more_of
        for block, key in zip(blocks, keys, strict=True):
            if key in more_of:
                self._forget_duplicate(block, key)
            else:
                del first_of[key]
        return blocks

    def _forget_duplicate(self, block: int, key: Key) -> None:
        """``block`` leaves a key that has more than one block: the next oldest becomes its first."""
        newer = self.more_of[key]
        if self.first_of[key] == block:
            self.first_of[key] = newer.pop(0)
        else:
            newer.remove(block)
        if not newer:
            del self.more_of[key]

    def touch(self, blocks: list[int | None], group: int) -> None:
        """A hit: each block leaves the free queue (if there) and gains a reference."""
        kind = self.group_kinds[group]
        for block in blocks:
            if block is None:
                continue
            if self.ref_cnt[block] == 0:
                del self._tail[block]  # a hit's block is hashed: if free, it is in the tail
                self.cached_free[kind] -= 1
                self.held[kind] += 1
            self.ref_cnt[block] += 1

    def free_blocks(self, ordered: Sequence[int | None], group: int) -> None:
        """Drop a reference from each of a group's blocks; those reaching 0 rejoin the queue (unhashed at the
        head, in the given order; hashed at the tail)."""
        ref_cnt = self.ref_cnt
        blocks = [block for block in ordered if block is not None]
        if len(blocks) < 2:  # a decode step frees one block per group at most
            if blocks:
                self.free_one(blocks[0], group)
            return
        if max(map(ref_cnt.__getitem__, blocks)) == 1:  # the usual case: no other request shares them
            released = blocks
            ref_cnt.update(dict.fromkeys(blocks, 0))
        else:
            released = []
            for block in blocks:
                count = ref_cnt[block] - 1
                ref_cnt[block] = count
                if not count:
                    released.append(block)
            if not released:
                return
        kind, key_of = self.group_kinds[group], self.key_of
        self.held[kind] -= len(released)
        hashed = [block for block in released if block in key_of]
        if len(hashed) < len(released):  # onto the head, first given on top: first given, first out
            unhashed = [block for block in released if block not in key_of]
            self._head.extend(reversed(unhashed))
            if self._discarded:
                emit(self._discarded, BlocksDiscarded(group, unhashed))
        self._tail.update(dict.fromkeys(hashed))
        self.cached_free[kind] += len(hashed)

    def free_one(self, block: int, group: int) -> None:
        """``free_blocks`` of one block."""
        count = self.ref_cnt[block] - 1
        self.ref_cnt[block] = count
        if count:
            return
        kind = self.group_kinds[group]
        self.held[kind] -= 1
        if block in self.key_of:
            self._tail[block] = None
            self.cached_free[kind] += 1
        else:
            self._head.append(block)
            if self._discarded:
                emit(self._discarded, BlocksDiscarded(group, [block]))

    # ---- the cache map ------------------------------------------------------------------------------
    def cache(self, block: int, key: Key) -> None:
        """``cache_full_blocks`` for one block (a block hashed once keeps its first key)."""
        if block not in self.key_of:
            self.key_of[block] = key
            self._list(block, key)

    def _list(self, block: int, key: Key) -> None:
        if key in self.first_of:
            self.more_of.setdefault(key, []).append(block)
        else:
            self.first_of[key] = block

    def cache_all(self, blocks: list[int], keys: list[Key]) -> None:
        """``cache`` for each block with its key, in order (a prefill step hashes hundreds). Usually every
        block is new to the map and every key too: then in two updates."""
        key_of, first_of = self.key_of, self.first_of
        new_keys = dict(zip(keys, blocks, strict=True))
        if (
            len(new_keys) == len(blocks)
            and key_of.keys().isdisjoint(blocks)
            and first_of.keys().isdisjoint(keys)
        ):
            key_of.update(zip(blocks, keys, strict=True))
            first_of.update(new_keys)
            return
        for block, key in zip(blocks, keys, strict=True):
            if block not in key_of:
                key_of[block] = key
                self._list(block, key)

    def cached(self, key: Key) -> int | None:
        """``get_cached_block``: the oldest block hashed to ``key`` that is still cached."""
        return self.first_of.get(key)

    @property
    def blocks_of(self) -> dict[Key, list[int]]:
        """Every cached key's blocks, oldest first (for tests and integrity checks)."""
        return {key: [block, *self.more_of.get(key, ())] for key, block in self.first_of.items()}

    def is_evictable(self, block: int | None) -> bool:
        """A cached block no running request holds: touching it takes it out of the free queue."""
        return block is not None and self.ref_cnt[block] == 0

    def queue(self) -> list[int]:
        """The free queue, head first (for tests and integrity checks)."""
        return self._head[::-1] + list(range(self._fresh, self.num_blocks)) + list(self._tail)
