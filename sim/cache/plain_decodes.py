"""Runs of decode steps that only lengthen a request: counted and taken without the bookkeeping.

A decode step is *plain* when it needs no page, takes no checkpoint and fires no SWA free. Replay mode
and the timed engine's fast path take such runs in one go; the tests hold them to the step-by-step
result.
"""
from __future__ import annotations

from sim.cache.request import RequestCache
from sim.cache.results import Refusal


class PlainDecodes:
    """Mixed into ``CacheManager``: needs its ``requests``, ``policy``, ``page_size``, ``window``,
    ``has_swa``, ``has_mamba``, ``prepare_decode`` and ``complete_decode``."""

    def advance_decode(self, request_id: str, num_steps: int, iteration: int) -> int:
        """Run up to ``num_steps`` decode steps (one per engine iteration from ``iteration``) exactly as
        ``prepare_decode`` + ``complete_decode`` would; steps where nothing but the length changes (no
        page, checkpoint or SWA trigger) skip the bookkeeping. Returns the steps done: fewer when the
        pools refuse one (that step is not taken)."""
        req = self.requests[request_id]
        done = 0
        while done < num_steps:
            plain = min(self.plain_decode_steps(req, iteration + done), num_steps - done)
            if plain:
                self.take_plain_decodes(req, plain)
                done += plain
                continue
            if isinstance(self.prepare_decode(request_id, iteration + done), Refusal):
                return done
            self.complete_decode(request_id)
            done += 1
        return num_steps

    def take_plain_decodes(self, req: RequestCache, num_steps: int) -> None:
        """What ``num_steps`` plain decode steps record: only the lengths move."""
        req.kv_len += num_steps
        req.decode_steps += num_steps

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        """How many decode steps from ``iteration`` on are plain (no page to allocate, no checkpoint,
        no SWA free fires), or fewer."""
        page, policy = self.page_size, self.policy
        steps = (req.prefix_len // page + len(req.own_full)) * page - req.kv_len
        if self.has_mamba:
            steps = min(steps, -(req.kv_len + 1) % policy.track_interval)
        if self.has_swa:
            if policy.swa_free_trigger == "iterations":
                steps = min(steps, -(iteration + policy.iteration_phase) % policy.swa_eviction_interval)
            else:
                first = 0 if req.decode_steps >= 1 else 1
                fires_at = req.swa_frontier + policy.swa_eviction_interval + self.window - req.kv_len
                steps = min(steps, max(first, fires_at))
        return max(steps, 0)
