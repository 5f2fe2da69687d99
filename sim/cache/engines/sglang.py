"""SGLang 0.5.23 (``UnifiedRadixCache`` and ``ScheduleBatch``), and its retain-floor variants.

Prefill: one checkpoint per extend (``_mamba_radix_cache_v2_req_prepare_for_extend``); after every chunk
``cache_unfinished_req`` frees out-of-window SWA and inserts up to that checkpoint. Decode: the out-of-window
free (``free_swa_out_of_window_slots``) when the trigger fires, with the retain floor where the policy has
one (PR #34729). Finish (``cache_finished_req``): insert up to the last checkpoint, free the rest.
"""
from __future__ import annotations

from sim.cache.align import ceil_to, floor_to
from sim.cache.engines.base import EngineRules
from sim.cache.engines.swa_trigger import SwaTrigger
from sim.cache.matching import refresh_after_match
from sim.cache.policy import Resolved
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree


class SGLangRules(EngineRules):
    name = "sglang"

    @classmethod
    def check(cls, resolved: Resolved) -> None:
        """The server-args checks of ``arg_groups/validation_hook.py`` and ``overrides.py``."""
        policy, page = resolved.policy, resolved.page_size
        if policy.chunked_prefill_size % page:
            raise ValueError(f"chunked_prefill_size must be divisible by page_size (SGLang refuses it), got "
                             f"{policy.chunked_prefill_size} and {page}")
        chunk = resolved.mamba_chunk
        if resolved.has_mamba and max(chunk, page) % min(chunk, page):
            raise ValueError(f"for SSM models, either the scan's chunk or page_size must be divisible by the "
                             f"other (SGLang refuses it), got mamba_chunk {chunk} and page_size {page}")

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        self.trigger = SwaTrigger(self.policy.swa_free_trigger, self.policy.swa_eviction_interval, self.window)

    def refresh_after_match(self, tree: RadixTree, path: list, node) -> None:
        refresh_after_match(tree, path, node, self.window, "window")

    def frontier(self, req: RequestCache, pre_len: int, retain_floor: int | None) -> int:
        """``free_swa_out_of_window_slots``: keep ``ceil_page(max(W, page))`` below ``pre_len`` (and the
        retain floor's window below the last checkpoint); never below what the request already freed or got
        from the tree."""
        page = self.page_size
        threshold = pre_len - ceil_to(max(self.window, page), page)
        if retain_floor is not None:
            threshold = min(threshold, retain_floor)
        return floor_to(max(req.swa_frontier, req.prefix_len, threshold), page)

    def retain_floor(self, req: RequestCache) -> int | None:
        mode, r = self.policy.retain_floor, self.resolved
        if mode is None or not (r.has_swa and r.has_mamba):
            return None
        deepest = req.checkpoint[0] if req.checkpoint is not None else None
        if mode == "tree" and deepest is None:
            deepest = next((n.end for n in reversed(req.last_node.path_from_root()) if n.state is not None), None)
        return None if deepest is None else deepest - self.window + r.window_slack

    def after_prefill_chunk(self, manager, req: RequestCache, is_last: bool) -> None:
        """``cache_unfinished_req``: free out-of-window SWA with ``pre_len = insert_len - 1``, then insert."""
        end = self.insert_len(req)
        if end is None or end <= req.prefix_len:
            return
        if self.resolved.has_swa and end - 1 - self.window >= req.swa_frontier + 1:
            manager.free_swa_below(req, self.frontier(req, end - 1, self.retain_floor(req)))
        manager.insert(req, end)

    def decode_free_target(self, req: RequestCache, iteration: int) -> int | None:
        if not self.resolved.has_swa or not self.trigger.fires(req, iteration):
            return None
        return self.frontier(req, req.kv_len, self.retain_floor(req))

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        steps = super().plain_decode_steps(req, iteration)
        if self.resolved.has_swa:
            steps = min(steps, self.trigger.silent_steps(req, iteration))
        return steps
