"""A request prefilling alone in chunks of one whole page, each checkpointed at its end and handed to the tree
at once (vLLM+'s state at every 32-token block): the chunks taken in one loop.

``run_alone`` takes a chunk as ``settle``, ``begin_pass``, ``next_chunk_len``, ``prepare_prefill`` and
``complete_prefill``: at page 32 a 13.7k-token prompt is 430 chunks, and those calls (the budget's chunk, the
step's plan and its ``ChunkPlan``, the reservation asked when no pool is short) were a sixth of a
``marconi-vllm`` replay. Where the rules say a chunk is nothing but its page, its checkpoint and its commit
(``EngineRules.takes_page_chunks``), ``take_page_chunks`` does what those calls change, in their order: the
reservation (the rules' own, asked only when a pool lacks the chunk's page or state), the allocations, the
checkpoint recorded, and the rules' ``after_prefill_chunk`` (the commit). The per-chunk calls stay the
reference (tests/test_page_chunks_property.py).
"""

from __future__ import annotations

from typing import cast

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.events import CheckpointSaved, emit
from sim.cache.plain_decodes import PlainDecodes
from sim.cache.pools import Pool
from sim.cache.request import RequestCache
from sim.cache.results import ChunkPlan, Refusal, new_chunk_plan


class PageChunks(PlainDecodes):
    """A base of ``CacheManager``: uses its ``requests``, ``rules``, ``page_size``, ``pools``, ``has_swa`` and
    the ``CheckpointSaved`` channel."""

    # a chunk's reservation may hand over the slots of the one leaf it evicted, which the chunk's allocations
    # would take straight back from the pools (``marconi_vllm_chunks.reserve_page``): asked only here
    takes_handed_slots: bool = False
    handed_slots: tuple[list[int], list[int | None], int] | None = None
    # False: ``prepare_prefill`` plans every chunk through the general calls (the reference ``plan_page_chunk``
    # is held to)
    plans_page_chunks: bool = True

    def take_page_chunks(self, request_id: str, budget: int) -> int | Refusal:
        """Prefill chunks of one page from the request's ``kv_len`` on, each as ``run_alone`` takes it under
        ``budget``, while each is one (``is_page_chunk``); returns how many, or the refusal of the first the
        pools cannot hold (after its evictions, as ``prepare_prefill`` returns it)."""
        rules, page, req = self.rules, self.page_size, self.requests[request_id]
        if budget < page or not rules.takes_page_chunks(self):
            return 0
        run = rules.take_page_run(self, req)  # the rules' own loop (``marconi-vllm``)
        if run is not None:
            return run
        done = 0
        while is_page_chunk(req, page):
            end = req.kv_len + page
            slot = self._page_slots(req)
            if isinstance(slot, Refusal):
                return slot
            self._pass_open = False  # the chunk completed (``complete_prefill``)
            req.kv_len = end
            req.earlier_checkpoint = None  # the chunk before handed its checkpoint to the tree
            req.checkpoint = (end, slot)
            if self._checkpoint_saved:
                emit(self._checkpoint_saved, CheckpointSaved(request_id, end, slot))
            rules.after_prefill_chunk(self, req, end >= req.prompt_len)
            done += 1
        return done

    def plan_page_chunk(self, req: RequestCache, chunk_len: int) -> ChunkPlan | Refusal | None:
        """``prepare_prefill``'s plan of a chunk of one whole page (``is_page_chunk``) where the rules take page
        chunks, as ``_plan`` makes it: the reservation asked only when a pool lacks the page, its SWA page or
        the state (the contract of ``takes_page_chunks``: ``before_prefill_chunk`` and ``evict_ahead`` do
        nothing, ``prefill_checkpoint`` is the chunk's end), the slots of the one leaf it evicted handed over
        as ``take_page_chunks`` takes them, the checkpoint planned at the end. None elsewhere: the general
        calls (and where ``plans_page_chunks`` is off: the reference, tests/test_page_plans_property.py)."""
        page = self.page_size
        if chunk_len != page or not self.plans_page_chunks or not is_page_chunk(req, page):
            return None
        if self.policy.fault == "early-checkpoint" or not self.rules.takes_page_chunks(self):
            return None
        slot = self._page_slots(req)
        if isinstance(slot, Refusal):
            return slot
        start = req.kv_len
        planned = ((start + page, slot),)
        req.planned = planned
        return new_chunk_plan(req.request_id, start, start + page, req.state, planned)

    def _page_slots(self, req: RequestCache) -> int | Refusal:
        """A page chunk's page, SWA page (or None) and state slot: the rules' reservation where a pool lacks
        one (the slots of the one leaf it evicted may be handed over), the page lists given to ``req`` (it
        holds none of its own between page chunks); the state slot, or the reservation's refusal."""
        full_pool, swa_pool, state_pool = self.pools[FULL], self.pools[SWA], self.pools[MAMBA]
        has_swa = self.has_swa
        num_swa = 1 if has_swa else 0
        if full_pool.num_free < 1 or swa_pool.num_free < num_swa or state_pool.num_free < 1:
            self.takes_handed_slots = True
            refusal = self.rules.reserve(self, 1, num_swa, 1)
            self.takes_handed_slots = False
            if refusal is not None:
                return refusal
        return take_page_slots(self, req, full_pool, swa_pool, state_pool, has_swa)


def is_page_chunk(req: RequestCache, page: int) -> bool:
    """The request's next chunk (under a budget of at least a page) is one whole page: its KV ends on a page
    and all of it is the tree's, and nothing of the step before is pending (pages, checkpoint, commit)."""
    kv_len = req.kv_len
    return (
        kv_len % page == 0
        and kv_len + page <= req.prompt_len
        and kv_len == req.prefix_len
        and not req.own_full
        and req.checkpoint is None
        and not req.planned
        and not req.spare_states
        and not req.commit_pending
    )


def take_page_slots(
    chunks: PageChunks, req: RequestCache, full_pool: Pool, swa_pool: Pool, state_pool: Pool, has_swa: bool
) -> int:
    """A page chunk's slots once no pool is short: the ones the reservation's one evicted leaf handed over,
    else a page, an SWA page (or None) and a state slot from the pools; the pages given to ``req``, the state
    slot returned. Shared by ``_page_slots`` and ``marconi_vllm_steady.plan_steady`` (the pools passed in:
    both hold them already)."""
    handed = chunks.handed_slots
    if handed is not None:  # the allocations below, as the pools would answer them
        chunks.handed_slots = None
        req.own_full, req.own_swa, slot = handed
        return slot
    req.own_full = full_pool.alloc(1)
    req.own_swa = cast("list[int | None]", swa_pool.alloc(1)) if has_swa else [None]
    return state_pool.alloc_one()
