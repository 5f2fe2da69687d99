"""A step's plan: the pages and the checkpoint slot a prefill chunk or decode step needs, reserved (evicting
as the engine does) before it runs, and the checkpoint it took recorded after it ran."""

from __future__ import annotations

from sim.cache import repeats
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.events import CheckpointSaved, emit
from sim.cache.manager_views import ManagerViews
from sim.cache.request import RequestCache
from sim.cache.results import ChunkPlan, Refusal, new_chunk_plan


class StepPlans(ManagerViews):
    """A base of ``CacheManager``: uses its ``rules``, ``policy``, ``pools`` and ``has_swa``."""

    def _plan(self, req: RequestCache, num_tokens: int, checkpoint: int | None) -> ChunkPlan | Refusal:
        num_pages = req.pages_needed(req.kv_len + num_tokens)
        if not num_pages and not checkpoint:  # nothing to allocate (most decode steps)
            req.planned = ()
            return new_chunk_plan(req.request_id, req.kv_len, req.kv_len + num_tokens, req.state)
        new_state = 1 if checkpoint and not req.spare_states else 0
        refusal = self.rules.reserve(self, num_pages, num_pages if self.has_swa else 0, new_state)
        if refusal is not None:
            return refusal
        self.add_new_pages(req, num_pages)
        planned: tuple[tuple[int, int], ...] = ()
        if checkpoint:
            slot = self.pools[MAMBA].alloc_one() if new_state else req.spare_states.pop()
            planned = ((checkpoint, slot),)
        req.planned = planned
        if planned and num_tokens > 1 and self.policy.fault == "early-checkpoint":
            planned = ((planned[0][0] - 1, planned[0][1]),)  # the tree still records the checkpoint
        return new_chunk_plan(req.request_id, req.kv_len, req.kv_len + num_tokens, req.state, planned)

    def prepare_page_decode(self, req: RequestCache, num_pages: int) -> None:
        """``prepare_decode`` of a step that only starts a page (no checkpoint, no out-of-window SWA free: the
        rules' ``plain_decode_steps`` is positive) where every KV pool keeps a page and the rules' slack past
        it (a batch run's event step: ``event_step_fits``). There ``decode_refusal`` finds free tokens,
        ``free_out_of_window`` no target, ``evict_ahead(0)`` its slack free and ``reserve`` nothing short (the
        SGLang loop's rules, ``SGLangRules`` and ``MarconiRules``: docs/results/presets-speed.md, Round 18),
        so what is left is the page's allocation. ``num_pages``: ``req.pages_needed(req.kv_len + 1)``."""
        self.add_new_pages(req, num_pages)
        req.planned = ()

    def add_new_pages(self, req: RequestCache, num_pages: int) -> None:
        """Allocate ``num_pages`` pages from each KV pool (FULL, then SWA) to ``req``. Where both are anonymous
        (``repeats.SHARED_RUNS``), they are counted out and the request's lists extended from shared runs: the
        same counts in the same order, the same lists, without a list of ids made and dropped per pool."""
        full_pool, swa_pool = self.pools[FULL], self.pools[SWA] if self.has_swa else None
        if repeats.SHARED_RUNS and full_pool.anonymous and (swa_pool is None or swa_pool.anonymous):
            full_pool.count_out(num_pages)
            if swa_pool is not None:
                swa_pool.count_out(num_pages)
            req.add_anonymous_pages(num_pages, swa_pool is not None, not self.tree.owns_page_lists)
            return
        req.add_own_pages(
            full_pool.alloc(num_pages),
            swa_pool.alloc(num_pages) if swa_pool is not None else [None] * num_pages,
        )

    def complete_decodes(self, reqs: list[RequestCache]) -> None:
        """``complete_decode`` of each of ``reqs`` (the manager's own records), a step's in one loop: a request
        with no checkpoint planned has nothing to take."""
        self._pass_open = False
        for req in reqs:
            self._complete_step(req)

    def _complete_step(self, req: RequestCache) -> None:
        """A decode step done: one token longer, and the checkpoint it planned (if any) taken."""
        req.kv_len += 1
        req.decode_steps += 1
        if req.planned:
            self.take_planned_checkpoint(req)

    def take_planned_checkpoint(self, req: RequestCache) -> None:
        """The checkpoints the request's decode step planned taken (``req.planned``), each superseding the one
        before, which goes back; a freeing stretch takes them at their steps too (``swa_free_runs``)."""
        for position, state_id in req.planned:
            if req.checkpoint is not None:  # superseded before it reached the tree
                self.give_back_slot(req, req.checkpoint[1])
            req.earlier_checkpoint = req.checkpoint[0] if req.checkpoint is not None else None
            req.checkpoint = (position, state_id)
            if self._checkpoint_saved:
                emit(self._checkpoint_saved, CheckpointSaved(req.request_id, position, state_id))
        req.planned = ()

    def give_back_slot(self, req: RequestCache, state_id: int) -> None:
        """A checkpoint slot the request no longer needs: back to its ping-pong pair, or to the pool."""
        if self.rules.admission_states > 1 and len(req.spare_states) < self.rules.admission_states - 1:
            req.spare_states.append(state_id)
        else:
            self.pools[MAMBA].free([state_id])
