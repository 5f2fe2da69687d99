"""SGLang 0.5.23 as a conformance oracle: its real ``UnifiedRadixCache``, pools, ``Req``/``ScheduleBatch``
and ``Scheduler`` event loop, driven on CPU with a teacher-forced stand-in for the model forward.

See docs/conformance-sglang.md for the install, the call order, every stub and the knob mapping.
"""

from __future__ import annotations

from conformance.compare_steps import components_of
from conformance.engines import sglang_import, sglang_runtime
from conformance.scenario import EngineConfig, EngineOutcome, Scenario, arrival_steps, served_requests
from conformance.trajectory import Trajectory

ENGINE = "sglang"
PRESETS: dict[str, str] = {
    "sglang-retain": "SGLang 0.5.23 as shipped: UnifiedRadixCache.swa_retain_floor keeps SWA down to the "
    "request's last checkpoint - W (PR #34729)",
    "sglang": "SGLang 0.5.23 with UnifiedRadixCache.swa_retain_floor returning None (the pre-#34729 behaviour)",
}
# --disable-radix-cache (``EngineConfig.disable_radix_cache``, ``cli.py conformance sglang --concurrent --no-cache``):
# the same Scheduler over UnifiedRadixCache(disable=True), the sim's no-cache preset
NO_CACHE_PRESETS: dict[str, str] = {
    "no-cache": "SGLang 0.5.23 --disable-radix-cache: UnifiedRadixCache(disable=True) under the same Scheduler",
}


def presets_for(config: EngineConfig) -> tuple[str, ...]:
    """The presets one run of ``config`` is compared with: the cached ones, or no-cache with the cache off."""
    return tuple(NO_CACHE_PRESETS if config.disable_radix_cache else PRESETS)


def accepts(config: EngineConfig) -> str | None:
    """Why SGLang would refuse to start with this configuration, or None."""
    return sglang_runtime.accepts(config)


def run_as(config: EngineConfig, preset: str) -> str:
    """The preset whose engine run ``preset``'s is (``conformance.engine_runs``): "sglang" replaces
    ``UnifiedRadixCache.swa_retain_floor`` by ``None``, which the shipped method (it only reads) returns anyway
    unless the tree has MAMBA and a sliding window; without both, the two presets are one run."""
    if preset in PRESETS and not (config.has_swa and config.has_mamba):
        return "sglang-retain"
    return preset


def _floor_premise(pools, config: EngineConfig, preset: str) -> None:
    """``run_as``'s premise, read off the tree SGLang built: its floor is None on every call without both."""
    tree = pools.tree_cache
    floor_moves = tree.is_mamba_enabled and tree._sliding_window_size is not None
    if floor_moves != (config.has_swa and config.has_mamba):
        raise RuntimeError(f"{preset}: swa_retain_floor's premise in run_as does not hold for {config}")


def available() -> str | None:
    """None when SGLang's scheduler imports here, else why not."""
    try:
        sglang_import.import_sglang()
    except Exception as error:  # ImportError, or a missing non-cache dependency
        return f"sglang is not importable: {type(error).__name__}: {error}"
    return None


def run(scenario: Scenario, preset: str) -> dict[str, EngineOutcome]:
    """Per request: ``req.cached_tokens`` (what --enable-cache-report returns), in serving order."""
    if preset not in PRESETS:
        raise ValueError(f"unknown SGLang preset {preset!r}; choose from {', '.join(PRESETS)}")
    requests = served_requests(scenario)
    reason = accepts(scenario.config)
    if reason is not None:
        return {r.request_id: EngineOutcome(0, served=False, note=reason) for r in requests}
    sglang_import.import_sglang()
    from conformance.engines.sglang_scheduler import outcome, serve
    from conformance.engines.sglang_scheduler_build import make_scheduler

    longest = max(len(r.prompt) + len(r.output) for r in requests)
    pools = sglang_runtime.build_pools(scenario.config, longest + 2 * scenario.config.page_size)
    _floor_premise(pools, scenario.config, preset)
    if preset == "sglang":
        pools.tree_cache.swa_retain_floor = lambda req: None
    from sglang.srt.environ import envs

    with envs.SGLANG_SWA_EVICTION_INTERVAL.override(scenario.config.swa_eviction_interval):
        client = serve(make_scheduler(scenario.config, pools), requests)
    outcomes = {}
    for r in requests:
        req, stalled = client.reqs[r.request_id], client.never_admitted.get(r.request_id)
        outcomes[r.request_id] = outcome(req, stalled)
        if outcomes[r.request_id].served and (not req.finished() or list(req.output_ids) != list(r.output)):
            raise RuntimeError(f"{r.request_id}: SGLang did not commit the teacher-forced output")
    return outcomes


def run_steps(scenario: Scenario, preset: str) -> Trajectory:
    """The scenario's requests arriving at their steps (the trace's ``arrival``), many in flight: SGLang's steps
    and outcomes on a step clock (``sglang_steps``)."""
    if preset not in presets_for(scenario.config):
        choices = ", ".join(presets_for(scenario.config))
        raise ValueError(f"preset {preset!r} is not this configuration's SGLang run; choose from {choices}")
    reason = accepts(scenario.config)
    if reason is not None:
        raise ValueError(f"{scenario.name}: SGLang does not run this configuration: {reason}")
    sglang_import.import_sglang()
    from sglang.srt.environ import envs

    from conformance.engines.sglang_scheduler_build import make_scheduler
    from conformance.engines.sglang_steps import serve_steps

    requests = served_requests(scenario)
    longest = max(len(r.prompt) + len(r.output) for r in requests)
    config = scenario.config
    pools = sglang_runtime.build_pools(config, longest + 2 * config.page_size, len(requests))
    _floor_premise(pools, scenario.config, preset)
    if preset == "sglang":
        pools.tree_cache.swa_retain_floor = lambda req: None
    with envs.SGLANG_SWA_EVICTION_INTERVAL.override(config.swa_eviction_interval):
        client = serve_steps(
            make_scheduler(config, pools),
            requests,
            arrival_steps(scenario),
            components_of(scenario),
            config.page_size,
        )
    return client.trajectory()
