"""Pools for a generated scenario: exact sizes that fit it, or small ones that force eviction (``pressure``),
and vLLM's filler requests and block pool."""

from __future__ import annotations

import random
from dataclasses import replace

from conformance.scenario import EngineConfig, Scenario, one_at_a_time, trace_lines
from sim.align import ceil_div, ceil_to

SGLANG_MIN_STATES = 5


def with_pools(
    rng: random.Random,
    config: EngineConfig,
    requests: list[dict],
    pressure: bool,
    engine: str = "",
    edge: bool = False,
) -> EngineConfig:
    """``edge``: under pressure the FULL pool a few pages over the largest request's need (not up to twice it),
    so a long prompt's follow-ups evict what it left in the tree."""

    lengths = _lengths(config, requests)
    page = config.page_size
    longest = ceil_to(max(lengths), page)
    total = ceil_to(sum(lengths), page) + page * len(lengths)
    if pressure:
        full = longest + page * rng.randint(2, 8) + (0 if edge else rng.randint(0, longest))
        swa = (
            (config.window + config.chunked_prefill_size + page * rng.randint(2, 6)) if config.has_swa else 0
        )
        states = rng.randint(4, 8) if config.has_mamba else 0
        if engine == "freetoken" and config.has_swa:
            swa = max(swa, _freetoken_swa_floor(config))
    else:
        full = total * 2
        swa = total * 2 if config.has_swa else 0
        states = 4 * len(lengths) + 64 if config.has_mamba else 0
    full = ceil_to(full, page)
    swa = ceil_to(swa, page)
    return replace(config, full_tokens=full, swa_tokens=swa, mamba_states=states)


def _freetoken_swa_floor(config: EngineConfig) -> int:
    """FreeToken's SWA pool floor for one running request (``_swa_per_req_swa_floor``): the window the
    prefill commit locks (W + 16, page-rounded) plus the request's own decode tail until its first
    out-of-window free (W + interval + 2 pages). Below it FreeToken's decode exhausts the pool and raises;
    its own sizing never goes there, so pressure scenarios stay above it and still evict."""
    page = config.page_size
    return ceil_to(config.window + 16, page) + config.window + config.swa_eviction_interval + 2 * page


def with_freetoken_floors(config: EngineConfig, max_running: int = 4) -> EngineConfig:
    """FreeToken's own floors for ``max_running`` requests decoding at once, below which its loop raises
    (nothing retracts): the SWA pool holds each request's non-evictable footprint (``_swa_pool_floor``), the
    GDN pool four slots per request (``_linear_pool_min_slots``: live, two ping-pong, the committed snapshot)."""
    if config.has_swa:
        config = replace(
            config, swa_tokens=max(config.swa_tokens, max_running * _freetoken_swa_floor(config))
        )
    if config.has_mamba:
        config = replace(config, mamba_states=max(config.mamba_states, 4 * max_running))
    return config


def _lengths(config: EngineConfig, requests: list[dict]) -> list[int]:
    """Prompt plus output tokens of every request."""
    probe = Scenario("probe", "", 0, "", False, config, trace_lines(one_at_a_time(requests)))
    trace = probe.trace()
    return [trace.prompt_len(r.id) + r.output_len for r in trace]


def with_fillers(rng: random.Random, config: EngineConfig, requests: list[dict]) -> list[dict]:
    """vLLM's smallest pool still holds one longest request, and a hit is taken out of the free queue before
    anything is allocated, so serving one request at a time rarely evicts what the next one reuses. Unrelated
    fillers (a quarter to all of the longest request) between requests make the LRU order decide."""
    longest = max(_lengths(config, requests))
    with_fillers = []
    for index, request in enumerate(requests):
        with_fillers.append(request)
        if index < len(requests) - 1 and rng.random() < 0.5:
            filler = f"{request['id']}-fill"
            with_fillers.append(
                {
                    "id": filler,
                    "prompt": [{"ref": filler, "len": rng.randint(longest // 4, longest)}],
                    "output_len": rng.randint(1, 64),
                }
            )
    return with_fillers


def with_vllm_pool(
    rng: random.Random, config: EngineConfig, requests: list[dict], pressure: bool
) -> EngineConfig:
    """vLLM's knobs and its one shared pool: under pressure a few blocks above what vLLM's startup check
    demands for one request of max_model_len (so the pool evicts), else more blocks than the scenario ever
    allocates (so it never does)."""

    page = config.page_size
    lengths = _lengths(config, requests)
    scheduler_block = max(vllm_blocks(config))  # the groups' block sizes divide one another: the lcm
    max_model_len = ceil_to(max(lengths), scheduler_block) + scheduler_block
    retention = rng.choice((0, 0, 0, None, scheduler_block * rng.choice((2, 4, 8))))
    if not (config.has_swa or config.has_mamba):
        retention = 0
    checkpoints = config.has_mamba and page % 64 == 0 and rng.random() < 0.4
    config = replace(
        config, retention_interval=retention, prefill_checkpoints=checkpoints, max_model_len=max_model_len
    )
    num_groups = 1 + config.has_swa + config.has_mamba
    if pressure:
        num_blocks = vllm_min_blocks(config) + rng.randint(0, 3)
    else:
        num_blocks = max(
            vllm_min_blocks(config),
            1 + 2 * num_groups * sum(ceil_div(length, page) + 3 for length in lengths),
        )
    return replace(config, num_blocks=num_blocks)


def vllm_min_blocks(config: EngineConfig) -> int:
    """The fewest blocks vLLM 0.33.0 starts with (v1/core/kv_cache_planning.py:get_kv_cache_configs): the null
    block plus, per group, its max_memory_usage_bytes for one request of max_model_len, where a sliding
    window holds at most W-1 tokens plus the in-flight tokens of the two batches async scheduling overlaps
    (SlidingWindowSpec.max_admission_blocks_per_request) and align-mode Mamba two states plus the internal
    checkpoint (MambaSpec.max_memory_usage_bytes)."""
    (full, swa), max_len = vllm_blocks(config), config.max_model_len
    blocks = 1 + ceil_div(max_len, full)
    if config.has_swa:
        blocks += ceil_div(min(config.window - 1 + 2 * config.chunked_prefill_size, max_len), swa) + 1
    if config.has_mamba:
        blocks += 2 + config.prefill_checkpoints
    return blocks


def vllm_blocks(config: EngineConfig) -> tuple[int, int]:
    """The FULL and SWA groups' block sizes (``unify_kv_cache_spec_page_size``: a layer's page grows to the
    largest page by whole blocks; pages are proportional to KV heads here)."""
    heads = (config.full_kv_heads, config.swa_kv_heads) if config.has_swa else (config.full_kv_heads,)
    largest = max(heads)
    blocks = [config.page_size * (largest // h) if largest % h == 0 else config.page_size for h in heads]
    return blocks[0], blocks[-1]
