"""Runs of kept-out private blocks in the free queue's tail as one entry each (``RUNS``).

A finished request frees its private blocks kept out of the cache map (``out_of_map.py``: a FULL table's suffix,
freed tail first, the first blocks of its call) together; each is marked kept out, counted once, of one group.
Their eviction only nulls a block's key, counts it unhashed, clears its mark and counts it by its group's kind:
never told, never unlisted (``pool._evicted``, which reads each block's key, group and mark to find that out).
Here such a call's blocks go to the tail as one run (its group carried), an eviction takes whole runs (split at
the end where only part is needed) and does just that list nulling for them, the other blocks the reference's
work. The queue's order is unchanged: a run sits where its blocks' entries would be, in their order.

No hit ever takes a kept-out block out of the tail (nobody finds it in the map), so a run's blocks are all live.
At the first preemption (``out_of_map.list_kept_out``) kept-out blocks may be listed: every run becomes its
blocks' entries again (``flatten``) and no run is made from then on. Runs are not made where discarded blocks are
told (the executor: its events a block, in queue order). Off: every block an entry, the reference
(tests/test_vllm_tail_runs_property.py holds the two equal).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from sim.cache.blocks import by_id
from sim.cache.blocks.out_of_map import KEPT_OUT
from sim.cache.blocks.tail import FreeTail

RUNS = True


class RunTail(FreeTail):
    def __init__(self, num_blocks: int, compact_at: int = 4096) -> None:
        super().__init__(num_blocks, compact_at)
        # oldest first: (the index in _entries it sits before, its blocks, their group)
        self.runs: deque[tuple[int, list[int], int]] = deque()

    def extend_run(self, blocks: list[int], group: int) -> None:
        """Append ``blocks`` (none of them in the tail, all of ``group``) as one run."""
        self.runs.append((len(self._entries), blocks, group))
        self.size += len(blocks)

    def pop_runs(self, count: int) -> tuple[list[int], list[int], list[tuple[list[int], int]]]:
        """``pop_oldest`` where runs are queued: the blocks in order, those of no run, and the runs' (parts)."""
        blocks: list[int] = []
        plain: list[int] = []
        parts: list[tuple[list[int], int]] = []
        runs, at, need = self.runs, self._at, count
        while need:
            stop = runs[0][0] if runs else len(self._entries)
            if at < stop:
                taken, at = self._live_before(need, at, stop)
                plain += taken
            else:
                taken, group = self._run_front(need)
                parts.append((taken, group))
            blocks += taken
            need -= len(taken)
        self.size -= count
        self._compact(at)
        return blocks, plain, parts

    def _live_before(self, need: int, at: int, stop: int) -> tuple[list[int], int]:
        """Up to ``need`` live blocks of the entries from ``at`` to ``stop``, and where they end."""
        entries = self._entries
        blocks = entries[at : min(at + need, stop)]
        at += len(blocks)
        if self._num_stale and not by_id.all_equal(self._stale, blocks, 0):
            blocks = self._live_of(blocks)
            while len(blocks) < need and at < stop:
                more = entries[at : min(at + need - len(blocks), stop)]
                at += len(more)
                blocks += self._live_of(more)
        return blocks, at

    def _run_front(self, need: int) -> tuple[list[int], int]:
        """The first run's first ``need`` blocks (all of it, at most) taken, and its group."""
        at, run, group = self.runs[0]
        if need < len(run):
            self.runs[0] = (at, run[need:], group)
            return run[:need], group
        self.runs.popleft()
        return run, group

    def _compact(self, at: int) -> None:
        """The consumed front cut off once it is most of the list (the runs' indices moved with it)."""
        entries = self._entries
        if at > self.compact_at and 2 * at > len(entries):
            del entries[:at]
            self.runs = deque((index - at, run, group) for index, run, group in self.runs)
            at = 0
        self._at = at

    def flatten(self) -> None:
        """Every run made its blocks' entries again, in place."""
        if self.runs:
            self._entries, self._at, self.runs = self._merged(), 0, deque()

    def _merged(self) -> list[int]:
        """The entries from the front on with each run's blocks in its place."""
        entries, at, merged = self._entries, self._at, []
        for index, run, _ in self.runs:
            merged += entries[at:index]
            merged += run
            at = index
        merged += entries[at:]
        return merged

    def live(self) -> list[int]:
        """The blocks in the tail, oldest first, the runs' among them."""
        return self._live_in(self._merged())


def free_run(pool: Any, hashed: list[int], group: int, kind: str) -> list[int]:
    """Of a ``free_blocks`` call's ``hashed`` blocks, a first stretch of kept-out blocks (each held once) freed
    to the tail as one run; the rest returned for ``free_hashed``."""
    marks = pool.private
    if marks[hashed[0]] != KEPT_OUT or pool._discarded or not pool.keeps_private_out or not RUNS:
        return hashed
    read_marks = by_id.read(marks, hashed)
    num_run = read_marks.count(KEPT_OUT)
    run = hashed[:num_run]
    if read_marks[:num_run].count(KEPT_OUT) < num_run or not by_id.all_equal(pool.count_at, run, 1):
        return hashed
    by_id.fill(pool.count_at, run, 0)
    pool.held[kind] -= num_run
    pool.cached_free[kind] += num_run
    pool._tail.extend_run(run, group)
    return hashed[num_run:]


def evict_runs(pool: Any, count: int, told_each: bool) -> list[int]:
    """``pool._evict_oldest`` where the tail holds runs: a run's blocks lose their keys, marks and counts, in
    bulk, and are counted evicted by kind; the other blocks evicted as the reference."""
    blocks, plain, parts = pool._tail.pop_runs(count)
    for run, group in parts:
        kind = pool.group_kinds[group]
        by_id.fill(pool.key_at, run, None)
        by_id.fill(pool.count_at, run, 1)  # counted 0: unhashed, 1
        by_id.fill(pool.private, run, 0)
        pool.cached_free[kind] -= len(run)
        pool.num_evictions[kind] += len(run)
    if plain:
        pool._evicted(plain, told_each)
    return blocks
