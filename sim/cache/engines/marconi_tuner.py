"""Marconi's online alpha: 0 (plain recency) until the first eviction, then tuned once.

At the first eviction the cache has seen ``n`` requests; once it has seen ``marconi_bootstrap * n`` it replays
those requests, from an empty cache, once per alpha in 0, 0.1, .., 2.0 (``config_tuner.py``: the replay runs
each request alone, match then insert, as Marconi's simulator does), and keeps the alpha whose replay did
best over its last 500 requests: the highest token hit rate (the paper) or the most prefill FLOPs saved (the
reference code). Ties go to the smallest alpha (the code takes whichever replay finished first). The
reference code tunes only once (its continuous re-tuning is dead code), and so does this.
"""

from __future__ import annotations

from typing import cast

from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.engines.marconi_fork import can_fork, could_evict, fork, num_evictions
from sim.cache.engines.marconi_knobs import MarconiKnobs
from sim.cache.engines.marconi_solo import solo_hit
from sim.cache.errors import ReplayRefused
from sim.cache.manager import CacheManager
from sim.cache.ops import RadixOps
from sim.cache.policy import Policy, own_knobs
from sim.tokens import TokenSeq

ALPHAS = tuple(round(0.1 * i, 1) for i in range(21))
TUNING_TAIL = 500  # requests of the replay the choice looks at (ConfigTuner: tuning_interval)


class AlphaTuner:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        knobs = self.knobs = own_knobs(policy, MarconiKnobs)
        self.alpha = 0.0 if knobs.marconi_alpha is None else knobs.marconi_alpha
        # LRU eviction (the SGLang+ / vLLM+ baselines) never reads alpha: nothing to tune
        self.done = knobs.marconi_alpha is not None or knobs.marconi_eviction != "flop-aware"
        self.window: int | None = None
        self.history: list[
            tuple[str, TokenSeq, int]
        ] = []  # (request id, tokens, prompt length), admission order
        self.tuned: dict[float, float] | None = None  # each alpha's replay figure, once tuned

    def admitted(self, manager: RadixOps, cost: NodeCost, request_id: str, tokens, prompt_len: int) -> None:
        if self.done:
            return
        self.history.append((request_id, tokens, prompt_len))
        if self.window is not None and len(self.history) >= self.window:
            self.tuned = self.replay_all(manager, cost)
            self.alpha = max(self.tuned, key=self.tuned.__getitem__)  # the first (smallest) of equal bests
            self.done, self.history = True, []

    def first_eviction(self) -> None:
        if not self.done and self.window is None:
            self.window = self.knobs.marconi_bootstrap * max(len(self.history), 1)

    def replay_all(self, manager: RadixOps, cost: NodeCost) -> dict[float, float]:
        """Every alpha's replay figure: the requests before the first eviction run once, each alpha goes on
        from a copy of that cache (``marconi_fork.py``); from scratch where no copy can be taken."""
        shared = self.fresh_cache(manager, ALPHAS[-1])
        if not can_fork(shared):
            shared.discard()
            return {alpha: self.replay(manager, cost, alpha) for alpha in ALPHAS}
        cached: list[int] = []
        for request_id, tokens, prompt_len in self.history:
            if could_evict(shared, len(tokens)):
                break
            cached.append(self.run(shared, request_id, tokens, prompt_len))
            if num_evictions(shared):  # the bound missed a request: alpha may have decided it
                shared.discard()
                return {alpha: self.replay(manager, cost, alpha) for alpha in ALPHAS}
        rest = self.history[len(cached) :]
        figures = {}
        for alpha in ALPHAS:
            fresh = shared if alpha == ALPHAS[-1] else fork(shared, self.fresh_cache(manager, alpha))
            figures[alpha] = self.figure(cost, cached + [self.run(fresh, *request) for request in rest])
            fresh.discard()
        return figures

    def replay(self, manager: RadixOps, cost: NodeCost, alpha: float) -> float:
        """The window replayed alone, in order, on a fresh cache of the same size with ``alpha`` fixed: the
        reference ``replay_all`` is held to."""
        fresh = self.fresh_cache(manager, alpha)
        cached = [
            self.run(fresh, request_id, tokens, prompt_len) for request_id, tokens, prompt_len in self.history
        ]
        fresh.discard()
        return self.figure(cost, cached)

    def fresh_cache(self, manager: RadixOps, alpha: float) -> CacheManager:
        """An empty cache of the same size with ``alpha`` fixed. The replay reads only each request's hit: its
        page ids are never read (one shared id is cheaper)."""
        policy = self.policy.with_knobs(marconi_alpha=alpha)
        return cast(CacheManager, manager.empty_like(policy, anonymous_pages=True))

    def run(self, fresh: CacheManager, request_id: str, tokens: TokenSeq, prompt_len: int) -> int:
        """One request of the window alone: its hit (0 where the pools cannot hold it)."""
        try:
            return solo_hit(fresh, request_id, tokens, prompt_len, self.policy.chunked_prefill_size)
        except ReplayRefused:
            if request_id in fresh.requests:
                fresh.abort(request_id)
            return 0

    def figure(self, cost: NodeCost, cached: list[int]) -> float:
        """A replay's figure over its last ``TUNING_TAIL`` requests: the paper's token hit rate, or the
        reference code's prefill FLOPs saved."""
        hits, prompts = (
            cached[-TUNING_TAIL:],
            [prompt_len for _, _, prompt_len in self.history][-TUNING_TAIL:],
        )
        if self.knobs.marconi_follows == "code":
            return float(sum(cost.prefill_flops(0, hit) for hit in hits))
        return sum(hits) / sum(prompts)
