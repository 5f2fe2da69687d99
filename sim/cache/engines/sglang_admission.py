"""SGLang 0.5.23's scheduler gates, wired to the cache manager: ``PrefillAdder.add_one_req`` (a new request),
``PrefillAdder.add_chunked_req`` (a chunked prefill's next chunk) and ``ScheduleBatch.check_decode_mem``.

The arithmetic is ``sglang_budget``; this mixin reads the counts it needs from the manager's pools and tree:
free pages, the tree's unlocked (evictable) FULL and live SWA pages, and what running requests may still
decode. Counts are in tokens, as SGLang keeps them. A count is only summed over the tree when the free pages
alone do not already settle the answer.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import sim.cache.engines.sglang_budget as budget
from sim.cache.components import FULL, SWA
from sim.cache.engines.base import EngineRules
from sim.cache.engines.sglang_budget import PassBudget, new_pass_budget
from sim.cache.engines.sglang_locked import locked_pages_shared
from sim.cache.engines.sglang_pass import running_decode_offset_of
from sim.cache.ops import RadixOps
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.results import Refusal
from sim.compiled_core import mypyc_attr

MAX_PREFILL_TOKENS = 16384  # ServerArgs.max_prefill_tokens: a pass's prefill tokens (rem_input_tokens)
# True: ``_max_new`` keeps its last answer for the same request's next ask (alone, it asks twice at admission and at
# every chunk's charge); off: computed at every ask, the reference (tests/test_sglang_max_new_kept_property.py)
MAX_NEW_KEPT = True


@mypyc_attr(allow_interpreted_subclasses=True)
class SGLangAdmission(EngineRules):
    """SGLang's admission and chunk gates; ``SGLangRules`` adds the rest of the engine."""

    budget_before_states = True  # PrefillAdder runs before prepare_for_extend allocates the MAMBA slots
    # retract_decode aborts the last request of a batch that still does not fit; a lone chunked prefill the
    # budget never continues waits forever: neither is requeued
    requeues_lone_request = False

    def __init__(self, resolved: Resolved):
        super().__init__(resolved)
        # alloc_paged_token_slots_extend / _decode evict for a page per request more than they allocate; the
        # unpaged allocator (page 1) evicts for exactly what it allocates
        self.alloc_slack_pages = 1 if self.page_size > 1 else 0
        self.pass_budget = new_pass_budget(0, 0, 0, self.policy.chunked_prefill_size, MAX_PREFILL_TOKENS)
        # the pass's requests with a step launched, not yet processed
        self.in_flight: AbstractSet[str] = frozenset()
        self.full_pool_tokens = 0  # set by each pass (the FULL pool's size, for the generation clip)
        self.swa_budget = resolved.has_swa  # an SWA pool of its own, budgeted apart (SWAPrefillBudget)
        # decode rows of a mixed batch (mix_with_running): set by SGLang's scheduler around them for any rules it
        # drives (Marconi's too, whose rules read it not); declared here so a compiled rules class has the field
        self.decode_untracked = False
        self._max_new_req: RequestCache | None = None  # ``_max_new``'s last answer's request, pool and answer
        self._max_new_pool_tokens, self._max_new_len = 0, 0

    # ---- the pass (PrefillAdder.__init__ and _update_prefill_budget) --------------------------------------
    def begin_pass(self, manager: RadixOps, in_flight: AbstractSet[str] = frozenset()) -> None:
        """A new ``PrefillAdder``: the running requests' remaining decode reserved (a request with a step in
        flight has not produced that step's output yet, so it owes one more), the pass's budgets full."""
        self.full_pool_tokens = manager.pools[FULL].size * self.page_size
        self.in_flight = in_flight
        self.pass_budget = self.pass_ahead(manager, in_flight, 0)

    def pass_ahead(self, manager: RadixOps, in_flight: AbstractSet[str], steps_ahead: int) -> PassBudget:
        """A new pass's accounts ``steps_ahead`` plain decode steps from now: each step takes a token off
        what every running request still owes."""
        requests, pool_tokens = manager.requests.values(), self.full_pool_tokens
        offset = running_decode_offset_of(requests, in_flight, steps_ahead, pool_tokens, self.page_size)
        return new_pass_budget(offset, 0, 0, self.policy.chunked_prefill_size, MAX_PREFILL_TOKENS)

    def reserve_mixed_decode(self, num_running: int) -> None:
        """``PrefillAdder(num_mixed_decode_tokens=running_bs)`` under ``--enable-mixed-chunk``: a token per running
        request, charged to both FULL offsets and both token budgets (not to SWA's: ``SWAPrefillBudget``)."""
        b = self.pass_budget
        self.pass_budget = new_pass_budget(
            b.total + num_running,
            b.current + num_running,
            b.swa,
            b.chunk - num_running,
            b.input - num_running,
        )

    def budget_state(self, manager: RadixOps) -> str:
        """``PrefillAdder.budget_state``: ``no_token`` (no memory left this pass), ``other`` (no prefill or
        chunk tokens left) or ``continue``."""
        b = self.pass_budget
        free = self.free_tokens(manager, swa=False)
        room = free > b.total and free > b.current  # the tree's count (never negative) cannot change that
        if not room:
            evictable = self.evictable_tokens(manager, None, swa=False)
            room = free + evictable - b.total > 0 and free + evictable - b.current > 0
        if room and self.swa_budget:
            remaining = self._remaining_swa(manager, None, 0)
            room = remaining is not None and remaining > 0
        if not room:
            return "no_token"
        return "other" if b.input <= 0 or b.chunk <= 0 else "continue"

    def charge(self, req: RequestCache, chunk_len: int) -> None:
        """``_update_prefill_budget`` for a request added with ``chunk_len`` tokens (its decode too when the
        chunk ends its prompt). The decode charged is the request's whole ``max_new_tokens``
        (``_select_prefill_admission``, ``add_chunked_req``): a retracted request's outputs, though prefilled
        again, are charged again, where ``add_one_req``'s check counted only the outputs still to come."""
        page, b = self.page_size, self.pass_budget
        paged = budget.ceil_page(chunk_len, page)
        whole = self._max_new(req) + req.num_outputs_known
        max_new = budget.clipped_new_tokens(whole) if req.kv_len + chunk_len >= req.prompt_len else 0
        swa = budget.estimate_swa_kv_tokens(paged, max_new, self.window, page, b.chunk)
        self.pass_budget = new_pass_budget(
            b.total + paged + page + max_new,
            b.current + paged + page,
            b.swa + (swa if self.swa_budget else 0),
            b.chunk - paged,
            b.input - paged,
        )

    # ---- admission and chunks ------------------------------------------------------------------------
    def admission_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        """``add_one_req`` with the matched prefix locked (``_lock_node``): SGLang's ``check_prefill``."""
        page, extend_len = self.page_size, req.prompt_len - req.kv_len
        max_new = budget.clipped_new_tokens(self._max_new(req))
        total = budget.new_request_total_tokens(extend_len, self._max_new(req), page)
        chunk = self.pass_budget.chunk
        needed_swa = budget.estimate_swa_kv_tokens(
            budget.ceil_page(extend_len, page), max_new, self.window, page, chunk
        )
        remaining_total = self._remaining_total(manager, req, total)
        remaining_swa = self._remaining_swa(manager, req, needed_swa)
        verdict = budget.check_prefill(
            extend_len,
            max_new,
            total,
            remaining_total,
            remaining_swa,
            manager.pools[SWA].size * page,
            self.window,
            page,
            chunk,
        )
        if verdict.admit:
            req.first_chunk_cap = verdict.chunk_cap
            return None
        self._copy_on_write_eviction(manager, req)
        if total >= remaining_total:
            return budget.no_token(FULL.pool_name, total, remaining_total)
        assert remaining_swa is not None  # without SWA only the FULL budget refuses
        return budget.no_token(SWA.pool_name, needed_swa, remaining_swa)

    def align_chunk(self, req: RequestCache, chunk_len: int) -> int:
        """A first chunk's end is floored to a page (``_select_prefill_admission``); a continuation is cut
        anywhere (``add_chunked_req``: ``floor_chunked_tokens``' grid is 1 without DCP)."""
        return chunk_len if req.kv_len > req.cached_len else super().align_chunk(req, chunk_len)

    def chunk_len(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int:
        """The first chunk: cut to whole pages where its paged length passes the cap ``check_prefill`` set at
        admission (``_select_prefill_admission``). A later one: at most ``available_chunk_tokens``, cut
        anywhere (0: no chunk this pass). The chunk is charged to the pass."""
        if req.kv_len == req.cached_len:
            chunk_len = self.first_chunk_len(req, chunk_len)
        else:
            cap = self.continuation_cap(manager, req, chunk_len)
            if cap is None:
                return 0
            chunk_len = min(chunk_len, cap)
        if chunk_len > 0:
            self.charge(req, chunk_len)
        return chunk_len

    def continuation_cap(self, manager: RadixOps, req: RequestCache, chunk_len: int) -> int | None:
        """``available_chunk_tokens`` under the pass's accounts (None: no chunk this pass)."""
        remaining_swa = self._remaining_swa(manager, req, chunk_len + self.page_size)
        return budget.available_chunk_tokens(
            chunk_len, self._remaining_total(manager, req, chunk_len), remaining_swa, self.page_size
        )

    def decode_refusal(self, manager: RadixOps, req: RequestCache) -> Refusal | None:
        """``check_decode_mem`` before the step's out-of-window free: a step that starts a page needs one
        free FULL and SWA page after eviction (a lone request that cannot get it is aborted)."""
        if not budget.decode_tokens_needed(req.kv_len, self.page_size):
            return None
        if self.free_tokens(manager, swa=False) and (
            not self.swa_budget or self.free_tokens(manager, swa=True)
        ):
            return None  # nothing to evict: the usual case, asked at every page a decode starts
        refusal = self.reserve(manager, 1, 1 if self.resolved.has_swa else 0, 0)
        if refusal is None:
            return None
        return refusal._replace(
            reason=f"SGLang's check_decode_mem fails ({refusal}): Out of memory even after "
            f"retracting all other requests in the decode batch"
        )

    # ---- counts -------------------------------------------------------------------------------------
    def _max_new(self, req: RequestCache) -> int:
        """Its ``max_new_tokens`` as ``init_req_max_new_tokens`` clipped it: the outputs it generates, but 0
        where the pool left no room (it still generates its first token)."""
        pool = self.full_pool_tokens
        if not pool:
            return req.output_len
        if MAX_NEW_KEPT and req is self._max_new_req and pool == self._max_new_pool_tokens:
            return self._max_new_len  # a request's prompt and output never change
        max_new = budget.max_new_tokens_for_memory(req.prompt_len, req.output_len, pool, self.page_size)
        self._max_new_req, self._max_new_pool_tokens, self._max_new_len = req, pool, max_new
        return max_new

    def _remaining_total(self, manager: RadixOps, req: RequestCache | None, enough: int) -> int:
        """``remaining_total``: free + evictable FULL tokens, less what the pass reserved (the running
        requests' decode and each request added). The tree is only counted when the free pages are not
        already more than ``enough``."""
        free = self.free_tokens(manager, swa=False) - self.pass_budget.total
        if free > enough:
            return free
        return free + self.evictable_tokens(manager, req, swa=False)

    def _remaining_swa(self, manager: RadixOps, req: RequestCache | None, enough: int) -> int | None:
        """``remaining_swa``: free + evictable SWA tokens, less the pass's SWA reservations (None without
        SWA)."""
        if not self.swa_budget:
            return None
        free = self.free_tokens(manager, swa=True) - self.pass_budget.swa
        if free > enough:
            return free
        return free + self.evictable_tokens(manager, req, swa=True)

    def free_tokens(self, manager: RadixOps, swa: bool) -> int:
        """Free tokens of the FULL (or SWA) pool (``available_size``)."""
        return manager.pools[SWA if swa else FULL].num_free * self.page_size

    def evictable_tokens(self, manager: RadixOps, req: RequestCache | None, swa: bool) -> int:
        """``full_evictable_size`` (or ``swa_evictable_size``): the tree's pages no running request (nor
        ``req``) locks."""
        pages = manager.tree.num_swa_pages if swa else manager.tree.num_full_pages
        return (pages - locked_pages_shared(manager, req, swa)) * self.page_size

    def evict_for_pages(self, manager: RadixOps, num_pages: int) -> bool:
        """``evict_to_free_tokens``: each KV pool's shortfall evicted for on its own (FULL first; a pool that
        cannot free enough does not stop the other's eviction); True if both then fit."""
        full = self.reserve(manager, num_pages, 0, 0) is None
        return (not manager.has_swa or self.reserve(manager, 0, num_pages, 0) is None) and full

    def _copy_on_write_eviction(self, manager: RadixOps, req: RequestCache) -> None:
        """A MAMBA hit copies its state into a slot of the request's own when it is matched, before the
        budget (``MambaComponent.finalize_match_result_in_cache``): a refused request has still made room."""
        if self.resolved.has_mamba and req.match.tree_node.state is not None and req.cached_len:
            self.reserve(manager, 0, 0, 1)
