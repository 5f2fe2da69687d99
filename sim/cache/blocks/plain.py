"""Runs of decode steps that only lengthen a request, taken without the bookkeeping (the fast path the
replay loop and the timed engine use, as for the radix manager: ``sim/cache/plain_decodes.py``).

A decode step ending at ``e`` does something only when ``e`` fills a block (it is hashed), ``e - 1`` starts
one (a block is allocated), or the processed tokens ``p = e - lag`` move the window's or the Mamba state's
first live block (``p - W + 1`` or ``p - 1`` a multiple of B). Between those, ``allocate_slots`` changes
nothing but lengths. The first step after a prefill or an idle iteration is always taken step by step, so
that ``p`` is known to advance one token a step (``lag``: the knobs' ``batches_in_flight``, 2 under async
scheduling, 1 without).
"""

from __future__ import annotations

from sim.cache import decode_runs
from sim.cache.blocks.boundary_run import BoundaryRuns
from sim.cache.blocks.request import BlockRequest


class PlainBlockDecodes(BoundaryRuns):
    """The base of ``BlockCacheManager`` (views <- boundary decodes <- boundary runs <- plain decodes <- manager: one line of
    classes, as the compiled core takes single inheritance only): uses its ``requests``, ``layout``,
    ``window``, ``has_swa``, ``has_mamba``, ``batches_in_flight``, ``prepare_decode`` and ``complete_decode``."""

    requests: dict[str, BlockRequest]  # ``window`` and ``batches_in_flight``: declared by ``BoundaryDecodes``

    def advance_decode(self, request_id: str, num_steps: int, iteration: int) -> int:
        """Up to ``num_steps`` decode steps from ``iteration`` on, exactly as step by step: steady runs in one
        loop (``BoundaryRuns``), the other steps through ``decode_runs``. Fewer where a step is refused."""
        req, done = self.requests[request_id], 0
        while done < num_steps:
            taken = self.take_boundary_run(req, iteration + done, num_steps - done)
            if not taken and not decode_runs.advance_decode(self, request_id, 1, iteration + done):
                return done
            done += taken or 1
        return num_steps

    def take_page_chunks(self, request_id: str, budget: int) -> int:
        """vLLM prefills a request alone chunk by chunk (``run_alone``): no chunks taken in one loop."""
        return 0

    def take_plain_decodes(self, req: BlockRequest, num_steps: int) -> None:
        req.take_steady_decodes(req.history[-1][0] + num_steps, num_steps)

    def solo_decode_steps(self, req: BlockRequest, iteration: int) -> int:
        """A request decoding alone takes the same runs (their steps allocate nothing)."""
        return self.plain_decode_steps(req, iteration)

    def take_solo_decodes(self, req: BlockRequest, num_steps: int) -> None:
        self.take_plain_decodes(req, num_steps)

    def plain_decode_steps(self, req: BlockRequest, iteration: int) -> int:
        """How many decode steps from ``iteration`` on change nothing but lengths (0: take the next one)."""
        lag = self.batches_in_flight
        if not req.decodes_steadily(iteration, lag):
            return 0
        # every group's block size is a multiple of the hash block: counting in it stops no later
        B, first = self.layout.hash_block, req.kv_len + 1
        # the tokens hashed reach e - lag + 1 (the processed ones and the next; the step's settle reaches
        # e - 1): a block fills there; e - 1 starts one; the steps to the next busy residue, fewest first
        fewest = min((lag - 1 - first) % B, (1 - first) % B)
        if self.has_swa:
            fewest = min(fewest, (lag + self.window - 1 - first) % B)
        if self.has_mamba:
            fewest = min(fewest, (lag + 1 - first) % B)
        return fewest

    def stalled_chunk_steps(self, request_id: str, budget: int, max_steps: int) -> int:
        """vLLM's blocks have no model of a stalled chunk across decode steps (its own loop never asks):
        none are known to stay stalled, so a loop that asks takes its steps one by one."""
        return 0
