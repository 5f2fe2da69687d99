"""What each prefix hit actually resumes from, read through the cache manager's public calls.

A negative control is only a control if its trace exercises the fault. The probe records, for every
request admitted with a hit: the matched length, the position at which the MAMBA state it copies was
saved (from the checkpoint plans the manager handed out, or the running state a finish hands to the tree; the
zero state counts as saved at 0), and how
far back its SWA KV is still live. From those alone it predicts which requests cannot be bit-exact:
a state saved anywhere but at the matched length, or fewer than W live SWA tokens before it (the first
new query reads keys ``[P - W, P]``).
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.cache.manager import CacheManager
from sim.cache.results import AdmitResult, ChunkPlan


@dataclass(frozen=True)
class Hit:
    request_id: str
    cached_len: int
    state_saved_at: int | None  # None: the model has no MAMBA layers
    swa_live_from: int | None  # the first position of the live SWA run that ends at the hit (None: no SWA)
    swa_margin: int | None  # live SWA tokens before the hit minus the W it needs; < 0 reads freed KV

    @property
    def cannot_be_exact(self) -> bool:
        stale = self.state_saved_at is not None and self.state_saved_at != self.cached_len
        return stale or (self.swa_margin is not None and self.swa_margin < 0)


class CacheProbe:
    def __init__(self, monkeypatch):
        self.hits: dict[str, Hit] = {}
        self._saved_at: dict[int, int] = {}  # state id -> position of the checkpoint last planned into it
        probe = self
        admit, prefill, decode = CacheManager.admit, CacheManager.prepare_prefill, CacheManager.prepare_decode
        finish = CacheManager.finish

        def probed_admit(manager, request_id, tokens, prompt_len, budget=None):
            result = admit(manager, request_id, tokens, prompt_len, budget)
            if isinstance(result, AdmitResult) and result.match.cached_len:
                probe._record_hit(manager, request_id, result)
            return result

        def probed_plan(original):
            def planned(manager, request_id, *args):
                plan = original(manager, request_id, *args)
                if isinstance(plan, ChunkPlan):
                    probe._saved_at.update({state: position for position, state in plan.checkpoints})
                return plan
            return planned

        def probed_finish(manager, request_id):
            req = manager.requests[request_id]
            if req.state is not None:  # an engine may hand the running state itself to the tree (FreeToken)
                probe._saved_at[req.state] = req.kv_len
            return finish(manager, request_id)

        monkeypatch.setattr(CacheManager, "finish", probed_finish)
        monkeypatch.setattr(CacheManager, "admit", probed_admit)
        monkeypatch.setattr(CacheManager, "prepare_prefill", probed_plan(prefill))
        monkeypatch.setattr(CacheManager, "prepare_decode", probed_plan(decode))

    def _record_hit(self, manager: CacheManager, request_id: str, result: AdmitResult) -> None:
        cached = result.match.cached_len
        saved_at = None
        if manager.has_mamba:
            saved_at = 0 if result.copy_state_from is None else self._saved_at[result.copy_state_from]
        live_from = margin = None
        if manager.has_swa:
            swa_pages = manager.page_tables(request_id)[1][: -(-cached // manager.page_size)]
            freed = [i for i, page in enumerate(swa_pages) if page is None]
            live_from = (freed[-1] + 1) * manager.page_size if freed else 0
            margin = cached - live_from - min(manager.window, cached)
        self.hits[request_id] = Hit(request_id, cached, saved_at, live_from, margin)

    def predicted_not_exact(self) -> set[str]:
        return {rid for rid, hit in self.hits.items() if hit.cannot_be_exact}
