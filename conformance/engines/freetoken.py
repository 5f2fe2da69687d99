"""FreeToken 0.2.1's prefix cache, driven on CPU as a test oracle.

``run(scenario, preset)`` builds FreeToken's own ``CacheManager`` (``SWARadixCache`` for FULL+SWA, the GDN
``HybridRadixCache`` and ``LinearStatePool`` for FULL+MAMBA), its prefill and decode managers, and serves
the scenario's requests one at a time through the driver's copy of FreeToken's scheduler loop
(``freetoken_loop``), with a fake forward that "samples" the scenario's output tokens. Each request's
outcome is FreeToken's own usage report: ``PromptAdmittedMsg.cached_tokens`` (= the admission's
``cache_handle.cached_len``).

Needs ``pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt`` installed; FreeToken is imported only inside ``run``.
"""

from __future__ import annotations

import contextlib

from conformance.compare_steps import components_of
from conformance.scenario import EngineConfig, EngineOutcome, Scenario, arrival_steps, served_requests
from conformance.trajectory import Trajectory

ENGINE = "freetoken"
VERSION = "0.2.1"
PRESETS: dict[str, str] = {
    "freetoken": "FreeToken 0.2.1 as shipped: a finish trims the SWA of the prompt head to its last "
    "W + 16 tokens (CacheManager._cache_req_swa -> SWARadixCache.trim_head_swa, issue #200)",
    "freetoken-lazy": "FreeToken PR #488 on 0.2.1: the finish-time trim_head_swa call removed, the re-stamp "
    "of the prompt path kept",
}
CHUNK_SIZE = 64  # freetoken.kernel.fla.chunk.CHUNK_SIZE: the GDN scan chunk, where its snapshots land
_COMPONENTS = ("full+swa", "full+mamba")


def accepts(config: EngineConfig) -> str | None:
    """Why FreeToken 0.2.1 would not run this configuration (its own rules), or None."""
    if config.components == "full+swa+mamba":
        return (
            "FreeToken has no three-component cache: CacheManager runs either an SWARadixCache "
            "(swa_radix) or a GDN HybridRadixCache (hybrid_radix), never both"
        )
    if config.components not in _COMPONENTS:
        return f"unknown layer mix {config.components!r}; FreeToken serves {' or '.join(_COMPONENTS)}"
    for knob in ("page_size", "chunked_prefill_size", "swa_eviction_interval"):
        if getattr(config, knob) < 1:
            return f"{knob} must be >= 1, got {getattr(config, knob)}"
    if config.full_tokens < config.page_size:
        return f"a FULL pool of {config.full_tokens} tokens holds no {config.page_size}-token page"
    if config.has_swa:
        return _swa_rule(config)
    return _gdn_rule(config)


def _swa_rule(config: EngineConfig) -> str | None:
    if config.page_size != 1:
        return f"SWA models support only page_size=1 (engine _adjust_config), got {config.page_size}"
    if config.window < 1:
        return f"SWARadixCache needs a positive sliding window, got {config.window}"
    if config.swa_tokens < 1:
        return "the SWA pool has no usable slot"
    return None


def _gdn_rule(config: EngineConfig) -> str | None:
    if CHUNK_SIZE % config.page_size:
        return f"hybrid_radix needs CHUNK_SIZE({CHUNK_SIZE}) % page_size({config.page_size}) == 0"
    if config.mamba_chunk != CHUNK_SIZE:
        return f"FreeToken's GDN scan chunk is fixed at CHUNK_SIZE={CHUNK_SIZE}, not {config.mamba_chunk}"
    return None


def run(scenario: Scenario, preset: str = "freetoken") -> dict[str, EngineOutcome]:
    """Per request, what FreeToken's cache report says; a request it cannot serve has ``served=False``."""
    if preset not in PRESETS:
        raise ValueError(f"unknown FreeToken preset {preset!r}; choose from {', '.join(PRESETS)}")
    reason = accepts(scenario.config)
    if reason is not None:
        raise ValueError(f"{scenario.name}: FreeToken does not run this configuration: {reason}")
    import torch

    from conformance.engines.freetoken_engine import build
    from conformance.engines.freetoken_loop import serve_all

    with contextlib.ExitStack() as stack, torch.inference_mode():
        _enter_engine_context(stack, scenario.config)
        engine = build(scenario.config)
        _trim_premise(engine.cache_manager, scenario.config, preset)
        if preset == "freetoken-lazy":
            _without_finish_trim(engine.cache_manager)
        return serve_all(engine, served_requests(scenario), scenario.config.overlap)


def run_steps(scenario: Scenario, preset: str = "freetoken") -> Trajectory:
    """The scenario's requests arriving at their steps (the trace's ``arrival``), many in flight: FreeToken's
    steps and outcomes on a step clock (``freetoken_steps``)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown FreeToken preset {preset!r}; choose from {', '.join(PRESETS)}")
    reason = accepts(scenario.config)
    if reason is not None:
        raise ValueError(f"{scenario.name}: FreeToken does not run this configuration: {reason}")
    import torch

    from conformance.engines.freetoken_engine import build
    from conformance.engines.freetoken_steps import serve_steps

    with contextlib.ExitStack() as stack, torch.inference_mode():
        _enter_engine_context(stack, scenario.config)
        engine = build(scenario.config)
        _trim_premise(engine.cache_manager, scenario.config, preset)
        if preset == "freetoken-lazy":
            _without_finish_trim(engine.cache_manager)
        requests = served_requests(scenario)
        return serve_steps(
            engine, requests, arrival_steps(scenario), scenario.config.overlap, components_of(scenario)
        )


def run_as(config: EngineConfig, preset: str) -> str:
    """The preset whose engine run ``preset``'s is (``conformance.engine_runs``): "freetoken-lazy" changes
    the engine only where its cache manager is SWA's (``_without_finish_trim``); without SWA it is one run."""
    return "freetoken" if preset in PRESETS and not config.has_swa else preset


def _trim_premise(cache_manager, config: EngineConfig, preset: str) -> None:
    """``run_as``'s premise, read off the engine FreeToken built: its cache is SWA's exactly with SWA."""
    if cache_manager.is_swa != config.has_swa:
        raise RuntimeError(f"{preset}: FreeToken's cache has is_swa={cache_manager.is_swa} for {config}")


def _enter_engine_context(stack: contextlib.ExitStack, config: EngineConfig) -> None:
    from conformance.engines.freetoken_engine import (
        counter_clock,
        one_torch_thread,
        quiet_idle_log,
        swa_eviction_interval,
    )

    stack.enter_context(one_torch_thread())
    stack.enter_context(counter_clock())
    stack.enter_context(quiet_idle_log())
    stack.enter_context(swa_eviction_interval(config.swa_eviction_interval))


def _without_finish_trim(cache_manager) -> None:
    """PR #488: ``_cache_req_swa(finished=True)`` no longer calls ``trim_head_swa`` (its only caller). The
    call's result goes to ``_free_swa``, so a tree whose ``trim_head_swa`` frees nothing and splits nothing
    is exactly the call removed; the re-stamp ``match_prefix(ids[:prompt_len])`` after it still runs."""
    prefix_cache = cache_manager.prefix_cache
    if cache_manager.is_swa:
        prefix_cache.trim_head_swa = lambda input_ids, keep_from: prefix_cache.empty


def installed_version() -> str | None:
    """FreeToken's version if it is importable, else None."""
    try:
        from freetoken.version import __version__
    except ImportError:
        return None
    return __version__
