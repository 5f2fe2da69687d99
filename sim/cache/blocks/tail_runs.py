"""A finished request's kept-out private blocks one entry in the free queue's tail, the request naming them
(``OWN_RUNS``).

A request notes each step's FULL blocks it keeps out of the cache map unkeyed (``lazy_keys.py``:
``req.kept_unkeyed``, in table order); at its finish they are its table's private stretch, freed together tail
first, each hashed, counted once and marked kept out (no hit finds one, no preemption came yet). Here that stretch
goes to the tail as one run (its group carried) without a read of its blocks' keys, counts or marks
(``free_own_run``; the table's blocks after and before it as ``free_split`` takes them, in the same order). An
eviction takes whole runs (split at the end where only part is needed) and only nulls a run block's key, counts
it unhashed, clears its mark and counts it by kind: what the reference (``pool._evicted``, reading each block's
key, group and mark) does for a kept-out block, never told, never unlisted. The queue's order is unchanged: a run
sits where its blocks' entries would be, in their order.

A run's blocks are all live (no hit takes one out of the tail). At the first preemption
(``out_of_map.list_kept_out``) kept-out blocks may be listed: every run becomes its blocks' entries again
(``flatten``) and none is made from then on; none is made where discarded blocks are told (the executor: an event
a block, in queue order), nor for a table whose noted blocks are not one stretch of it. Off: every block an entry,
freed as ``free_blocks`` frees it, the reference (tests/test_vllm_tail_runs_property.py holds the two equal).
Round 38's ``RUNS`` read each freed block's mark to find the run; the request naming it spares that read.
"""

from __future__ import annotations

from collections import deque
from itertools import chain
from typing import Any

from sim.cache.blocks import bare_runs, by_id, evict_pass
from sim.cache.blocks.tail import FreeTail
from sim.models import FULL

OWN_RUNS = True


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


def free_own_run(pool: Any, req: Any, group: int, table: list[int | None]) -> bool:
    """``free_blocks`` of a finished request's FULL ``table``, tail first, where the blocks it kept out unkeyed
    (``req.kept_unkeyed``, noted in table order) are one stretch of it: that stretch to the tail as one run, its
    marks never read; the blocks after and before it as ``free_split`` takes them. Else False, nothing done but
    its bare blocks' entries written (``bare_runs.py``: the reference's free reads them)."""
    found = _own_run(pool, req, group, table)
    if found is None:
        bare_runs.dress(pool, req, group)
        return False
    run, end = found
    start = end - len(run)
    # a FULL block noted kept out is held by this request alone from then on (no hit finds it, no preemption
    # yet: the pool still keeps private blocks out), so it is hashed, counted once and marked kept out
    after, before = table[end:], table[:start]
    after.reverse()
    before.reverse()
    hashed_after, unhashed_after = by_id.split_set(pool.key_at, list(filter(None, after)))
    hashed_before, unhashed_before = by_id.split_set(pool.key_at, list(filter(None, before)))
    kind = pool.group_kinds[group]
    if unhashed_after or unhashed_before:  # onto the head at once, as one call puts them
        pool._free_unhashed(unhashed_after + unhashed_before, group, kind)
    if hashed_after:
        pool.free_hashed(hashed_after, kind)
    run.reverse()
    if not pool.bare_kept_out:  # bare: counted 1 to its eviction, as the eviction leaves it
        by_id.fill(pool.count_at, run, 0)
    pool.held[kind] -= len(run)
    pool.cached_free[kind] += len(run)
    pool._tail.extend_run(run, group)
    if hashed_before:
        pool.free_hashed(hashed_before, kind)
    return True


def _own_run(pool: Any, req: Any, group: int, table: list[int | None]) -> tuple[list[int], int] | None:
    """The blocks ``req`` kept out of its FULL ``group``, in table order, and where they end in its ``table``,
    where they are one stretch of it and a run can be made; else None."""
    if not OWN_RUNS or pool._discarded or not pool.keeps_private_out or pool.group_kinds[group] != FULL:
        return None
    run: list[int] = list(chain.from_iterable(blocks for at, blocks, _ in req.kept_unkeyed if at == group))
    end = len(table)
    while run and end > len(run) and len(table) - end < 4 and table[end - 1] is not run[-1]:
        end -= 1  # the blocks after the run: its unhashed last (a few at most)
    start = end - len(run)
    if not run or start < 0 or table[start:end] != run:
        return None
    return run, end


def evict_runs(pool: Any, count: int, told_each: bool) -> list[int]:
    """``pool._evict_oldest`` where the tail holds runs: a run's blocks lose their keys, marks and counts, in
    bulk, and are counted evicted by kind; the other blocks evicted as the reference."""
    blocks, plain, parts = pool._tail.pop_runs(count)
    for run, group in parts:
        kind = pool.group_kinds[group]
        if pool.bare_kept_out:  # bare: its entries are these already (``bare_runs.py``)
            pass
        elif evict_pass.ONE_PASS_EVICT:
            evict_pass.run_evicted(pool, run)
        else:
            _reset_run(pool, run)
        pool.cached_free[kind] -= len(run)
        pool.num_evictions[kind] += len(run)
    if plain:
        pool._evicted(plain, told_each)
    return blocks


def _reset_run(pool: Any, run: list[int]) -> None:
    """A run's blocks' entries reset as an eviction leaves a block: unhashed, counted 1, unmarked."""
    by_id.fill(pool.key_at, run, None)
    by_id.fill(pool.count_at, run, 1)  # counted 0: unhashed, 1
    by_id.fill(pool.private, run, 0)
