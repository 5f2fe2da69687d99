"""What FreeToken's two caches (``freetoken_swa``, ``freetoken_gdn``) share: the trigger and frontier of the
out-of-window SWA free, the overlap scheduler's late prompt commit, one timestamp per node, and eviction by
scans of the tree (``freetoken_scans``) with FreeToken's amounts (FULL: the pages short, at once; SWA and
states: in rounds until enough are free). The engine's entry, which picks a cache, is ``freetoken.py``.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from sim.align import ceil_div, floor_to
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.base import EngineRules
from sim.cache.engines.freetoken_knobs import FreeTokenKnobs
from sim.cache.engines.freetoken_scans import evict_states, evict_swa
from sim.cache.engines.freetoken_tree import FreeTokenClock, LeafHeap, evict_full
from sim.cache.engines.swa_trigger import SwaTrigger
from sim.cache.ops import RadixOps
from sim.cache.policy import own_knobs
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.results import Refusal, new_refusal
from sim.cache.tree import RadixTree
from sim.compiled_core import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)
class FreeTokenCommon(EngineRules):
    name = "freetoken"
    budget_before_states = True  # _try_allocate_one: the KV reservation first, then the GDN state slots
    owns_page_lists = True  # its trees are never forked: a split may cut a node's lists in place (page_cuts)

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        self.knobs = own_knobs(self.policy, FreeTokenKnobs)
        self.clock = FreeTokenClock()
        self.trigger = SwaTrigger(
            self.policy.swa_free_trigger, self.policy.swa_eviction_interval, self.window
        )
        # a pass's PrefillAdder: KV tokens promised (the running decode, then each request added) and SWA
        # tokens charged to the chunks added so far (allocated only after the pass)
        self.reserved_tokens = self.reserved_swa = 0

    def eviction(self):
        self.clock.leaves = LeafHeap()  # a fresh tree's: no entry of an earlier one
        return self.clock.leaves

    # ---- the SWA free (``maybe_free_swa_out_of_window``, ``free_swa_out_of_window_extend``) -----------
    def frontier(self, req: RequestCache, pre_len: int) -> int:
        """Keep the window and one page of margin below ``pre_len``."""
        threshold = pre_len - self.window - self.page_size
        return floor_to(max(req.swa_frontier, req.prefix_len, threshold), self.page_size)

    def decode_free_target(self, req: RequestCache, iteration: int) -> int | None:
        if not self.resolved.has_swa or not self.trigger.fires(req, iteration):
            return None
        return self.frontier(req, req.kv_len)

    def plain_decode_steps(self, req: RequestCache, iteration: int) -> int:
        if req.commit_pending:
            return 0
        return self.trigger.silent_steps(req, iteration) if self.resolved.has_swa else 1 << 62

    def decode_checkpoint(self, req: RequestCache) -> int | None:
        return None  # FreeToken takes no decode checkpoints (only at a tool-call anchor, not modelled)

    # ---- the prompt's commit -------------------------------------------------------------------------
    def after_prefill_chunk(self, manager: RadixOps, req: RequestCache, is_last: bool) -> None:
        if not is_last or req.output_len < 2:
            return  # intermediate chunks are never committed; a request done at its prompt commits at finish
        if self.knobs.overlap:
            req.commit_pending = True  # the first decode step is launched before this result is processed
        else:
            self.commit(manager, req)

    def settle(self, manager: RadixOps, req: RequestCache, in_flight: int) -> None:
        self.commit(manager, req, in_flight)

    def commit(self, manager: RadixOps, req: RequestCache, in_flight: int = 0) -> None:
        raise NotImplementedError

    def insert_state(
        self, manager: RadixOps, req: RequestCache, end: int, keep_duplicate: bool = False
    ) -> bool:
        """Insert ``[0, end)`` with the request's checkpoint at ``end`` (the GDN caches); True if the tree took
        the state."""
        raise NotImplementedError

    # ---- admission (``PrefillAdder``) ----------------------------------------------------------------
    def begin_pass(self, manager: RadixOps, in_flight: AbstractSet[str] = frozenset()) -> None:
        """``PrefillAdder(reserved_size=DecodeManager.inflight_tokens)``: what each decoding request may still
        write, plus a page less one token each."""
        page, reserved = self.page_size, 0
        for r in manager.requests.values():
            remain = r.prompt_len + r.output_len - r.kv_len - 1
            if r.kv_len >= r.prompt_len and remain > 0:
                reserved += remain + page - 1
        self.reserved_tokens, self.reserved_swa = reserved, 0

    def admission_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        """``_try_allocate_one``: the whole request's FULL pages plus what the pass reserved must fit in what
        is free or evictable once its match is locked."""
        need = self.reservation(req) + self.reserved_tokens
        free = manager.pools[FULL].num_free * self.page_size
        if free >= need:
            return None
        evictable = manager.tree.num_unlocked_tokens
        return new_refusal(FULL.pool_name, need, free + evictable) if free + evictable < need else None

    def reservation(self, req: RequestCache) -> int:
        """``_kv_reservation_size``: the pages the rest of the request (prompt and output) still needs."""
        page = self.page_size
        return (ceil_div(req.prompt_len + req.output_len, page) - ceil_div(req.kv_len, page)) * page

    def chunk_len(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int:
        """``_add_one_req``: the chunk the engine's caps leave, then its KV reservation for the pass."""
        capped = self.cap_chunk(manager, req, chunk_len)
        if capped > 0:
            self.reserved_tokens += self.reservation(req)
        return capped

    def cap_chunk(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int:
        return chunk_len

    # ---- room in the pools (``_allocate``, ``ensure_swa_slots``, ``ensure_mamba_slots``) ------------
    def reserve(self, manager: RadixOps, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        tree, pools, page = manager.tree, manager.pools, self.page_size
        if full_pages > pools[FULL].num_free:
            evict_full(tree, (full_pages - pools[FULL].num_free) * page, self.resolved.has_swa)
        for comp, needed, evict in (
            (SWA, swa_pages, evict_swa),
            (MAMBA, states, evict_states),
        ):
            while pools[comp].num_free < needed and evict(tree, needed - pools[comp].num_free):
                pass
        for comp, needed in (
            (FULL, full_pages),
            (SWA, swa_pages),
            (MAMBA, states),
        ):
            if pools[comp].num_free < needed:
                return new_refusal(pools[comp].name, needed, pools[comp].num_free)
        return None

    def rematch(self, tree: RadixTree, tokens, end: int, node) -> None:
        """``match_prefix(end)`` right after a commit whose path ends on ``node`` (the SWA rules climb from it)."""
        self.match_prefix(tree, tokens, end)

    def match_prefix(self, tree: RadixTree, tokens, length: int):
        """``match_prefix(ids[:length])``: the deepest acceptable node, stamped as a match stamps."""
        return super().match(tree, tokens, length + 1).node
