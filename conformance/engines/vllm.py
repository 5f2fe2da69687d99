"""vLLM 0.33.0 as a conformance oracle: its real v1 scheduler, KVCacheManager, HybridKVCacheCoordinator and
BlockPool on CPU (no model forward), serving a scenario one request at a time with teacher-forced outputs.

Install: pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt. The call order and every stub: docs/conformance-vllm.md.
"""

from __future__ import annotations

import os

from conformance.compare_steps import components_of
from conformance.scenario import (
    EngineConfig,
    EngineOutcome,
    Scenario,
    ServedRequest,
    arrival_steps,
    served_requests,
)
from conformance.trajectory import Trajectory

ENGINE = "vllm"
PRESETS = {"vllm": "vLLM 0.33.0 defaults"}
# vLLM on a CUDA GPU turns async scheduling on by default (VllmConfig.__post_init__), which overlaps two
# batches; False runs EngineCore.step instead (for checking that the overlap does not change a hit).
ASYNC_SCHEDULING = True


def accepts(config: EngineConfig) -> str | None:
    """Why vLLM refuses this configuration (its own start-up checks), or None."""
    from conformance.engines import vllm_build

    reason = vllm_build.config_error(config)
    if reason is not None:
        return reason
    _quiet()
    try:
        vllm_build.scheduler(config, ASYNC_SCHEDULING)
    except (ValueError, AssertionError) as error:
        return f"vLLM refuses the configuration: {error}"
    return None


def run(
    scenario: Scenario, preset: str = "vllm", async_scheduling: bool = ASYNC_SCHEDULING
) -> dict[str, EngineOutcome]:
    """Per request (serving order): the prompt tokens vLLM reports as prefix-cache hits."""
    if preset not in PRESETS:
        raise ValueError(f"unknown vllm preset {preset!r}; choose from {', '.join(PRESETS)}")
    reason = accepts(scenario.config)
    if reason is not None:
        raise ValueError(f"{scenario.name}: {reason}")
    from conformance.engines import vllm_build
    from conformance.engines.vllm_loop import EngineLoop

    scheduler, hash_block_size = vllm_build.scheduler(scenario.config, async_scheduling)
    loop = EngineLoop(scheduler, scheduler.vllm_config.max_concurrent_batches)
    make_request = request_factory(hash_block_size)
    outcomes = {}
    for served in served_requests(scenario):
        outcomes[served.request_id] = EngineOutcome(loop.serve(served, make_request))
    return outcomes


def run_steps(scenario: Scenario, preset: str = "vllm") -> Trajectory:
    """The scenario's requests arriving at their steps (the trace's ``arrival``), many in flight: vLLM's steps
    and outcomes on a step clock (``vllm_steps``); async scheduling as ``config.overlap`` says."""
    async_scheduling = scenario.config.overlap
    if preset not in PRESETS:
        raise ValueError(f"unknown vllm preset {preset!r}; choose from {', '.join(PRESETS)}")
    reason = accepts(scenario.config)
    if reason is not None:
        raise ValueError(f"{scenario.name}: {reason}")
    from conformance.engines import vllm_build
    from conformance.engines.vllm_steps import serve_steps

    scheduler, hash_block_size = vllm_build.scheduler(scenario.config, async_scheduling)
    return serve_steps(
        scheduler,
        scheduler.vllm_config.max_concurrent_batches,
        served_requests(scenario),
        arrival_steps(scenario),
        request_factory(hash_block_size),
        components_of(scenario),
    )


def request_factory(hash_block_size: int):
    """Requests as EngineCore.add_request builds them: the block hasher of the configured hash
    (prefix_caching_hash_algo, sha256 by default), max_tokens = the scenario's output length."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    hash_fn = get_hash_fn_by_name("sha256")
    init_none_hash(hash_fn)
    block_hasher = get_request_block_hasher(hash_block_size, hash_fn)

    def make(served: ServedRequest) -> Request:
        params = SamplingParams(max_tokens=len(served.output), ignore_eos=True)
        return Request(
            served.request_id, list(served.prompt), params, None, arrival_time=0.0, block_hasher=block_hasher
        )

    return make


def _quiet() -> None:
    """vLLM logs every start-up decision at INFO; a conformance run starts one engine per scenario."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
