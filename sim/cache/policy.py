"""A policy: which engine's rules run, and the value of every knob (each declared once, here).

``Policy`` is model-independent (a preset plus overrides, as a grid point stores it); ``resolve`` settles
it against a model once: the effective window and scan chunk, the checkpoint grids, which components the
cache keeps. Everything downstream (manager, rules, pool sizing, reports) reads the ``Resolved`` values
(``sim/cache/resolve.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.cache.components import Component
from sim.cache.knobs import MAX_INT, knob, knob_specs
from sim.cache.resolve import Resolved


@dataclass(frozen=True)
class Policy:
    name: str
    engine: str  # the rules module in sim/cache/engines/
    about: str = ""  # which engine version or PR the preset models
    full_only: bool = False  # the cache keeps FULL alone (SWA and MAMBA ignored): the ideal FULL engine
    page_size: int = knob(
        64,
        "radix page: keys, pages, checkpoints and the SWA frontier align to it",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
    )
    track_interval: int = knob(
        256, "MAMBA decode checkpoint interval", unit="tokens", minimum=1, maximum=MAX_INT
    )
    window: int | None = knob(
        None, "SWA window", unit="tokens", minimum=0, maximum=MAX_INT, none_means="the model's"
    )
    mamba_chunk: int | None = knob(
        None,
        "the scan's chunk: prefill checkpoints land on its multiples",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
        none_means="the model's",
    )
    chunked_prefill_size: int = knob(
        8192,
        "prefill tokens per engine step; longer prompts are chunked",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
    )
    max_running_requests: int = knob(64, "requests running at once, at most", minimum=1, maximum=MAX_INT)
    swa_free_trigger: str = knob(
        "tokens",
        "when decode frees out-of-window SWA: per request every interval "
        "tokens, or on every interval-th engine iteration",
        choices=("tokens", "iterations"),
    )
    swa_eviction_interval: int = knob(
        128, "the SWA free trigger's interval", unit="tokens or iterations", minimum=1, maximum=MAX_INT
    )
    iteration_phase: int = knob(
        0, "global iteration index of the first engine step (iterations trigger)", minimum=0, maximum=MAX_INT
    )
    swa_pool_floor: str = knob(
        "window", "per-request SWA pool floor when pools are sized", choices=("window", "window+interval")
    )
    retain_floor: str | None = knob(
        None,
        "SWA retain floor: none (before PR #34729), request (#34729), tree (its first TODO)",
        choices=(None, "request", "tree"),
        engines=("sglang",),
    )
    finish_trim_gap: int | None = knob(
        None,
        "finish-time head trim: SWA kept for [prompt - W - gap, prompt)",
        unit="tokens",
        minimum=0,
        maximum=MAX_INT,
        none_means="no trim (#488)",
        engines=("freetoken",),
    )
    overlap: bool = knob(
        True,
        "the overlap scheduler: a prompt's commit waits for its first decode step, "
        "so it covers that step's position too",
        engines=("freetoken",),
    )
    marconi_checkpoints: str = knob(
        "branch+last",
        "which MAMBA states a request leaves: at the branch-off "
        "point its speculative insertion finds and its last decoded token "
        "(Marconi), or one at every page (vLLM+: page 32 = its 32-token block)",
        choices=("branch+last", "every-page"),
        engines=("marconi",),
    )
    marconi_eviction: str = knob(
        "flop-aware",
        "flop-aware: Marconi's recency + alpha x FLOP efficiency over "
        "leaves and single-child nodes, a hit refreshing its deepest node only; lru: "
        "least recent leaf first, a hit or insert refreshing its whole path (SGLang+, "
        "vLLM+)",
        choices=("flop-aware", "lru"),
        engines=("marconi",),
    )
    marconi_alpha: float | None = knob(
        None,
        "weight of FLOP efficiency in the eviction score",
        minimum=0,
        maximum=1e6,
        none_means="0 until the first eviction, then tuned once "
        "by replaying the bootstrap window over 0, 0.1, .., 2",
        engines=("marconi",),
    )
    marconi_bootstrap: int = knob(
        5,
        "alpha tuning window: this many times the requests seen before the first "
        "eviction (Marconi: 5; 15 for LMSys)",
        minimum=1,
        maximum=MAX_INT,
        engines=("marconi",),
    )
    marconi_follows: str = knob(
        "paper",
        "paper: the paper's FLOP efficiency (savings and bytes of the node "
        "relative to its parent) and alpha tuned for hit rate; code: the reference "
        "code's (KV of the whole prefix, the MLP term less the parent's attention "
        "FLOPs, the stale node's bytes counted, alpha tuned for FLOPs saved)",
        choices=("paper", "code"),
        engines=("marconi",),
    )
    retention_interval: int | None = knob(
        0,
        "prefix_cache_retention_interval: SWA tails and Mamba states kept at "
        "the prompt's last block boundary and the junction, and every this many "
        "tokens",
        unit="tokens",
        minimum=0,
        maximum=MAX_INT,
        none_means="dense, every block (before vLLM #52216)",
        engines=("vllm",),
    )
    junction: bool = knob(
        True,
        "the shared-prefix junction (vLLM #37898): a FULL hit beyond the reconciled hit "
        "ends a prefill chunk there and keeps its state",
        engines=("vllm",),
    )
    async_scheduling: bool = knob(
        True,
        "async scheduling, two batches in flight: blocks leave the window and old "
        "Mamba states go back one step later",
        engines=("vllm",),
    )
    prefill_checkpoints: bool | None = knob(
        None,
        "GDN prefill on FlashInfer: Mamba states written inside prefill "
        "chunks, blocks aligned to 64 (no effect without GDN layers)",
        none_means="as vLLM picks for --gpu: on Hopper (h100, h200), else off",
        engines=("vllm",),
    )
    max_model_len: int | None = knob(
        None,
        "vLLM's max_model_len: the start-up check fits one request this long "
        "in the pool; longer requests are refused",
        unit="tokens",
        minimum=1,
        maximum=MAX_INT,
        none_means="the longest the pool can serve",
        engines=("vllm",),
    )
    # deliberately wrong, to prove the executor catches it: the retain floor keeps this many tokens less and
    # the match accepts a window this much short (-1: one page)
    window_slack: int = knob(
        0, "DELIBERATELY WRONG: window shortfall", minimum=-1, maximum=MAX_INT, hidden=True
    )
    fault: str | None = knob(
        None,
        "DELIBERATELY WRONG MAMBA handling (vllm-*: vLLM's block manager's hit or SWA release)",
        choices=(None, "stale-state", "early-checkpoint", "vllm-hit-past-state", "vllm-early-free"),
        hidden=True,
    )

    def knob_values(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in KNOBS}


KNOBS = knob_specs(Policy)
CLI_KNOBS = {name: spec for name, spec in KNOBS.items() if not spec.hidden}


def validate(policy: Policy) -> None:
    """ValueError naming the knob when a value or a combination is not allowed."""
    for name, spec in KNOBS.items():
        try:
            spec.check(getattr(policy, name))
        except ValueError as e:
            raise ValueError(f"policy knob {name} {e}") from None
    if policy.engine != "vllm" and policy.track_interval % policy.page_size:  # vLLM has no decode interval
        raise ValueError(
            f"track_interval {policy.track_interval} must be a multiple of page_size {policy.page_size}"
        )


def describe_resolved(resolved: Resolved) -> str:
    """One line: the rules, every knob as run, and what the model settles (window, chunk, grids)."""
    policy = resolved.policy
    held = (True, resolved.has_swa, resolved.has_mamba)
    components = "+".join(comp.pool_name for comp, on in zip(Component, held, strict=True) if on)
    knobs = ", ".join(
        f"{name} {_shown(getattr(policy, name))}"
        for name, spec in KNOBS.items()
        if not spec.hidden and _applies(spec, policy.engine)
    )
    return (
        f"rules {policy.engine}, cache {components}; {knobs}; resolved: window {resolved.window}, "
        f"mamba_chunk {resolved.mamba_chunk}, checkpoint grid {resolved.checkpoint_grid}, "
        f"track grid {resolved.track_grid}"
    )


def _shown(value: object) -> str:
    return "none" if value is None else str(value)


def _applies(spec, engine: str) -> bool:
    return spec.engines is None or engine in spec.engines
