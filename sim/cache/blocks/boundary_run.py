"""A steady decode run's boundary steps taken in one loop, what they share worked out once
(``take_boundary_run``; ``BoundaryDecodes``' loop of ``take_boundary_step`` is the reference, switch
``boundary_runs``).

The run's busy steps are known before it starts (their ends are residues mod B). Its shape is checked once:
the first allocating step finds every table at its length and the first hashing step every group hashed to
the block before its own (each later step then finds them so: it only appends and hashes the next block), and
the free queue holds a block per group for every allocation of the run (frees only add to it). A run that
fails a check goes through the reference, which also stops where a step fails. The steps' frees are
``boundary_frees.py``'s (the window's of a whole run at its end where they go to the tail), their hashes
``boundary_hashes.py``'s (the FULL groups' at the run's end); allocations and events are made in their steps,
in the reference's order.
"""

from __future__ import annotations

from sim.cache.blocks.boundary import BoundaryDecodes
from sim.cache.blocks.boundary_frees import RunFrees
from sim.cache.blocks.boundary_hashes import RunHashes
from sim.cache.blocks.request import BlockRequest
from sim.models import MAMBA

# Off: each manager takes a run's boundary steps one ``take_boundary_step`` at a time (the reference; a manager's
# ``boundary_runs`` starts as this; tests/test_vllm_boundary_run_property.py holds the two equal)
BY_RUNS = True


class BoundaryRuns(BoundaryDecodes):
    """``BoundaryDecodes`` with a run's boundary steps taken in one loop (views <- boundary decodes <- boundary
    runs <- plain decodes <- manager)."""

    boundary_runs: bool  # take_boundary_run's one loop (a test turns it off: step by step, the reference)

    def take_boundary_run(self, req: BlockRequest, iteration: int, num_steps: int) -> int:
        lag = self.batches_in_flight
        if (
            not self.boundary_runs
            or not self.takes_steady_steps()
            or not req.decodes_steadily(iteration, lag)
        ):
            return super().take_boundary_run(req, iteration, num_steps)
        ends = self.busy_step_ends(req.kv_len, req.kv_len + num_steps, lag)
        if not self._run_fits(req, ends, lag):
            return super().take_boundary_run(req, iteration, num_steps)
        self._take_ends(req, ends, lag)
        req.take_steady_decodes(iteration + num_steps - 1, num_steps)
        return num_steps

    def _run_fits(self, req: BlockRequest, ends: list[int], lag: int) -> bool:
        """Every step of the run is of the steady shape (see the module's docstring)."""
        B, tables = self.layout.block_size, req.tables
        allocating = [e for e in ends if (e - 1) % B == 0]
        if allocating:
            if len(tables) * len(allocating) > self.pool.num_free:
                return False
            if list(map(len, tables)).count((allocating[0] - 1) // B) != len(tables):
                return False
        hashing = [e for e in ends if (e - lag + 1) % B == 0]
        return not hashing or req.num_cached.count((hashing[0] - lag + 1) // B - 1) == len(req.num_cached)

    def _take_ends(self, req: BlockRequest, ends: list[int], lag: int) -> None:
        """The steps ending at ``ends`` (each of the steady shape), in ``take_boundary_step``'s order."""
        B, pool, tables = self.layout.block_size, self.pool, req.tables
        window_at = (lag + self.window - 1) % B if self.has_swa else -1  # the residue where the window moves
        state_at = (lag + 1) % B if self.has_mamba else -1  # and where the state does
        hashes = RunHashes(self, req, [(e - lag + 1) // B - 1 for e in ends if (e - lag + 1) % B == 0])
        tops = [(e - lag - self.window + 1) // B - 1 for e in ends if e % B == window_at]
        frees = RunFrees(
            self, req, tops if window_at != state_at else [], sum((e - 1) % B == 0 for e in ends)
        )
        frees.states_unhashed = not hashes.reached.get(MAMBA)
        for end in ends:
            processed = end - lag
            window_moves = end % B == window_at
            state_moves = end % B == state_at and processed > 1
            if window_moves and state_moves:
                self._release(req, processed, True, True)
            elif window_moves:
                frees.window(processed)
            elif state_moves:
                frees.states(processed)
            if (end - 1) % B == 0:
                for table, block in zip(tables, pool.get_block_per_group(), strict=True):
                    table.append(block)
            if (end - lag + 1) % B == 0:
                hashes.hash_block((end - lag + 1) // B - 1)
        frees.finish()
        hashes.finish()
