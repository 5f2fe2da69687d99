"""Marconi (MLSys'25) and its SGLang+ / vLLM+ baselines: selective MAMBA admission, FLOP-aware eviction,
one byte budget for every pool (``--cache-bytes``) or SGLang's pools."""

from __future__ import annotations

from dataclasses import replace

from sim.cache.engines.marconi import MarconiRules
from sim.cache.engines.marconi_knobs import MarconiKnobs
from sim.cache.engines.marconi_vllm import MarconiVllmRules
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.policy import Policy, own_knobs
from sim.cache.sizing import PoolSizes
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import capped_scheduler, decode_interval_on_pages, radix_manager
from sim.engines.sglang import sglang_loop
from sim.models import ModelSpec
from sim.sched.interface import Scheduler

# page 1: Marconi's radix tree is token-granular; vLLM+ keeps its 32-token blocks as pages of 32
_MARCONI = Policy(
    name="marconi",
    engine="marconi",
    page_size=1,
    about="Marconi (MLSys'25): MAMBA states only at branch-off points and last decoded tokens, "
    "FLOP-aware eviction over leaves and single-child nodes, alpha tuned online",
    own=MarconiKnobs(),
)


def _vllm_plus(policy: Policy) -> bool:
    return own_knobs(policy, MarconiKnobs).marconi_checkpoints == "every-page"


def _manager(model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus) -> CacheModel:
    """vLLM+ leaves SGLang's gates out (``MarconiVllmRules``); Marconi and SGLang+ answer SGLang's budget."""
    return radix_manager(MarconiVllmRules if _vllm_plus(policy) else MarconiRules)(
        model, policy, sizes, events
    )


def _anonymous_manager(model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus) -> CacheModel:
    """The cache of a run nobody reads a page id of (``Engine.anonymous_manager``): Marconi and SGLang+ on
    pools of anonymous FULL and SWA ids. No rule of theirs, nor SGLang's loop they run on, reads a page id
    (ids are only moved, counted and freed; a freed SWA entry is told by ``is None``), and at page 1 they
    hand out a token's id each (13.5 M FULL and as many SWA in 1,000 Mooncake requests). vLLM+ keeps real
    ids: at page 32 it hands out few, and its chunk run's direct paths are off on anonymous pools."""
    if _vllm_plus(policy):
        return _manager(model, policy, sizes, events)
    return radix_manager(MarconiRules, anonymous_pages=True)(model, policy, sizes, events)


def _scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    """Marconi and SGLang+ on SGLang's loop (as it ships unless its knobs say otherwise: overlap, FCFS, no
    mixed chunks): Marconi's system sits on SGLang. vLLM+ on the default loop: vLLM's scheduler gates on
    vLLM's block pool, which a radix tree of 32-token pages does not keep."""
    if _vllm_plus(policy):
        return capped_scheduler(manager, policy, sizes)
    knobs = own_knobs(policy, MarconiKnobs)
    return sglang_loop(manager, policy, sizes, knobs.overlap, knobs.schedule_policy, knobs.mixed_chunk)


_SGLANG_LOOP = ("overlap", "schedule_policy", "mixed_chunk")


def _check(policy: Policy) -> None:
    """vLLM+ runs the default loop, not SGLang's: SGLang's loop knobs away from their defaults are refused."""
    decode_interval_on_pages(policy)
    if not _vllm_plus(policy):
        return
    knobs, defaults = own_knobs(policy, MarconiKnobs), MarconiKnobs()
    changed = [name for name in _SGLANG_LOOP if getattr(knobs, name) != getattr(defaults, name)]
    if changed:
        flags = ", ".join("--" + name.replace("_", "-") for name in changed)
        raise ValueError(f"{flags}: SGLang's loop; {policy.name!r} (vLLM+) runs the default loop instead")


ENGINE = Engine(
    name="marconi",
    about="Marconi: states at branch-off points and last tokens, recency + alpha x FLOP efficiency",
    knobs=MarconiKnobs,
    presets=(
        _MARCONI,
        replace(
            _MARCONI,
            name="marconi-sglang",
            about="Marconi's SGLang+ baseline: its admission, LRU over leaves with whole-path refresh",
            own=MarconiKnobs(marconi_eviction="lru"),
        ),
        replace(
            _MARCONI,
            name="marconi-vllm",
            about="Marconi's vLLM+ baseline: a MAMBA state at every 32-token block, LRU over leaf blocks",
            page_size=32,
            own=MarconiKnobs(marconi_checkpoints="every-page", marconi_eviction="lru"),
        ),
    ),
    manager=_manager,
    anonymous_manager=_anonymous_manager,
    scheduler=_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=MarconiRules,
    check=_check,
    byte_budget=True,
)
