"""A steady decode run's frees (``boundary_run.py``): a step's window or states leaving, a block per group, in
one pool call (``BlockPool.free_each``); ``BoundaryDecodes._release``, the reference, takes a step of another
shape before anything is touched.

The window's frees of a whole run are known at its start where the blocks leaving it were there then: the
same index of every SWA group at each window step, one index further each time. Where each of them is hashed
and held once (a prompt's kept tail: replay's usual case) they go to the queue's tail, where no allocation of
the run takes them (``BlockPool.tail_outlasts``): they are freed at the run's end in one call, in the steps'
order (step by step, group by group), their table entries cleared then; before that where a free of the run
may go to the tail too (a hashed state: those of the window's steps taken are freed first). Nothing of the run
reads them before: a step's hash reads a block above the window.
"""

from __future__ import annotations

from typing import cast

from sim.cache.blocks import by_id
from sim.cache.blocks.boundary import BoundaryDecodes
from sim.cache.blocks.request import BlockRequest
from sim.models import MAMBA, SWA


class RunFrees:
    def __init__(self, manager: BoundaryDecodes, req: BlockRequest, tops: list[int], num_allocs: int) -> None:
        """``tops``: the block leaving the window at each window step of the run ([]: none taken at once);
        ``num_allocs``: the run's allocating steps."""
        layout = manager.layout
        self.manager, self.req, self.pool = manager, req, manager.pool
        self.B, self.size = layout.block_size, manager.window
        self.swa_groups, self.mamba_groups = layout.groups_of(SWA), layout.groups_of(MAMBA)
        self.swa_tables = [req.tables[group] for group in self.swa_groups]
        self.mamba_tables = [req.tables[group] for group in self.mamba_groups]
        self.later: list[int] = []  # the window's blocks left for later, in the steps' order
        self.first = tops[0] if tops else 0  # the first step's index among them
        self.num_passed = 0  # the window steps taken since (their blocks are the first of ``later``)
        # no state of the run hashed: once a step frees a state in every Mamba group, the later ones free
        # theirs without their checks (``_steady_states``)
        self.states_unhashed = False
        self.num_steady, self.last_below = 0, -1
        self.at_end = bool(tops) and self._leave_at_end(tops[0], tops[-1] + 1, num_allocs * len(req.tables))
        if self.at_end:
            later = [table[index] for index in range(tops[0], tops[-1] + 1) for table in self.swa_tables]
            self.later = cast(list[int], later)  # no None among them: ``_leave_at_end``

    def _leave_at_end(self, first: int, stop: int, num_allocated: int) -> bool:
        """The window's blocks ``first .. stop - 1`` all there, the one below gone, each hashed and held once,
        and the run's allocations never reach the tail's end."""
        if first <= 0 or not self.pool.tail_outlasts(num_allocated):
            return False
        for table in self.swa_tables:
            if stop > len(table) or table[first - 1] is not None or by_id.has_none(table[first:stop]):
                return False
        blocks = cast(list[int], [block for table in self.swa_tables for block in table[first:stop]])
        pool = self.pool
        hashed = not by_id.has_none(by_id.read(pool.key_at, blocks))
        return hashed and by_id.all_equal(pool.count_at, blocks, 1)

    def window(self, processed: int) -> None:
        """The block leaving the window, in every SWA group, where the one below it is gone already."""
        if self.at_end:
            self.num_passed += 1
            return
        top, blocks = (processed - self.size + 1) // self.B - 1, []
        for table in self.swa_tables:
            block = table[top] if 0 < top < len(table) else None
            if block is None or table[top - 1] is not None:
                self.manager._release(self.req, processed, True, False)
                return
            blocks.append(block)
        for table in self.swa_tables:
            table[top] = None
        self.pool.free_each(blocks, self.swa_groups, SWA)

    def states(self, processed: int) -> None:
        """The state below the running one, in every Mamba group, where every one below it is released."""
        below, retired = (processed - 1) // self.B - 1, self.req.retired
        if self.num_steady and self._steady_states(below):
            return
        blocks, groups = [], []
        for group, table in zip(self.mamba_groups, self.mamba_tables, strict=True):
            if retired[group] != below or below >= len(table):
                self.flush()  # it may free to the tail: the window's frees before it go first
                self.manager._release(self.req, processed, False, True)
                return
            block = table[below]
            if block is not None:
                blocks.append(block)
                groups.append(group)
        if not by_id.all_none(self.pool.key_at, blocks):
            self.flush()
        for group, table in zip(self.mamba_groups, self.mamba_tables, strict=True):
            table[below] = None
            retired[group] = below + 1
        self.pool.free_each(blocks, groups, MAMBA)
        if self.states_unhashed and len(groups) == len(self.mamba_groups):
            self.num_steady, self.last_below = 1, below

    def _steady_states(self, below: int) -> bool:
        """``states`` where the step before freed a state in every group (the retired counts are then all
        ``below``): this one frees the next, unhashed, in every group, the retired counts written at the run's
        end (``_settle_states``); False (settled, nothing freed) where it does not."""
        tables = self.mamba_tables
        row = [table[below] for table in tables] if below < min(map(len, tables)) else [None]
        blocks = cast(list[int], row)  # where it holds no None
        if None in row or not by_id.all_none(self.pool.key_at, blocks):
            self._settle_states()
            return False
        for table in tables:
            table[below] = None
        self.pool.free_each(blocks, self.mamba_groups, MAMBA)
        self.num_steady += 1
        self.last_below = below
        return True

    def _settle_states(self) -> None:
        """The steady states' retired counts written."""
        if self.num_steady > 1:
            for group in self.mamba_groups:
                self.req.retired[group] = self.last_below + 1
        self.num_steady = 0

    def finish(self) -> None:
        """The run's end: the window's blocks left for later freed, the steady states' counts written."""
        self.flush()
        self._settle_states()

    def flush(self) -> None:
        """The window's blocks of the steps taken, left for later, freed now (the run's end frees them all)."""
        num_freed = self.num_passed * len(self.swa_tables)
        if not num_freed:
            return
        stop = self.first + self.num_passed
        for table in self.swa_tables:
            table[self.first : stop] = [None] * self.num_passed
        self.pool.free_hashed(self.later[:num_freed], SWA)
        del self.later[:num_freed]
        self.first, self.num_passed = stop, 0
