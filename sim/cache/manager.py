"""The cache manager: the request lifecycle the scheduler drives, the same for every engine.

admit -> (prepare_prefill -> complete_prefill)* -> (prepare_decode -> complete_decode)* -> finish.
``prepare_*`` moves the SWA frontier and reserves pages and states (evicting as needed) or returns a
``Refusal`` without allocating; ``complete_*`` records what the step computed and commits to the tree. Every
engine-specific decision is a question to ``self.rules`` (``sim/cache/engines/``); the manager owns the
tree, the pools (``self.topology``) and each running request's pages, and offers the rules its primitives:
``free_swa_below`` and ``insert``.
"""

from __future__ import annotations

from sim.cache import locks
from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.engines.base import EngineRules
from sim.cache.events import (
    Aborted,
    Admitted,
    CheckpointSaved,
    EventBus,
    Finished,
    FinishStarted,
    Inserted,
    Matched,
    SwaFreed,
    emit,
)
from sim.cache.insert import insert
from sim.cache.passes import SchedulingPasses
from sim.cache.policy import Policy
from sim.cache.request import RequestCache
from sim.cache.resolve import resolve
from sim.cache.results import AdmitResult, ChunkPlan, FinishResult, MatchResult, Refusal
from sim.cache.sizing import PoolSizes
from sim.cache.tree import RadixTree
from sim.cache.tuple_new import new_tuple
from sim.models import ModelSpec
from sim.tokens import TokenSeq


