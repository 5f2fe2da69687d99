"""The simulator's side of a conformance check: a scenario through ``simulate``, per-request cached tokens.

The model is built from the scenario's layer mix (FULL plus SWA and/or MAMBA, its window and scan chunk);
the pools are exactly the engine's (no SWA floor added), so eviction happens where the engine's does.
"""

from __future__ import annotations

from typing import NamedTuple

from conformance.engines.sglang_runtime import max_running_requests as sglang_max_running
from conformance.engines.vllm_build import max_num_seqs as vllm_max_num_seqs
from conformance.scenario import EngineOutcome, Scenario
from sim.cache.sizing import PoolSizes
from sim.engines.registry import PRESETS, make_policy
from sim.gc_pause import collector_paused
from sim.models import FULL, MAMBA, SWA, ModelSpec, get_model
from sim.run.setup import RunSetup
from sim.run.simulate import SimConfig, run_replay, run_timed

MODES = ("replay", "timed")


class Disagreement(NamedTuple):
    request_id: str
    mode: str
    engine: EngineOutcome
    simulated: EngineOutcome


# vLLM's oracle declares one KV head of 8 and a Mamba state far below one attention page
# (conformance/engines/vllm_build.py), so the block size it derives is the scenario's page_size
_VLLM_SHAPES = dict(num_kv_heads=1, head_dim=8, mamba_num_heads=2, mamba_head_dim=4, mamba_state_dim=4)


def model_for(scenario: Scenario) -> ModelSpec:
    config = scenario.config
    kinds = [FULL] + ([SWA] if config.has_swa else []) + ([MAMBA] if config.has_mamba else [])
    shapes = {}
    if scenario.engine == "vllm":
        shapes = dict(_VLLM_SHAPES, num_kv_heads=config.swa_kv_heads, full_num_kv_heads=config.full_kv_heads)
    return get_model("tiny").replace(
        name=f"conformance-{config.components}",
        layer_kinds=tuple(kinds),
        window=config.window,
        mamba_chunk=config.mamba_chunk,
        **shapes,
    )


def policy_knobs(scenario: Scenario, preset: str) -> dict:
    config = scenario.config
    knobs: dict[str, object] = {
        "page_size": config.page_size,
        "track_interval": config.track_interval,
        "window": config.window,
        "mamba_chunk": config.mamba_chunk,
        "chunked_prefill_size": config.chunked_prefill_size,
        "swa_eviction_interval": config.swa_eviction_interval,
    }
    if PRESETS[preset].engine == "freetoken":
        knobs["overlap"] = config.overlap
    if PRESETS[preset].engine in ("sglang", "none"):  # the driver's resolve_max_num_reqs and event loop
        knobs.update(
            max_running_requests=sglang_max_running(config),
            overlap=config.overlap,
            schedule_policy=config.schedule_policy,
            mixed_chunk=config.mixed_chunk,
        )
    if PRESETS[preset].engine == "vllm":
        knobs.update(
            max_running_requests=vllm_max_num_seqs(config),
            async_scheduling=config.overlap,
            long_prefill_token_threshold=config.long_prefill_threshold,
            retention_interval="none" if config.retention_interval is None else config.retention_interval,
            prefill_checkpoints=config.prefill_checkpoints,
            max_model_len=config.max_model_len,
        )
    return knobs


def pool_sizes(scenario: Scenario, preset: str) -> PoolSizes:
    """The engine's pools exactly (vLLM: its one pool of num_blocks blocks, the null block included)."""
    config, page = scenario.config, scenario.config.page_size
    if PRESETS[preset].engine == "vllm":
        return PoolSizes(0, 0, 0, blocks=config.num_blocks)
    return PoolSizes(
        config.full_tokens // page,
        config.swa_tokens // page if config.has_swa else 0,
        config.mamba_states if config.has_mamba else 0,
    )


def simulated(scenario: Scenario, preset: str, mode: str) -> dict[str, EngineOutcome]:
    """Per request: what ``simulate`` predicts the engine's cache report says."""
    model = model_for(scenario)
    policy = make_policy(preset, **policy_knobs(scenario, preset))
    sizes = pool_sizes(scenario, preset)
    # the offline bounds are not compared: skipping them halves the simulate side
    sim_config = SimConfig(policy=preset, model="tiny", gpu="h200", mode=mode, bounds=False)
    with collector_paused():
        run = run_replay if mode == "replay" else run_timed
        result = run(scenario.trace(), RunSetup(sim_config, model, policy, sizes))
    outcomes = {}
    for row in result.requests.itertuples():
        refused = bool(row.rejected)
        outcomes[row.id] = EngineOutcome(0 if refused else int(row.cached_tokens), not refused, row.rejected)
    return outcomes


def disagreements(
    scenario: Scenario, preset: str, engine: dict[str, EngineOutcome], modes=MODES
) -> list[Disagreement]:
    """Every request whose cached tokens (or whether it was served) differ, per mode."""
    found = []
    for mode in modes:
        ours = simulated(scenario, preset, mode)
        for request_id, theirs in engine.items():
            mine = ours[request_id]
            if (mine.served, mine.cached_tokens) != (theirs.served, theirs.cached_tokens):
                found.append(Disagreement(request_id, mode, theirs, mine))
    return found
