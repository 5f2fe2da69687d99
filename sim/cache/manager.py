"""The cache manager: the request lifecycle the scheduler drives, for every policy preset.

admit -> (prepare_prefill -> complete_prefill)* -> (prepare_decode -> complete_decode)* -> finish.
``prepare_*`` moves the SWA frontier and reserves pages and states (evicting as needed) or returns a
``Refusal`` without allocating; ``complete_*`` records what the step computed and commits to the tree.
"""
from __future__ import annotations

import math

from sim.cache import evictor, locks
from sim.cache.insert import insert
from sim.cache.matching import deepest_acceptable, refresh_after_match
from sim.cache.plain_decodes import PlainDecodes
from sim.cache.policies import FREETOKEN_RULES, Policy
from sim.cache.pools import Pool, PoolUsage
from sim.cache.request import RequestCache
from sim.cache.results import AdmitResult, ChunkPlan, FinishResult, MatchResult, Refusal
from sim.cache.sizing import PoolSizes
from sim.cache.swa_free import (
    decode_trigger_fires,
    floor_to,
    frontier_for,
    prefill_commit_fires,
)
from sim.cache.tree import FULL, STATE, SWA, RadixTree
from sim.cache.trim import trim_head
from sim.models import ModelSpec
from sim.tokens import TokenSeq


