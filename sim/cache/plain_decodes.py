"""Runs of decode steps that only lengthen a request: counted and taken without the bookkeeping.

A decode step is *plain* when it needs no page, takes no checkpoint and fires no SWA free. Replay mode
and the timed engine's fast path take such runs in one go; the tests hold them to the step-by-step
result.
"""
from __future__ import annotations

from sim.cache.components import FULL, SWA
from sim.cache.request import RequestCache
from sim.cache.results import Refusal


class PlainDecodes:
    """Mixed into ``CacheManager``: needs its ``requests``, ``rules``, ``policy``, ``page_size``, ``pools``,
    ``has_swa``, ``prepare_decode`` and ``complete_decode``."""

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
        no SWA free fires, no eviction for the engine's slack), or fewer."""
        if not self._has_slack():
            return 0
        steps = (req.prefix_len // self.page_size + len(req.own_full)) * self.page_size - req.kv_len
        rule_steps = self.rules.plain_decode_steps(req, iteration + self.policy.iteration_phase)
        return max(min(steps, rule_steps), 0)

    def _has_slack(self) -> bool:
        """Whether each KV pool already has the engine's slack free (a decode step would evict nothing)."""
        slack = self.rules.alloc_slack_pages
        if not slack:
            return True
        return self.pools[FULL].num_free >= slack and (not self.has_swa or self.pools[SWA].num_free >= slack)
