"""Steady decode steps taken in one loop, those at block boundaries included (``advance_decode``: a request
decoding alone, replay mode's path), without ``allocate_slots``' walk of every group at every step.

With one block size ``B`` for every group and a steady decode (one token a step, each step one iteration after
the last, the prompt done), step ``e`` (the step's end; the processed tokens ``p = e - lag``, the hashed ones
``h = e - lag + 1``) does, in ``_step``'s order: (1) each SWA group frees the block leaving its window when
``p - W + 1`` is a multiple of B, each Mamba group its state below the running one when ``p - 1`` is; (2)
every group takes one new block when ``e - 1`` is; (3) when ``h`` is, every group's block ending at ``h`` is
hashed or, where the retention mask leaves it, told skipped. ``settle`` then hashes nothing more (its tokens,
``e - 1``, are no more than ``h``). Every other step only lengthens the request. The loop visits only those
steps and does what fires there through the pool calls ``_step`` makes, in its order; a step of another shape
(a table not at its length, a group hashed out of step, too few free blocks) ends the run untouched, and the
caller takes it step by step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.cache.blocks import steps
from sim.cache.blocks.keys import BlockKeys
from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.blocks.lazy_keys import keep_out, key_cap
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.retention import reachable
from sim.cache.blocks.views import BlockViews
from sim.cache.events import BlocksSkipped, emit
from sim.cache.policy import Policy
from sim.cache.results import ChunkPlan
from sim.models import FULL, MAMBA, SWA


class BoundaryDecodes(BlockViews):
    """A base of ``BlockCacheManager`` (views <- boundary decodes <- plain decodes <- manager): uses its
    ``layout``, ``pool``, ``keys``, ``knobs``, ``policy``, ``window``, ``batches_in_flight``, the Mamba keys
    hashed this step and the skip handlers."""

    keys: BlockKeys
    knobs: VllmKnobs
    policy: Policy
    window: int
    batches_in_flight: int  # the knobs': a decode step ending at e has processed e - batches_in_flight tokens
    _mamba_keys_this_step: set
    _on_skip: list[Callable[[Any], None]]
    steady_steps: bool  # prepare_decode's steady path (a test turns it off: ``_step`` is the reference)
    one_block_hash: bool  # _cache's one-block path (the same test turns it off: ``cache_blocks``)

    def take_boundary_run(self, req: BlockRequest, iteration: int, num_steps: int) -> int:
        """Up to ``num_steps`` decode steps from ``iteration`` on, exactly as step by step; the steps taken
        (0: the next one is not a steady step of a one-block-size layout)."""
        lag = self.batches_in_flight
        if not self.takes_steady_steps() or not req.decodes_steadily(iteration, lag):
            return 0
        B, start = self.layout.block_size, req.kv_len
        busy = self._busy_residues(lag)
        end, last = start + 1, start + num_steps  # the ends of the next step and of the last one
        while True:
            end += min((residue - end) % B for residue in busy)  # the next step that does anything
            if end > last:
                end = last + 1
                break
            if not self.take_boundary_step(req, end, lag):
                break
            end += 1
        taken = end - 1 - start  # the steps before ``end``'s
        if taken:
            req.take_steady_decodes(iteration + taken - 1, taken)
        return taken

    def steady_step(self, req: BlockRequest, iteration: int) -> ChunkPlan | None:
        """``prepare_decode``'s step where it is steady (the timed loop takes every busy decode step one by one):
        what ``_step`` does, through ``take_boundary_step``, and the step recorded; None (nothing touched) where
        it is not steady, or not of the steady shape (``_step`` then takes it, refusal included)."""
        lag = self.batches_in_flight
        if not self.steady_steps or not self.takes_steady_steps() or not req.decodes_steadily(iteration, lag):
            return None
        end = req.kv_len + 1
        if not self.take_boundary_step(req, end, lag):
            return None
        req.record_step(iteration, 1)
        return ChunkPlan(req.request_id, req.kv_len, end, None)

    def _cache(self, req: BlockRequest, end: int, checkpoint: bool) -> None:
        """``cache_blocks``; a step filling one block per group hashed as the decode fast path does it."""
        B, least = self.layout.uniform_block, min(req.num_cached)
        if B and end // B <= least:
            return  # no block became full in any group: ``cache_blocks``' first test (every settle asks)
        index = end // B - 1 if B and self.one_block_hash and not checkpoint else -1
        if 0 <= index == least == max(req.num_cached) < min(map(len, req.tables)):
            self._hash_block(req, index)
            return
        steps.cache_blocks(
            self.layout,
            self.pool,
            self.keys,
            req,
            end,
            checkpoint,
            self.knobs.retention_interval,
            self._mamba_keys_this_step,
            self._on_skip,
        )

    def takes_steady_steps(self) -> bool:
        """Whether steady decode steps may go through the boundary path: every group has one block size, and
        the policy is not the negative control that frees by its own rule (``vllm-early-free``)."""
        return not self.layout.kind_blocks and self.policy.fault != "vllm-early-free"

    def busy_step_ends(self, start: int, last: int, lag: int) -> list[int]:
        """The ends ``e`` in ``(start, last]`` of the steady decode steps that free, allocate or hash, in order
        (each request's busy steps of a run: ``boundary_run.py``'s, ``decode_batch.py``'s)."""
        B, residues = self.layout.block_size, self._busy_residues(lag)
        base = start - start % B
        return [e for at in range(base, last + 1, B) for e in [at + r for r in residues] if start < e <= last]

    def _busy_residues(self, lag: int) -> list[int]:
        """The step ends mod B where a steady decode step does anything: allocates (1), hashes (``lag - 1``),
        moves the SWA window, moves the Mamba state; in order, each once."""
        B = self.layout.block_size
        busy = {1, (lag - 1) % B}
        if self.has_swa:
            busy.add((lag + self.window - 1) % B)
        if self.has_mamba:
            busy.add((lag + 1) % B)
        return sorted(busy)

    def take_boundary_step(self, req: BlockRequest, end: int, lag: int) -> bool:
        """The steady decode step ending at ``end`` taken, or False (nothing touched) where it is not of the
        steady shape."""
        B, tables = self.layout.block_size, req.tables
        allocates, hashed = (end - 1) % B == 0, end - lag + 1
        if not 0 <= self.steady_need(req, end, lag) <= self.pool.num_free:
            return False
        processed = end - lag
        window_moves = self.has_swa and (processed - self.window + 1) % B == 0
        state_moves = self.has_mamba and processed > 1 and (processed - 1) % B == 0
        if window_moves or state_moves:  # most steps of a timed run free nothing (and fill nothing)
            self._release(req, processed, window_moves, state_moves)
        if allocates:
            for table, block in zip(tables, self.pool.get_block_per_group(), strict=True):
                table.append(block)
        if hashed % B == 0:
            self._hash_block(req, hashed // B - 1)
        return True

    def steady_need(self, req: BlockRequest, end: int, lag: int) -> int:
        """The free blocks the step ending at ``end`` takes where it is of the steady shape (every table at its
        length where it allocates, every group hashed to the block before where it hashes), else -1."""
        B, tables = self.layout.block_size, req.tables
        hashed = end - lag + 1
        if hashed % B == 0 and req.num_cached.count(hashed // B - 1) != len(req.num_cached):
            return -1
        if (end - 1) % B:
            return 0
        # every table at its length: counted in C, not a generator per table
        return len(tables) if list(map(len, tables)).count((end - 1) // B) == len(tables) else -1

    def _release(self, req: BlockRequest, processed: int, window_moves: bool, state_moves: bool) -> None:
        """``release_skipped`` for the groups whose first live block moves at ``processed`` (the SWA window's,
        the Mamba state's, or both)."""
        layout, pool, B = self.layout, self.pool, self.layout.block_size
        if window_moves and state_moves:  # both in one step: in group order
            steps.release_skipped(layout, pool, req, processed)
        elif window_moves:  # the block leaving the window, where the one below it is gone already
            top = (processed - self.window + 1) // B - 1
            for group in layout.groups_of(SWA):
                table = req.tables[group]
                block = table[top] if 0 <= top < len(table) else None
                if block is None or (top and table[top - 1] is not None):
                    steps.release_window(layout, pool, table, group, processed)
                else:
                    pool.free_one(block, group)
                    table[top] = None
        elif state_moves:  # the state below the running one, where every one below it is released
            below = (processed - 1) // B - 1
            for group in layout.groups_of(MAMBA):
                table = req.tables[group]
                if req.retired[group] != below or below >= len(table):
                    steps.release_states(layout, pool, req, group, processed)
                    continue
                block = table[below]
                if block is not None:
                    pool.free_one(block, group)
                    table[below] = None
                req.retired[group] = below + 1

    def _hash_block(self, req: BlockRequest, index: int) -> None:
        """``cache_blocks`` when block ``index`` of every group is the one that filled: hashed where the
        group's mask reaches it, told skipped where it does not. Every group has one block size (the callers'
        test), so one key names block ``index`` in all of them: the groups skipping it are told it in one
        ``BlocksSkipped``, as ``tell_skipped`` groups equal keys."""
        layout, pool = self.layout, self.pool
        boundaries, retention = (req.replay_boundary, req.junction), self.knobs.retention_interval
        B, need = layout.block_size, layout.swa_need
        # the mask at one index: the scalar rule (``reachable``, which ``reachable_indices`` is held to)
        reached = {
            kind: kind == FULL or reachable(kind, index, retention, B, need, boundaries, B)
            for kind in layout.kinds
        }
        at, num_keys = (index + 1) * layout.key_stride[FULL] - 1, index + 1
        if list(reached.values()).count(True) == 1:  # FULL's alone: unkeyed past the cap (``lazy_keys.py``)
            num_keys = min(num_keys, key_cap(pool, req.private_from, layout.hash_block))
        keys = self.keys.chain(req.tokens, num_keys, req.chain).keys
        key = keys[at] if at < len(keys) else None  # None: a private block, kept out unkeyed
        told: list[int] = []
        private = index >= req.private_from // B  # only this request holds it (``private.py``): not told
        for group, (kind, table) in enumerate(zip(layout.group_kinds, req.tables, strict=True)):
            block = table[index]
            if block is None:
                continue
            if reached[kind]:
                if key is None and keep_out(pool, req, group, [block], [at]):
                    continue
                key = self.keys.chain(req.tokens, index + 1, req.chain).keys[at] if key is None else key
                pool.cache_in(block, key, group)
                if private:
                    pool.private[block] = 1
                if kind == MAMBA:
                    self._mamba_keys_this_step.add((key, group))
            elif kind != FULL:
                told.append(group)
        req.num_cached[:] = [index + 1] * len(req.num_cached)
        if told and self._on_skip and not private:
            emit(self._on_skip, BlocksSkipped(tuple(told), [key]))
