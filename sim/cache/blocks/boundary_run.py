"""A request's steady decode boundaries taken as one run (``BoundaryDecodes.take_boundary_run``: replay's path).

``_boundary_step`` takes one busy step at a time and works out at each what fires there: the run's step ends
are found by a ``min`` over the busy residues, each group's release goes through the general window and state
rules, and the one-block hash asks the retention mask kind by kind. Over a run every such step has one of at
most four residues modulo B, so here what fires at each residue is worked out once (``residue_work``), the
mask once for the run's blocks (``reachable_indices``), and each step does, in ``_boundary_step``'s order
(release, allocate, hash) and through the same pool calls, only what fires: a SWA group's block leaving its
window and a Mamba group's state below the running one freed one block each, in group order (an unhashed block
onto the queue's head, a hashed one through ``free_one``), one block per group allocated
(``get_block_per_group``), and block ``index`` of every group hashed or told skipped. A step whose tables are not
of that shape (a block below the window still live, a state not retired in step, a table short) or that the
pool cannot serve ends the run untouched, and the caller takes it step by step, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.cache.blocks import steps
from sim.cache.blocks.keys import BlockKeys
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.retention import reachable_indices
from sim.cache.events import BlocksSkipped, emit
from sim.models import FULL, MAMBA, SWA


def residue_work(B: int, lag: int, window: int, has_swa: bool, has_mamba: bool) -> list[tuple[int, int]]:
    """The busy residues of a step's end modulo ``B``, ascending, each with what fires there as bits: 1 a block
    allocated, 2 one hashed, 4 the window moved, 8 the state moved (where more than one token is processed)."""
    work: dict[int, int] = {}
    for residue, bit, present in (
        (1 % B, 1, True),
        ((lag - 1) % B, 2, True),
        ((lag + window - 1) % B, 4, has_swa),
        ((lag + 1) % B, 8, has_mamba),
    ):
        if present:
            work[residue] = work.get(residue, 0) | bit
    return sorted(work.items())


class RunHashing:
    """What a run's one-block hashes need of the manager: its keys, the retention interval, the Mamba keys
    hashed this step and the handlers told of skipped blocks."""

    def __init__(
        self, keys: BlockKeys, retention: int | None, mamba_keys: set, on_skip: list[Callable[[Any], None]]
    ):
        self.keys, self.retention, self.mamba_keys, self.on_skip = keys, retention, mamba_keys, on_skip


def run_mask(layout: Layout, req: BlockRequest, retention: int | None, first: int, stop: int) -> dict:
    """Each kind's blocks in ``[first, stop)`` that its mask hashes: a range where it is dense, else a set of
    the few it keeps (``reachable_indices``, held to the scalar rule ``_hash_block`` asks)."""
    boundaries, B, mask = (req.replay_boundary, req.junction), layout.block_size, {}
    for kind in layout.kinds:
        indices = reachable_indices(kind, first, stop, retention, B, layout.swa_need, boundaries, B)
        mask[kind] = indices if isinstance(indices, range) else set(indices)
    return mask


class BoundaryRun:
    """One request's run of steady decode steps: what every step reads, taken once."""

    def __init__(
        self, layout: Layout, pool: BlockPool, hashing: RunHashing, req: BlockRequest, lag: int, last: int
    ):
        self.layout, self.pool, self.hashing, self.req, self.lag = layout, pool, hashing, req, lag
        self.B, self.window = layout.block_size, layout.window
        self.swa_groups, self.mamba_groups = layout.groups_of(SWA), layout.groups_of(MAMBA)
        self.stride = layout.key_stride[FULL]
        first = req.num_cached[0] if req.num_cached else 0
        stop = max(first, (last - lag + 1) // self.B)  # the blocks the run can hash: [first, stop)
        mask = run_mask(layout, req, hashing.retention, first, stop)
        self.group_reach = [(group, kind, mask[kind]) for group, kind in enumerate(layout.group_kinds)]

    def take(self, end: int, last: int) -> int:
        """The busy steps from ``end`` to ``last``, in order; the end of the first one not taken (``last + 1``
        where all were)."""
        B, lag, req = self.B, self.lag, self.req
        tables, work = (
            req.tables,
            residue_work(B, lag, self.window, bool(self.swa_groups), bool(self.mamba_groups)),
        )
        base = end - end % B
        while True:
            for residue, fires in work:
                at = base + residue
                if at < end:
                    continue
                if at > last:
                    return last + 1
                allocates, hashed = fires & 1 and (at - 1) % B == 0, at - lag + 1
                hashes = fires & 2 and hashed % B == 0
                if allocates and not self.can_allocate((at - 1) // B):
                    return at
                if hashes and req.num_cached.count(hashed // B - 1) != len(req.num_cached):
                    return at
                processed = at - lag
                if fires & 4 and (processed - self.window + 1) % B == 0:
                    self.release_window((processed - self.window + 1) // B - 1, processed)
                if fires & 8 and processed > 1 and (processed - 1) % B == 0:
                    self.release_states((processed - 1) // B - 1, processed)
                if allocates:
                    for table, block in zip(tables, self.pool.get_block_per_group(), strict=True):
                        table.append(block)
                if hashes:
                    self.hash_block(hashed // B - 1)
            base += B

    def can_allocate(self, length: int) -> bool:
        """Every table at ``length`` and a free block for each (``_boundary_step``'s test)."""
        tables = self.req.tables
        return len(tables) <= self.pool.num_free and list(map(len, tables)).count(length) == len(tables)

    def release_window(self, top: int, processed: int) -> None:
        """Each SWA group's block ``top`` leaves the window: freed alone where the one below it is gone (every
        group's at once), else group by group by the general rule (a run of them)."""
        tables, blocks = self.req.tables, list[int]()
        for group in self.swa_groups:
            table = tables[group]
            block = table[top] if 0 <= top < len(table) else None
            if block is None or (top and table[top - 1] is not None):
                self.release_windows_one_by_one(top, processed)
                return
            blocks.append(block)
        for group in self.swa_groups:
            tables[group][top] = None
        self.pool.free_each(blocks, self.swa_groups)

    def release_windows_one_by_one(self, top: int, processed: int) -> None:
        """``release_window``'s groups each by its own shape, in group order (``_release``'s loop)."""
        pool, tables = self.pool, self.req.tables
        for group in self.swa_groups:
            table = tables[group]
            block = table[top] if 0 <= top < len(table) else None
            if block is None or (top and table[top - 1] is not None):
                steps.release_window(self.layout, pool, table, group, processed)
            else:
                pool.free_one(block, group)
                table[top] = None

    def release_states(self, below: int, processed: int) -> None:
        """Each Mamba group's state ``below`` the running one goes, where every one below it has (every
        group's at once), else group by group."""
        req, blocks, groups = self.req, list[int](), list[int]()
        for group in self.mamba_groups:
            if req.retired[group] != below or below >= len(req.tables[group]):
                self.release_states_one_by_one(below, processed)
                return
        for group in self.mamba_groups:
            table = req.tables[group]
            block = table[below]
            if block is not None:
                blocks.append(block)
                groups.append(group)
                table[below] = None
            req.retired[group] = below + 1
        self.pool.free_each(blocks, groups)

    def release_states_one_by_one(self, below: int, processed: int) -> None:
        """The Mamba groups each by its own shape, in group order (``_release``'s loop)."""
        pool, req = self.pool, self.req
        for group in self.mamba_groups:
            table = req.tables[group]
            if req.retired[group] != below or below >= len(table):
                steps.release_states(self.layout, pool, req, group, processed)
                continue
            block = table[below]
            if block is not None:
                pool.free_one(block, group)
                table[below] = None
            req.retired[group] = below + 1

    def hash_block(self, index: int) -> None:
        """``_hash_block`` with the run's mask: block ``index`` of every group hashed where its kind's mask
        reaches it, told skipped (one telling for the groups) where it does not."""
        hashing, req, pool = self.hashing, self.req, self.pool
        chain = req.chain
        if len(chain.keys) != index or not hashing.keys.append_in_run(req.tokens, chain):
            hashing.keys.chain(req.tokens, index + 1, chain)
        key, tables, told = chain.keys[(index + 1) * self.stride - 1], req.tables, []
        for group, kind, reached in self.group_reach:
            block = tables[group][index]
            if block is None:
                continue
            if index in reached:
                pool.cache(block, (key, group))
                if kind == MAMBA:
                    hashing.mamba_keys.add((key, group))
            elif kind != FULL:
                told.append(group)
        req.num_cached[:] = [index + 1] * len(req.num_cached)
        if told and hashing.on_skip:
            emit(hashing.on_skip, BlocksSkipped(tuple(told), [key]))
