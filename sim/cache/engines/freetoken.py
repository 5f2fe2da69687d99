"""FreeToken 0.2.1 (``scheduler/cache.py: CacheManager``, ``kvcache/swa_radix_cache.py``).

Prefill: out-of-window SWA freed before every chunk (``free_swa_out_of_window_extend``) and one commit after
the last chunk. Decode: ``maybe_free_swa_out_of_window`` on its trigger. Finish: the whole sequence inserted,
then (before issue #200's fix) the prompt head's SWA trimmed to its last ``W + gap`` tokens and the prompt
path re-stamped.
"""
from __future__ import annotations

from sim.cache.align import floor_to
from sim.cache.engines.base import EngineRules
from sim.cache.engines.swa_trigger import SwaTrigger
from sim.cache.matching import refresh_after_match
from sim.cache.policy import Resolved
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree
from sim.cache.trim import trim_head


class FreeTokenRules(EngineRules):
    name = "freetoken"

    @classmethod
    def check(cls, resolved: Resolved) -> None:
        page = resolved.page_size
        if resolved.policy.chunked_prefill_size < page:
            raise ValueError(f"chunked_prefill_size {resolved.policy.chunked_prefill_size} is below page_size "
                             f"{page}: FreeToken aligns a non-final chunk's end down to a page, so no chunk "
                             f"could ever be scheduled")

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        self.trigger = SwaTrigger(self.policy.swa_free_trigger, self.policy.swa_eviction_interval, self.window)

    def refresh_after_match(self, tree: RadixTree, path: list, node) -> None:
        refresh_after_match(tree, path, node, self.window, "path")

    def frontier(self, req: RequestCache, pre_len: int) -> int:
        """Keep the window and one page of margin below ``pre_len``."""
        threshold = pre_len - self.window - self.page_size
        return floor_to(max(req.swa_frontier, req.prefix_len, threshold), self.page_size)

    def before_prefill_chunk(self, manager, req: RequestCache) -> None:
        if self.resolved.has_swa:
            manager.free_swa_below(req, self.frontier(req, req.kv_len))

    def after_prefill_chunk(self, manager, req: RequestCache, is_last: bool) -> None:
        if not is_last:
            return
        end = self.insert_len(req)
        if end is not None and end > req.prefix_len:
            manager.insert(req, end)

    def decode_free_target(self, req: RequestCache, iteration: int) -> int | None:
        if not self.resolved.has_swa or not self.trigger.fires(req, iteration):
            return None
        return self.frontier(req, req.kv_len)

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        steps = super().plain_decode_steps(req, iteration)
        if self.resolved.has_swa:
            steps = min(steps, self.trigger.silent_steps(req, iteration))
        return steps

    def after_release(self, manager, req: RequestCache) -> None:
        gap = self.policy.finish_trim_gap
        if gap is not None and self.resolved.has_swa:
            trim_head(manager.tree, req.tokens, req.prompt_len, self.window, gap)