class CacheManager(SchedulingPasses):
    def __init__(
        self,
        model: ModelSpec,
        policy: Policy,
        sizes: PoolSizes,
        rules: type[EngineRules],
        events: EventBus | None = None,
    ):
        self.policy, self.model, self.sizes, self.rules_type = policy, model, sizes, rules
        self.events = events if events is not None else EventBus()
        self.resolved = resolve(policy, model)
        rules.check(self.resolved)
        self.rules = rules.build(self.resolved)
        self.page_size, self.window = self.resolved.page_size, self.resolved.window
        self.has_swa, self.has_mamba = self.resolved.has_swa, self.resolved.has_mamba
        self.topology = self.rules.topology(sizes, self.has_swa, self.has_mamba, self.events)
        self.pools = self.topology.pools
        full, swa, mamba = (self.pools[comp] for comp in Component)
        self.tree = RadixTree(self.page_size, full, swa, mamba, self.rules.eviction(), self.events)
        self.tree.on_split = self._follow_split
        self.tree.split_stamps_halves = self.rules.split_stamps_halves
        self.tree.owns_page_lists = getattr(self.rules, "owns_page_lists", False)  # FreeToken: never forked
        self.requests = {}
        self._matched, self._admitted = self.events.channel(Matched), self.events.channel(Admitted)
        self._inserted, self._swa_freed = self.events.channel(Inserted), self.events.channel(SwaFreed)
        self._checkpoint_saved = self.events.channel(CheckpointSaved)
        self._finishing, self._finished = self.events.channel(FinishStarted), self.events.channel(Finished)

    def empty_like(self, policy: Policy, anonymous_pages: bool = False) -> CacheManager:
        """An empty cache of the same model and pool sizes under ``policy`` (Marconi's tuner replays on one).
        ``anonymous_pages``: its FULL and SWA pools hand out one id for every page (``Pool.make_anonymous``):
        for a cache whose page ids nobody reads."""
        fresh = type(self)(self.model, policy, self.sizes, self.rules_type)
        if anonymous_pages:
            fresh.pools[FULL].make_anonymous()
            fresh.pools[SWA].make_anonymous()
        return fresh

    def discard(self) -> None:
        """Thrown away mid-run (a tuner's replay): unlink its tree (its cycles outlive the paused collector)."""
        self.tree.dismantle()

    def match(self, tokens: TokenSeq, prompt_len: int) -> MatchResult:
        """The reusable prefix of a prompt; the last prompt token is always recomputed."""
        match = self.rules.match(self.tree, tokens, prompt_len)
        if self._matched:
            emit(self._matched, Matched(tokens, prompt_len, match.cached_len, match.full_depth))
        return match

    def admit(
        self, request_id: str, tokens: TokenSeq, prompt_len: int, budget: int | None = None
    ) -> AdmitResult | Refusal:
        """``budget``: the first chunk's token budget, where the scheduler gives it (SGLang drops a request
        whose first chunk gets no page before taking its slots); the rules size the chunk after admission
        (``next_chunk_len``)."""
        if request_id in self.requests:
            raise ValueError(f"request {request_id!r} is already admitted")
        self._ensure_pass()
        match = self.match(tokens, prompt_len)
        held = self._lock(request_id, match.tree_node)
        cached = match.cached_len
        req = RequestCache(
            request_id, tokens, prompt_len, match, held, self.page_size, kv_len=cached, prefix_len=cached
        )
        num_states = self.rules.admission_states if self.has_mamba else 0
        refusal = self._admission_refusal(req, num_states, budget)
        if refusal is not None:
            locks.unlock(self.tree, held)
            return refusal
        copy_from = None
        if self.has_mamba:
            req.state = self.pools[MAMBA].alloc_one()
            req.spare_states = self.pools[MAMBA].alloc(num_states - 1)
            copy_from = self._resume_state(match)
        self.requests[request_id] = req
        self.rules.after_admit(self, req)
        if self._admitted:
            emit(self._admitted, Admitted(request_id, cached))
        return new_tuple(AdmitResult, (match, copy_from))  # every field: built natively (tuple_new.py)

    def next_chunk_len(self, request_id: str, budget: int) -> int:
        """The request's next prefill chunk under a token budget: the rest of its prompt, or a
        page-aligned part of it, as the engine sizes it (0: none this step)."""
        req = self.requests[request_id]
        self._ensure_pass()
        chunk = self.rules.budgeted_chunk(req, budget)  # a non-final chunk ends where the engine aligns it
        return self.rules.chunk_len(self, req, chunk) if chunk > 0 else 0

    def prepare_prefill(self, request_id: str, chunk_len: int, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        if chunk_len <= 0 or req.kv_len + chunk_len > req.prompt_len:
            raise ValueError(
                f"{request_id}: bad prefill chunk of {chunk_len} at {req.kv_len}/{req.prompt_len}"
            )
        plan = self.plan_page_chunk(req, chunk_len)  # a page chunk, where the rules take one (page_chunks.py)
        if plan is None:
            self.rules.before_prefill_chunk(self, req)
            self.rules.evict_ahead(self, req.pages_needed(req.kv_len + chunk_len))
            plan = self._plan(req, chunk_len, self.rules.prefill_checkpoint(req, chunk_len))
        return plan

    def complete_prefill(self, request_id: str, chunk_len: int) -> None:
        self._pass_open = False
        req = self.requests[request_id]
        req.kv_len += chunk_len
        self.take_planned_checkpoint(req)
        self.rules.after_prefill_chunk(self, req, req.kv_len >= req.prompt_len)

    def prepare_decode(self, request_id: str, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        refusal = self.rules.decode_refusal(self, req)
        if refusal is not None:
            return refusal
        self.free_out_of_window(request_id, iteration)
        self.rules.evict_ahead(self, 0)
        return self._plan(req, 1, self.rules.decode_checkpoint(req))

    def free_out_of_window(self, request_id: str, iteration: int) -> None:
        """The decode step's SWA free below the window, where the rules' trigger fires (``prepare_decode``
        runs it; an engine that frees for the whole batch before evicting for it calls it first)."""
        req = self.requests[request_id]
        target = self.rules.decode_free_target(req, iteration + self.policy.iteration_phase)
        if target is not None and target > req.swa_frontier:
            self.free_swa_below(req, target)

    def complete_decode(self, request_id: str) -> None:
        self._pass_open = False
        self._complete_step(self.requests[request_id])

    def finish(self, request_id: str) -> FinishResult:
        req = self.requests[request_id]
        if self._finishing:
            emit(self._finishing, FinishStarted(request_id))
        self.rules.finish(self, req)
        result = new_tuple(FinishResult, (req.prefix_len if self.rules.keeps_cache else 0,))
        self._release(req)
        del self.requests[request_id]
        self.rules.after_release(self, req)
        if self._finished:
            emit(self._finished, Finished(request_id, result.inserted_len))
        return result

    def abort(self, request_id: str) -> None:  # drop a request without caching anything it computed
        self._release(self.requests.pop(request_id))
        self.events.publish(Aborted(request_id))

    def free_swa_below(self, req: RequestCache, frontier: int) -> None:
        """Free the request's own SWA pages below ``frontier`` (positions the tree owns are not its own)."""
        num_freed = req.free_own_swa_below(frontier, self.pools[SWA])
        if self._swa_freed:
            emit(self._swa_freed, SwaFreed(req.request_id, frontier, num_freed))

    def insert(self, req: RequestCache, end: int) -> None:
        """Hand ``[0, end)`` to the tree and move the request's locks to the node ending there."""
        touch = self.rules.insert_touches_path
        self.relock(req, insert(self.tree, req, end, self.window, self.has_swa, touch_path=touch))
        if self._inserted:
            emit(self._inserted, Inserted(req.request_id, end))

    def relock(self, req: RequestCache, node) -> None:
        """Move the request's locks to ``node``, the end of its newly committed path."""
        old = req.locks
        if self.rules.slides_window_locks and node.parent is old.node and old.in_walk_order:
            locks.slide(self.tree, old, node, self.window, self.has_swa, self.has_mamba)  # vLLM+: every chunk
            return
        # release the old window and state first: the new window may share nodes, and a holder is a set
        # member, not a count. The new node extends the locked path, so the old FULL locks carry over.
        locks.unlock(self.tree, old, keep_from=old.node)
        req.locks = locks.lock(
            self.tree, req.request_id, node, self.window, self.has_swa, self.has_mamba, locked_above=old.node
        )

    def _admission_refusal(self, req: RequestCache, num_states: int, budget: int | None) -> Refusal | None:
        """The engine's admission check (and its first chunk's) and the admission states' reservation, in the
        engine's order."""

        def reserve_states() -> Refusal | None:
            return self.rules.reserve(self, 0, 0, num_states) if num_states else None

        if self.rules.budget_before_states:
            refusal = self.rules.admission_refusal(self, req)
            return refusal or self.rules.first_chunk_refusal(self, req, budget) or reserve_states()
        return reserve_states() or self.rules.admission_refusal(self, req)

    def _resume_state(self, match: MatchResult) -> int | None:
        """The tree state a hit copies into the request's running state."""
        if not match.cached_len:
            return None
        if self.policy.fault == "stale-state":  # deliberately wrong: the checkpoint before the matched one
            earlier = reversed(match.tree_node.path_from_root()[:-1])
            return next((node.state for node in earlier if node.state is not None), None)
        return match.tree_node.state

    def _lock(self, holder: str, node) -> locks.LockSet:
        return locks.lock(self.tree, holder, node, self.window, self.has_swa, self.has_mamba)

    def _release(self, req: RequestCache) -> None:
        for comp, ids in req.drop_all().items():
            self.pools[comp].free(ids)
        locks.unlock(self.tree, req.locks)

    def _follow_split(self, upper, lower) -> None:
        """A split node's upper half inherits its SWA holders; their lock sets must name it too."""
        for holder in upper.swa_holders:
            held = self.requests[holder].locks
            held.swa_nodes.append(upper)
            held.in_walk_order = False
