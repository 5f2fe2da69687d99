"""A steady decode run's hashes (``boundary_run.py``): ``BoundaryDecodes._hash_block`` at each of its
hashing steps, with the keys chained once to the run's last block (step by step extends the chain a block a
step, to the same end) and the retention mask worked out once per kind over the run's blocks.

The FULL groups' hashes and private marks are written at the run's end, a ``cache_group`` per group: nothing in a run
reads the cache map (it looks nothing up; the why watcher keeps the keys it is told), a FULL block is not freed
while its request decodes, and a key's newer block is listed after its older ones whichever comes first, its
own hashing or the older one's eviction. An SWA or Mamba block the mask reaches is hashed in its step (a later
step of the run may free it: its hash decides where it goes); every ``BlocksSkipped`` is told in its step.
"""

from __future__ import annotations

from typing import cast

from sim.cache.blocks import by_id
from sim.cache.blocks.boundary import BoundaryDecodes
from sim.cache.blocks.lazy_keys import cache_unkeyed, key_cap
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.retention import reachable_indices
from sim.cache.events import BlocksSkipped, emit
from sim.models import FULL, MAMBA


class RunHashes:
    """A run's ``_hash_block`` steps: the keys chained once, the mask worked out once, the FULL blocks'
    hashes written at ``finish``."""

    def __init__(self, manager: BoundaryDecodes, req: BlockRequest, indices: list[int]) -> None:
        layout = manager.layout
        self.manager, self.req, self.pool, self.kinds = manager, req, manager.pool, layout.group_kinds
        cap = key_cap(self.pool, req.private_from, layout.hash_block)  # ``lazy_keys.py``
        self.keys = (
            manager.keys.chain(req.tokens, min(indices[-1] + 1, cap), req.chain).keys if indices else []
        )
        self.stride = layout.key_stride[FULL]
        self.private_at = req.private_from // layout.block_size  # ``_hash_block``'s private test
        self.full_groups = layout.groups_of(FULL)
        self.told = tuple(group for group, kind in enumerate(self.kinds) if kind != FULL)
        self.reached: dict[str, set[int]] = {kind: set() for kind in layout.kinds}
        if indices:
            boundaries, retention = (req.replay_boundary, req.junction), manager.knobs.retention_interval
            B, need = layout.block_size, layout.swa_need
            for kind in layout.kinds:
                if kind != FULL:
                    found = reachable_indices(
                        kind, indices[0], indices[-1] + 1, retention, B, need, boundaries, B
                    )
                    self.reached[kind] = set(found)
        self.any_reached = set().union(*self.reached.values())
        # each FULL group's blocks and their bare keys, in order, for ``cache_group`` at ``finish``
        self.full_blocks: dict[int, list[int]] = {group: [] for group in self.full_groups}
        self.full_keys: dict[int, list[object]] = {group: [] for group in self.full_groups}
        self.private_blocks: list[int] = []
        # the private FULL blocks past the key cap, kept out unkeyed at ``finish``, and their keys' places
        self.unkeyed: dict[int, list[int]] = {group: [] for group in self.full_groups}
        self.unkeyed_at: list[int] = []
        self.last = -1

    def hash_block(self, index: int) -> None:
        """``_hash_block(req, index)``, the FULL groups' blocks kept for ``finish``; a block in every group
        and none the mask reaches (a decode's usual block) told skipped in the groups' one tuple."""
        at = (index + 1) * self.stride - 1
        row = [table[index] for table in self.req.tables]
        self.last, private = index, index >= self.private_at
        if index in self.any_reached or None in row:  # (past the key cap: keyed now, as the reference)
            self._hash_each(
                index, self.manager.keys.chain(self.req.tokens, at + 1, self.req.chain).keys[at], row, private
            )
            return
        key = self.keys[at] if at < len(self.keys) else None  # None: past the key cap, a private block
        blocks = cast(list[int], row)  # no None in it
        for group in self.full_groups:
            self._keep_full(blocks[group], key, group, private)
        if key is None:
            self.unkeyed_at.append(at)
            return
        on_skip = self.manager._on_skip
        if self.told and on_skip and not private:
            emit(on_skip, BlocksSkipped(self.told, [key]))

    def _hash_each(self, index: int, key: object, row: list[int | None], private: bool) -> None:
        """``_hash_block``'s loop over the groups."""
        told: list[int] = []
        for group, block in enumerate(row):
            if block is None:
                continue
            kind = self.kinds[group]
            if kind == FULL:
                self._keep_full(block, key, group, private)
            elif index in self.reached[kind]:
                self.pool.cache_in(block, key, group)
                if private:
                    self.pool.private[block] = 1
                if kind == MAMBA:
                    self.manager._mamba_keys_this_step.add((key, group))
            else:
                told.append(group)
        on_skip = self.manager._on_skip
        if told and on_skip and not private:
            emit(on_skip, BlocksSkipped(tuple(told), [key]))

    def _keep_full(self, block: int, key: object, group: int, private: bool) -> None:
        if key is None:
            self.unkeyed[group].append(block)
            return
        self.full_blocks[group].append(block)
        self.full_keys[group].append(key)
        if private:
            self.private_blocks.append(block)

    def finish(self) -> None:
        """The FULL blocks hashed, in order, their private marks set; every group hashed to the last block."""
        if self.last < 0:
            return
        for group in self.full_groups:  # a group's map and its blocks' keys are its own: any group order
            self.pool.cache_group(self.full_blocks[group], self.full_keys[group], group)
        by_id.fill(self.pool.private, self.private_blocks, 1)
        for group in self.full_groups if self.unkeyed_at else ():
            blocks = self.unkeyed[group]
            cache_unkeyed(self.pool, self.manager.keys, self.req, group, blocks, [], blocks, self.unkeyed_at)
        self.req.num_cached[:] = [self.last + 1] * len(self.req.num_cached)