class CacheManager(PlainDecodes):
    def __init__(self, model: ModelSpec, policy: Policy, sizes: PoolSizes, on_free: dict | None = None):
        on_free = on_free or {}
        self.policy, self.model = policy, model
        self.page_size = policy.page_size
        self.window = model.window if policy.window is None else policy.window
        self.window_slack = self.page_size if policy.window_slack == -1 else policy.window_slack
        self.has_swa = model.has_swa and not policy.full_only
        self.has_mamba = model.has_mamba and not policy.full_only
        self.checkpoint_grid = math.lcm(policy.mamba_chunk or model.mamba_chunk or 1, self.page_size)
        self.pools = {
            FULL: Pool("FULL", sizes.full_pages, on_free.get(FULL)),
            SWA: Pool("SWA", sizes.swa_pages if self.has_swa else 0, on_free.get(SWA)),
            STATE: Pool("MAMBA", sizes.states if self.has_mamba else 0, on_free.get(STATE)),
        }
        self.tree = RadixTree(self.page_size, self.pools[FULL], self.pools[SWA], self.pools[STATE])
        self.tree.on_split = self._follow_split
        self.requests: dict[str, RequestCache] = {}

    # ---- admission ----------------------------------------------------------------------------------
    def match(self, tokens: TokenSeq, prompt_len: int) -> MatchResult:
        """The reusable prefix of a prompt; the last prompt token is always recomputed."""
        if not self.policy.cache_enabled or prompt_len <= 1:
            return MatchResult(0, 0, self.tree.root)
        path, full_depth = self.tree.walk(tokens, floor_to(prompt_len - 1, self.page_size))
        best = deepest_acceptable(path, self.window - self.window_slack, self.has_swa, self.has_mamba)
        node = best if best is not None else self.tree.root
        refresh_after_match(self.tree, path, node, self.window, self.policy.swa_refresh)
        sound = None
        if self.window_slack:
            sound_node = deepest_acceptable(path, self.window, self.has_swa, self.has_mamba)
            sound = sound_node.end if sound_node is not None else 0
        return MatchResult(node.end, full_depth, node, sound)

    def admit(self, request_id: str, tokens: TokenSeq, prompt_len: int) -> AdmitResult | Refusal:
        if request_id in self.requests:
            raise ValueError(f"request {request_id!r} is already admitted")
        match = self.match(tokens, prompt_len)
        held = self._lock(request_id, match.node)
        refusal = self._reserve(0, 0, 1) if self.has_mamba else None
        if refusal is not None:
            locks.unlock(self.tree, held)
            return refusal
        req = RequestCache(request_id, tokens, prompt_len, match, held, self.page_size,
                           kv_len=match.cached_len, prefix_len=match.cached_len)
        copy_from = None
        if self.has_mamba:
            req.state = self.pools[STATE].alloc_one()
            copy_from = match.node.state if match.cached_len else None
            if copy_from is not None and self.policy.fault == "stale-state":
                copy_from = next((n.state for n in reversed(match.node.path_from_root()[:-1])
                                  if n.state is not None), None)
        self.requests[request_id] = req
        return AdmitResult(match, copy_from)

    # ---- prefill ------------------------------------------------------------------------------------
    def prepare_prefill(self, request_id: str, chunk_len: int, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        if chunk_len <= 0 or req.kv_len + chunk_len > req.prompt_len:
            raise ValueError(f"{request_id}: bad prefill chunk of {chunk_len} at {req.kv_len}/{req.prompt_len}")
        if self.has_swa and self.policy.rules == FREETOKEN_RULES:
            self._free_swa_below(req, frontier_for(self.policy, req, req.kv_len, self.window, None))
        checkpoint = self._prefill_checkpoint(req, chunk_len)
        return self._plan(req, chunk_len, checkpoint)

    def complete_prefill(self, request_id: str, chunk_len: int) -> None:
        req = self.requests[request_id]
        req.kv_len += chunk_len
        self._take_planned_checkpoint(req)
        last_chunk = req.kv_len >= req.prompt_len
        if self.policy.cache_enabled and (self.policy.commit_every_chunk or last_chunk):
            self._commit(req)

    # ---- decode -------------------------------------------------------------------------------------
    def prepare_decode(self, request_id: str, iteration: int) -> ChunkPlan | Refusal:
        req = self.requests[request_id]
        iteration += self.policy.iteration_phase
        if self.has_swa and decode_trigger_fires(self.policy, req, self.window, iteration):
            target = frontier_for(self.policy, req, req.kv_len, self.window, self._retain_floor(req))
            self._free_swa_below(req, target)
        checkpoint = req.kv_len + 1 if self.has_mamba and (req.kv_len + 1) % self.policy.track_interval == 0 else None
        return self._plan(req, 1, checkpoint)

    def complete_decode(self, request_id: str) -> None:
        req = self.requests[request_id]
        req.kv_len += 1
        req.decode_steps += 1
        self._take_planned_checkpoint(req)

    # ---- finish -------------------------------------------------------------------------------------
    def finish(self, request_id: str) -> FinishResult:
        req = self.requests[request_id]
        if self.policy.cache_enabled:
            end = self._insert_len(req)
            if end is not None and end > req.prefix_len:
                self._insert(req, end)
        result = FinishResult(inserted_len=req.prefix_len if self.policy.cache_enabled else 0)
        self._release(req, result)
        del self.requests[request_id]
        if self.policy.finish_trim_gap is not None and self.has_swa and self.policy.cache_enabled:
            result.trimmed_swa_pages = trim_head(self.tree, req.tokens, req.prompt_len, self.window,
                                                 self.policy.finish_trim_gap)
        return result

    def abort(self, request_id: str) -> None:
        """Drop a request without caching anything it computed."""
        self._release(self.requests[request_id], FinishResult(inserted_len=0))
        del self.requests[request_id]

    # ---- views --------------------------------------------------------------------------------------
    def usage(self) -> dict[str, PoolUsage]:
        tree_held = {FULL: self.tree.num_full_pages, SWA: self.tree.num_swa_pages, STATE: self.tree.num_states}
        return {comp: PoolUsage(pool.num_free, pool.num_used - tree_held[comp], tree_held[comp])
                for comp, pool in self.pools.items()}

    def page_tables(self, request_id: str) -> tuple[list[int], list[int | None]]:
        """FULL and SWA page ids of the request's positions (None where SWA is freed)."""
        req = self.requests[request_id]
        full: list[int] = []
        swa: list[int | None] = []
        for node in req.last_node.path_from_root():
            full += node.full_pages
            swa += node.swa_pages if node.swa_pages is not None else [None] * len(node.full_pages)
        return full + req.own_full, swa + req.own_swa

    # ---- internals ----------------------------------------------------------------------------------
    def _plan(self, req: RequestCache, num_tokens: int, checkpoint: int | None) -> ChunkPlan | Refusal:
        num_pages = req.pages_needed(req.kv_len + num_tokens)
        if not num_pages and not checkpoint:  # nothing to allocate (most decode steps)
            req.planned = ()
            return ChunkPlan(req.request_id, req.kv_len, req.kv_len + num_tokens, req.state)
        refusal = self._reserve(num_pages, num_pages if self.has_swa else 0, 1 if checkpoint else 0)
        if refusal is not None:
            return refusal
        req.own_full += self.pools[FULL].alloc(num_pages)
        req.own_swa += self.pools[SWA].alloc(num_pages) if self.has_swa else [None] * num_pages
        planned = ((checkpoint, self.pools[STATE].alloc_one()),) if checkpoint else ()
        req.planned = planned
        if planned and num_tokens > 1 and self.policy.fault == "early-checkpoint":
            planned = ((checkpoint - 1, planned[0][1]),)  # the tree still records `checkpoint`
        return ChunkPlan(req.request_id, req.kv_len, req.kv_len + num_tokens, req.state, planned)

    def _reserve(self, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        for comp, needed in ((FULL, full_pages), (SWA, swa_pages), (STATE, states)):
            if needed and not evictor.ensure_free(self.tree, self.pools[comp], comp, needed):
                return Refusal(self.pools[comp].name, needed, self.pools[comp].num_free)
        return None

    def _take_planned_checkpoint(self, req: RequestCache) -> None:
        for position, state_id in req.planned:
            if req.checkpoint is not None:  # superseded before it reached the tree
                self.pools[STATE].free([req.checkpoint[1]])
            req.checkpoint = (position, state_id)
        req.planned = ()

    def _prefill_checkpoint(self, req: RequestCache, chunk_len: int) -> int | None:
        """One checkpoint per extend at its last grid-aligned point, or at the branching point."""
        grid, start = self.checkpoint_grid, req.kv_len
        if not self.has_mamba or chunk_len < grid:
            return None
        position = start + chunk_len // grid * grid
        branch = req.match.full_depth // grid * grid
        if branch > req.cached_len and start < branch < start + chunk_len and (branch - start) % grid == 0:
            position = branch
        return position if position % self.page_size == 0 else None

    def _insert_len(self, req: RequestCache) -> int | None:
        if self.has_mamba:
            return req.checkpoint[0] if req.checkpoint is not None else None
        return floor_to(req.kv_len, self.page_size)

    def _commit(self, req: RequestCache) -> None:
        """Insert what a prefill chunk computed, so that other requests can match it now."""
        end = self._insert_len(req)
        if end is None or end <= req.prefix_len:
            return
        if self.has_swa and self.policy.rules != FREETOKEN_RULES and prefill_commit_fires(req, end, self.window):
            self._free_swa_below(req, frontier_for(self.policy, req, end - 1, self.window, self._retain_floor(req)))
        self._insert(req, end)

    def _insert(self, req: RequestCache, end: int) -> None:
        node = insert(self.tree, req, end, self.window, self.has_swa)
        old = req.locks
        # release the old window and state first: the new window may share nodes, and a holder is a set
        # member, not a count. The new node extends the locked path, so the old FULL locks carry over.
        locks.unlock(self.tree, old, keep_from=old.node)
        req.locks = locks.lock(self.tree, req.request_id, node, self.window, self.has_swa, self.has_mamba,
                               locked_above=old.node)

    def _lock(self, holder: str, node) -> locks.LockSet:
        return locks.lock(self.tree, holder, node, self.window, self.has_swa, self.has_mamba)

    def _release(self, req: RequestCache, result: FinishResult) -> None:
        result.freed_full_pages = len(req.own_full)
        result.freed_swa_pages = sum(page is not None for page in req.own_swa)
        self.pools[FULL].free(req.own_full)
        self.pools[SWA].free([page for page in req.own_swa if page is not None])
        states = [s for s in (req.state, req.checkpoint[1] if req.checkpoint else None) if s is not None]
        self.pools[STATE].free(states + [s for _, s in req.planned])
        req.own_full, req.own_swa, req.state, req.checkpoint, req.planned = [], [], None, None, ()
        locks.unlock(self.tree, req.locks)

    def _free_swa_below(self, req: RequestCache, frontier: int) -> None:
        start = max(req.swa_frontier, req.prefix_len)
        freed = []
        for position in range(start, frontier, self.page_size):
            index = req.own_page_index(position)
            if 0 <= index < len(req.own_swa) and req.own_swa[index] is not None:
                freed.append(req.own_swa[index])
                req.own_swa[index] = None
        self.pools[SWA].free(freed)
        req.swa_frontier = max(req.swa_frontier, frontier)

    def _retain_floor(self, req: RequestCache) -> int | None:
        mode = self.policy.retain_floor
        if mode is None or not (self.has_swa and self.has_mamba):
            return None
        deepest = req.checkpoint[0] if req.checkpoint is not None else None
        if mode == "tree" and deepest is None:
            deepest = next((n.end for n in reversed(req.last_node.path_from_root()) if n.state is not None), None)
        return None if deepest is None else deepest - self.window + self.window_slack

    def _follow_split(self, upper, lower) -> None:
        """A split node's upper half inherits its SWA holders; their lock sets must name it too."""
        for holder in upper.swa_holders:
            self.requests[holder].locks.swa_nodes.append(upper)

    def check_integrity(self) -> None:
        from sim.cache.integrity import check_integrity

        check_integrity(self)
