"""vLLM's ``BlockPool`` (``v1/core/block_pool.py``) with its one ``FreeKVCacheBlockQueue``
(``v1/core/kv_cache_utils.py``), shared by every KV cache group.

Block 0 is the null block and never handed out. The free queue starts as blocks ``1 .. num_blocks - 1`` in
id order; ``get_new_blocks`` pops from its head, and a popped block that still has a hash loses it (evicted);
``touch`` takes a hit block out of the queue wherever it is; ``free_blocks`` prepends the blocks that reach
ref count 0 without a hash (given order kept: the first given is popped first) and appends the hashed ones
(LRU). The cache map (``cache_map.py``) keys ``(block key, group)`` to every block hashed to it (per group).

The queue is kept as head part + never-used ids + tail part: prepends only ever go to the head and appends
to the tail, so the never-used ids stay one contiguous range between them and cost nothing until popped.
The head holds unhashed blocks only (a block is hashed while a request holds it), so nothing is ever taken
out of its middle: it is a stack, its first block last. The tail is ordered for LRU; a hit takes a block
out of it anywhere (``tail.py``: a list whose entries a hit leaves stale). Reference counts: ``cache_map.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress
from operator import not_

from sim.cache.blocks import by_id, evict_pass, out_of_map
from sim.cache.blocks.cache_map import CacheMap
from sim.cache.blocks.tail_runs import RunTail, evict_runs
from sim.cache.events import BlocksDiscarded, BlocksEvicted, EventBus, emit


class BlockPool(CacheMap):
    def __init__(self, num_blocks: int, group_kinds: tuple[str, ...], events: EventBus | None = None):
        if num_blocks < 2:
            raise ValueError(
                f"a vLLM block pool needs at least 2 blocks (one is the null block), got {num_blocks}"
            )
        super().__init__(num_blocks, len(group_kinds))
        self.num_blocks = num_blocks
        self.group_kinds = group_kinds
        self._head: list[int] = []  # the queue's head part, its first block last
        self._fresh = 1  # ids fresh .. num_blocks - 1 were never handed out
        self._tail = RunTail(num_blocks)
        kinds = set(group_kinds)
        # each kind with its groups' count, in first-seen order (a block per group: held by kind at once)
        self._kind_counts = [(kind, group_kinds.count(kind)) for kind in dict.fromkeys(group_kinds)]
        self.held = dict.fromkeys(kinds, 0)  # blocks with ref count > 0, by the kind of group holding them
        self.cached_free = dict.fromkeys(kinds, 0)  # hashed blocks in the free queue, by their group's kind
        self.num_evictions = dict.fromkeys(kinds, 0)
        # not 0: a hashed block only its own request can ever hold (``private.py``), its eviction not told (2: kept
        # out of the cache map, ``out_of_map.py``); set where the manager marks them, cleared when it loses its hash
        self.private: list[int] = [0] * num_blocks  # by block id (``by_id.py``)
        self.marks_private = False
        bus = events if events is not None else EventBus()
        # blocks whose contents die are announced (BlocksDiscarded): the executor poisons them with NaN
        self._discarded = bus.channel(BlocksDiscarded)
        # the cached blocks each allocation evicts (the why watcher)
        self.on_evict = bus.channel(BlocksEvicted)

    # ---- the free queue -----------------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """``get_num_free_blocks``: every block in the queue, cached or not."""
        return len(self._head) + self.num_blocks - self._fresh + self._tail.size

    def get_new_blocks(self, count: int, group: int) -> list[int]:
        if count > self.num_free:
            raise RuntimeError(
                f"block pool: asked for {count} blocks, {self.num_free} free (check num_free first)"
            )
        kind = self.group_kinds[group]
        blocks = self._unhashed_first(count)
        if len(blocks) < count:  # only the tail holds hashed blocks: these are evictions
            blocks += self._evict_oldest(count - len(blocks))
        self.held[kind] += count
        return blocks

    def _unhashed_first(self, count: int) -> list[int]:
        """Up to ``count`` blocks off the head, then never-used ids: the queue's front before the tail."""
        head = self._head
        taken = min(count, len(head))
        blocks = head[len(head) - taken :]
        blocks.reverse()
        del head[len(head) - taken :]
        if len(blocks) < count and self._fresh < self.num_blocks:
            fresh = min(count - len(blocks), self.num_blocks - self._fresh)
            blocks += range(self._fresh, self._fresh + fresh)
            self._fresh += fresh
        return blocks

    def get_block_per_group(self) -> list[int]:
        """One new block for each group, in group order: what ``get_new_blocks(1, group)`` for each group in
        turn hands out (a decode step starting a block in every group), in one call: the head's top blocks,
        then never-used ids, then the tail's oldest, each eviction told alone as each of those calls tells it."""
        count = len(self.group_kinds)
        if count > self.num_free:
            raise RuntimeError(f"block pool: asked for a block per group, {self.num_free} free")
        blocks = self._unhashed_first(count)
        if len(blocks) < count and self._discarded:  # a block's discard told before its eviction
            blocks += [block for _ in range(count - len(blocks)) for block in self._evict_oldest(1)]
        elif len(blocks) < count:  # only the tail holds hashed blocks: evictions, each told alone
            blocks += self._evict_oldest(count - len(blocks), True)
        for kind, num_groups in self._kind_counts:
            self.held[kind] += num_groups
        return blocks

    def _evict_oldest(self, count: int, told_each: bool = False) -> list[int]:
        """The tail's ``count`` oldest blocks taken off and evicted (its kept-out runs: ``tail_runs.py``)."""
        if self._tail.runs:
            return evict_runs(self, count, told_each)
        return self._evicted(self._tail.pop_oldest(count), told_each)

    def _evicted(self, blocks: list[int], told_each: bool) -> list[int]:
        """Blocks taken off the tail: each loses its hash and is told evicted (a prefill step evicts hundreds:
        batched, in the queue's order; ``told_each``: an event a block). Every tail block is hashed."""
        if evict_pass.ONE_PASS_EVICT and not self._discarded:  # each block's entries read once
            return evict_pass.evicted(self, blocks, told_each)
        keys = by_id.take(self.key_at, blocks, None)
        groups = by_id.read(self.group_at, blocks)
        by_id.fill(self.count_at, blocks, 1)  # counted 0: unhashed, 1
        if self._discarded:
            for block, group in zip(blocks, groups, strict=True):
                emit(self._discarded, BlocksDiscarded(group, [block]))
        for group in dict.fromkeys(groups):  # a few groups: counted in C, no ``Counter`` (Python code)
            kind, num_group = self.group_kinds[group], groups.count(group)
            self.cached_free[kind] -= num_group
            self.num_evictions[kind] += num_group
        keys_told, groups_told, marks = self._told(blocks, keys, groups)  # told apart, as the pool holds them
        spans = [(at, at + 1) for at in range(len(keys_told))] if told_each else [(0, len(keys_told))]
        for start, end in spans if keys_told and self.on_evict else ():
            emit(self.on_evict, BlocksEvicted(keys_told[start:end], groups_told[start:end]))
        self._unlist(*out_of_map.listed_of(marks, blocks, keys, groups))
        return blocks

    def _told(self, blocks: list[int], keys: list, groups: list[int]) -> tuple[list, list[int], list[int]]:
        """The evicted keys and groups to tell, less private blocks', whose marks are cleared and returned."""
        if not self.marks_private or by_id.all_equal(self.private, blocks, 0):
            return keys, groups, []
        marks = by_id.read(self.private, blocks)
        by_id.fill(self.private, list(compress(blocks, marks)), 0)
        kept = list(map(not_, marks))
        return list(compress(keys, kept)), list(compress(groups, kept)), marks

    def mark_private(self, blocks: list[int]) -> None:
        """Hashed blocks only their own request can ever hold."""
        by_id.fill(self.private, blocks, 1)

    def touch(self, table: list[int | None], group: int) -> None:
        """A hit: each block of a hit's table (hashed, each once) leaves the free queue (if there) and gains a
        reference."""
        blocks = list(filter(None, table))
        count_at, kind = self.count_at, self.group_kinds[group]
        counts = by_id.read(count_at, blocks)
        held = list(compress(blocks, counts))  # counted 1 or more: one more
        by_id.write(count_at, held, list(map((1).__add__, compress(counts, counts))))
        freed = list(compress(blocks, map(not_, counts)))  # a hit's block is hashed: if free, in the tail
        if not freed:
            return
        by_id.fill(count_at, freed, 1)
        self._tail.take(freed)
        self.cached_free[kind] -= len(freed)
        self.held[kind] += len(freed)

    def free_blocks(self, ordered: Iterable[int | None], group: int) -> None:
        """Drop a reference from each block; at 0 it rejoins the queue (unhashed at the head, hashed at the tail)."""
        blocks = list(filter(None, ordered))  # a held block is never 0, the null block
        if len(blocks) > 1:
            self.free_held(blocks, group)
        elif blocks:  # a decode step frees one block per group at most
            self.free_one(blocks[0], group)

    def free_held(self, blocks: list[int], group: int) -> None:
        """``free_blocks`` of held blocks (no null among them)."""
        self.free_split(*by_id.split_set(self.key_at, blocks), group)  # often none hashed (a SWA release)

    def free_split(self, hashed: list[int], unhashed: list[int], group: int) -> None:
        """``free_held`` of a call's blocks already parted into the hashed and the unhashed, each in order."""
        kind = self.group_kinds[group]
        if unhashed or not hashed:  # (an empty call told discarded, as ever)
            self._free_unhashed(unhashed, group, kind)
        if hashed:
            self.free_hashed(hashed, kind)

    def tail_outlasts(self, num_allocated: int) -> bool:
        """``num_allocated`` blocks allocated from now on, whatever is freed meanwhile, evict only tail blocks."""
        return num_allocated - len(self._head) - (self.num_blocks - self._fresh) <= self._tail.size

    def _free_unhashed(self, unhashed: list[int], group: int, kind: str) -> None:
        """Onto the head, first given on top: first given, first out."""
        self._head.extend(reversed(unhashed))
        self.held[kind] -= len(unhashed)
        if self._discarded:
            emit(self._discarded, BlocksDiscarded(group, unhashed))

    def free_hashed(self, hashed: list[int], kind: str) -> None:
        """The hashed blocks of a ``free_blocks`` call: those reaching 0 go to the tail, in the given order."""
        if by_id.all_equal(self.count_at, hashed, 1):  # the usual case: no other request shares them
            released = hashed
            by_id.fill(self.count_at, hashed, 0)
        else:
            released = []
            for block in hashed:
                if self._drop_reference(block) == 0:
                    released.append(block)
        self.held[kind] -= len(released)
        self._tail.extend(released)
        self.cached_free[kind] += len(released)

    def free_one(self, block: int, group: int) -> None:
        """``free_blocks`` of one block."""
        kind = self.group_kinds[group]
        if self.key_at[block] is not None:
            if self._drop_reference(block):
                return
            self._tail.append(block)
            self.cached_free[kind] += 1
        else:
            self._head.append(block)
            if self._discarded:
                emit(self._discarded, BlocksDiscarded(group, [block]))
        self.held[kind] -= 1

    def free_each(self, blocks: list[int], groups: list[int], kind: str) -> None:
        """``free_one`` of each held block with its group (all of ``kind``), in order: a decode step's window
        or states leaving, a block per group, in one call where all or none are hashed."""
        if by_id.all_none(self.key_at, blocks):  # onto the head, each told discarded alone
            self._head.extend(blocks)
            self.held[kind] -= len(blocks)
            if self._discarded:
                for block, group in zip(blocks, groups, strict=True):
                    emit(self._discarded, BlocksDiscarded(group, [block]))
        elif not by_id.has_none(by_id.read(self.key_at, blocks)):  # each hashed: those reaching 0 to the tail
            self.free_hashed(blocks, kind)
        else:
            for block, group in zip(blocks, groups, strict=True):
                self.free_one(block, group)

    def _drop_reference(self, block: int) -> int:
        """A held hashed block's count, one less, returned."""
        self.count_at[block] -= 1
        return self.count_at[block]

    def queue(self) -> list[int]:
        """The free queue, head first (for tests and integrity checks)."""
        return self._head[::-1] + list(range(self._fresh, self.num_blocks)) + self._tail.live()

    def ref_counts(self) -> dict[int, int]:
        """Every handed-out block's reference count, 0 when free (for tests and integrity checks)."""
        free = set(self._head)
        return {
            block: self.count_of(block) if self.key_at[block] is not None else int(block not in free)
            for block in range(1, self._fresh)
        }
