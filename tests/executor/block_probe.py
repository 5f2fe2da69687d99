"""What each step of vLLM's block manager hands the executor, read from the manager's own tables.

The vLLM twin of cache_probe.py: for every admission with a hit, the position of the Mamba state it resumes
from (the block in its table at the hit, looked up by its block key: a state saved anywhere but at the hit
cannot be bit-exact); for every step, whether a SWA key its first query reads was already released (the
query at ``start`` reads keys from ``start - W + 1``, vLLM's window of W tokens with the query).
"""
from __future__ import annotations

from sim.cache.blocks.manager import BlockCacheManager
from sim.cache.results import AdmitResult, ChunkPlan
from sim.models import MAMBA, SWA


class BlockProbe:
    def __init__(self, monkeypatch):
        self.stale_state: dict[str, tuple[int, int]] = {}  # request -> (hit, position of the state it resumes)
        self.freed_read: set[str] = set()
        self.hits: dict[str, int] = {}
        admit, step = BlockCacheManager.admit, BlockCacheManager._step
        probe = self

        def probed_admit(manager, request_id, tokens, prompt_len, budget=None):
            result = admit(manager, request_id, tokens, prompt_len, budget)
            if isinstance(result, AdmitResult) and result.match.cached_len:
                probe._admitted(manager, request_id, result.match.cached_len)
            return result

        def probed_step(manager, req, end, checkpoint, iteration):
            plan = step(manager, req, end, checkpoint, iteration)
            if isinstance(plan, ChunkPlan):
                probe._stepped(manager, req, plan)
            return plan

        monkeypatch.setattr(BlockCacheManager, "admit", probed_admit)
        monkeypatch.setattr(BlockCacheManager, "_step", probed_step)

    def _admitted(self, manager, request_id: str, hit: int) -> None:
        self.hits[request_id] = hit
        req, B = manager.requests[request_id], manager.page_size
        for group in manager.layout.groups_of(MAMBA):
            block = req.tables[group][hit // B - 1]
            key = manager.pool.key_of.get(block) if block is not None else None
            saved_at = (req.chain.keys.index(key[0]) + 1) * B if key is not None else -1
            if saved_at != hit:
                self.stale_state[request_id] = (hit, saved_at)

    def _stepped(self, manager, req, plan: ChunkPlan) -> None:
        B, needed_from = manager.layout.block_of(SWA), max(0, plan.start - manager.window + 1)
        for group in manager.layout.groups_of(SWA):
            table = req.tables[group]
            live_from = next((i for i, block in enumerate(table) if block is not None), len(table)) * B
            if plan.start and needed_from < live_from:
                self.freed_read.add(req.request_id)

    def predicted_not_exact(self) -> set[str]:
        return set(self.stale_state) | self.freed_read
