"""The free queue's tail (``BlockPool``'s hashed free blocks, LRU first) as a list of entries, not an ordered
map: a run of hashed blocks freed is one ``extend`` and an allocation's evictions one slice, where an ordered
map made a node per block and popped them one by one.

A hit takes a block out of the tail anywhere: here it leaves the block's entry in the list and counts it stale
(``_stale``, by block id: ``by_id.py``); the front skips it when it gets there. A block's stale entries are all older than its live one
(the hit holds the block until it is freed and appended again), so the first entries of a block the front
meets are its stale ones. The consumed front is cut off once it is most of the list.
"""

from __future__ import annotations

from typing import Any, cast

from sim.cache.blocks import by_id

# True: the entries an eviction meets past a stale one are taken a slice at a time, each slice filtered in one
# loop (``_live_of``); False: the reference, an entry at a time with a call each
# (tests/test_vllm_eviction_property.py holds the two equal)
LIVE_IN_SLICES = True


class FreeTail:
    def __init__(self, num_blocks: int, compact_at: int = 4096) -> None:
        self._entries: list[int] = []  # oldest first, live and stale, read from _at on
        self._at = 0
        self._stale = [0] * num_blocks  # by block id: its stale entries still in _entries
        self._num_stale = 0  # all blocks' together
        self.size = 0  # the live entries: the blocks in the tail
        self.compact_at = compact_at  # entries consumed before the list drops them (a test lowers it)

    def extend(self, blocks: list[int]) -> None:
        """Append ``blocks`` (none of them in the tail), in order."""
        self._entries.extend(blocks)
        self.size += len(blocks)

    def append(self, block: int) -> None:
        self._entries.append(block)
        self.size += 1

    def take(self, blocks: list[int]) -> None:
        """A hit takes ``blocks`` (each in the tail, each once) out: their entries become stale."""
        stale = self._stale
        if by_id.all_equal(stale, blocks, 0):
            by_id.fill(stale, blocks, 1)
        else:
            for block in blocks:
                stale[block] += 1
        self._num_stale += len(blocks)
        self.size -= len(blocks)

    def pop_oldest(self, count: int) -> list[int]:
        """The ``count`` oldest blocks, taken off: one slice, unless it meets stale entries."""
        entries, at, stale = self._entries, self._at, self._stale
        blocks = entries[at : at + count]
        at += count
        if self._num_stale and not by_id.all_equal(stale, blocks, 0) and LIVE_IN_SLICES:
            blocks = self._live_of(blocks)
            while len(blocks) < count:  # each slice no longer than the live blocks still missing
                more = entries[at : at + count - len(blocks)]
                at += len(more)
                blocks += self._live_of(more)
        elif self._num_stale and not by_id.all_equal(stale, blocks, 0):
            blocks = [block for block in blocks if not stale[block] or not self._drop_stale(block)]
            while len(blocks) < count:
                at += 1
                if not self._drop_stale(entries[at - 1]):
                    blocks.append(entries[at - 1])
        self.size -= count
        if at > self.compact_at and 2 * at > len(entries):  # the consumed front is most of the list
            del entries[:at]
            at = 0
        self._at = at
        return blocks

    def _live_of(self, entries: list[int]) -> list[int]:
        """The live blocks of ``entries`` met at the front, in order; the stale ones dropped (no call a
        stale entry: a prefill's evictions meet hundreds of thousands after hits)."""
        stale, live, ids = self._stale, [], cast(list[Any], entries)  # appended as the objects they are
        for block in ids:
            num_stale = stale[block]
            if num_stale:
                stale[block] = num_stale - 1
            else:
                live.append(block)
        self._num_stale -= len(entries) - len(live)
        return live

    def _drop_stale(self, block: int) -> bool:
        """``block``'s entry met at the front is stale (and is dropped): it has stale entries left."""
        num_stale = self._stale[block]
        if num_stale:
            self._stale[block] = num_stale - 1
            self._num_stale -= 1
        return num_stale > 0

    def live(self) -> list[int]:
        """The blocks in the tail, oldest first (for tests and integrity checks)."""
        return self._live_in(self._entries[self._at :])

    def _live_in(self, entries: list[int]) -> list[int]:
        """The live blocks of ``entries``, the tail's from its front on."""
        stale, blocks = list(self._stale), []
        for block in entries:
            if stale[block]:
                stale[block] -= 1
            else:
                blocks.append(block)
        return blocks
