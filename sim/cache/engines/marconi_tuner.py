"""Marconi's online alpha: 0 (plain recency) until the first eviction, then tuned once.

At the first eviction the cache has seen ``n`` requests; once it has seen ``marconi_bootstrap * n`` it replays
those requests, from an empty cache, once per alpha in 0, 0.1, .., 2.0 (``config_tuner.py``: the replay runs
each request alone, match then insert, as Marconi's simulator does), and keeps the alpha whose replay did
best over its last 500 requests: the highest token hit rate (the paper) or the most prefill FLOPs saved (the
reference code). Ties go to the smallest alpha (the code takes whichever replay finished first). The
reference code tunes only once (its continuous re-tuning is dead code), and so does this.
"""

from __future__ import annotations

from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.engines.marconi_knobs import MarconiKnobs
from sim.cache.errors import ReplayRefused
from sim.cache.ops import RadixOps
from sim.cache.policy import Policy, own_knobs
from sim.cache.solo_run import run_alone
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
            self.tuned = {alpha: self.replay(manager, cost, alpha) for alpha in ALPHAS}
            self.alpha = max(self.tuned, key=self.tuned.__getitem__)  # the first (smallest) of equal bests
            self.done, self.history = True, []

    def first_eviction(self) -> None:
        if not self.done and self.window is None:
            self.window = self.knobs.marconi_bootstrap * max(len(self.history), 1)

    def replay(self, manager: RadixOps, cost: NodeCost, alpha: float) -> float:
        """The window replayed alone, in order, on a fresh cache of the same size with ``alpha`` fixed."""
        # the replay reads only each request's hit: its page ids are never read (one shared id is cheaper)
        fresh = manager.empty_like(self.policy.with_knobs(marconi_alpha=alpha), anonymous_pages=True)
        cached, prompts = [], []
        for request_id, tokens, prompt_len in self.history:
            try:
                run = run_alone(
                    fresh,
                    request_id,
                    tokens,
                    prompt_len,
                    len(tokens) - prompt_len,
                    self.policy.chunked_prefill_size,
                )
                cached.append(run.match.cached_len)
            except ReplayRefused:
                if request_id in fresh.requests:
                    fresh.abort(request_id)
                cached.append(0)
            prompts.append(prompt_len)
        fresh.discard()
        cached, prompts = cached[-TUNING_TAIL:], prompts[-TUNING_TAIL:]
        if self.knobs.marconi_follows == "code":
            return float(sum(cost.prefill_flops(0, hit) for hit in cached))
        return sum(cached) / sum(prompts)
