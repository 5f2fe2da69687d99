"""Marconi's own knobs: which MAMBA states a request leaves, the eviction, and its alpha; and SGLang's loop
knobs (the overlap loop, the schedule policy, mixed chunks) for the presets that run on SGLang's loop."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cache.engines.base import overlap_knob
from sim.cache.engines.sglang_knobs import mixed_chunk_knob, schedule_policy_knob
from sim.cache.knobs import MAX_INT, knob
from sim.cache.policy import EngineKnobs


@dataclass(frozen=True)
class MarconiKnobs(EngineKnobs):
    marconi_checkpoints: str = knob(
        "branch+last",
        "which MAMBA states a request leaves: at the branch-off "
        "point its speculative insertion finds and its last decoded token "
        "(Marconi), or one at every page (vLLM+: page 32 = its 32-token block)",
        choices=("branch+last", "every-page"),
    )
    marconi_eviction: str = knob(
        "flop-aware",
        "flop-aware: Marconi's recency + alpha x FLOP efficiency over "
        "leaves and single-child nodes, a hit refreshing its deepest node only; lru: "
        "least recent leaf first, a hit or insert refreshing its whole path (SGLang+, "
        "vLLM+)",
        choices=("flop-aware", "lru"),
    )
    marconi_alpha: float | None = knob(
        None,
        "weight of FLOP efficiency in the eviction score",
        minimum=0,
        maximum=1e6,
        none_means="0 until the first eviction, then tuned once "
        "by replaying the bootstrap window over 0, 0.1, .., 2",
    )
    marconi_bootstrap: int = knob(
        5,
        "alpha tuning window: this many times the requests seen before the first "
        "eviction (Marconi: 5; 15 for LMSys)",
        minimum=1,
        maximum=MAX_INT,
    )
    marconi_follows: str = knob(
        "paper",
        "paper: the paper's FLOP efficiency (savings and bytes of the node "
        "relative to its parent) and alpha tuned for hit rate; code: the reference "
        "code's (KV of the whole prefix, the MLP term less the parent's attention "
        "FLOPs, the stale node's bytes counted, alpha tuned for FLOPs saved)",
        choices=("paper", "code"),
    )
    # SGLang's loop as Marconi's system runs it (Marconi and SGLang+; vLLM+ runs the default loop and refuses
    # them: sim/engines/marconi.py)
    overlap: bool = overlap_knob()
    schedule_policy: str = schedule_policy_knob()
    mixed_chunk: bool = mixed_chunk_knob()
