"""SGLang 0.5.23 on CPU: the import stubs, the server arguments a user would pass, and the real pools and
tree cache sized exactly from an ``EngineConfig``.

Nothing here is cache policy: the stubs stand in for a CUDA-only image library and a CUDA-only tensor
call; the pools, allocators and ``UnifiedRadixCache`` are SGLang's own classes.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from conformance.scenario import EngineConfig

MAMBA_SLOTS_PER_REQUEST = 5  # _calculate_mamba_ratio: 3 + 2 ping-pong track slots (extra_buffer, overlap)
MAX_REQ_ROWS = 8  # req_to_token rows built (requests run one at a time; the rows never bind)
CONTEXT_LEN = 1 << 20  # the model's context length: large, so only the KV pool bounds a request
VOCAB_SIZE = 1 << 20


def mamba_cache_chunk(config: EngineConfig) -> int:
    """``mamba_cache_chunk_size``: max(the model's ``mamba_chunk_size``, page_size)."""
    return max(config.mamba_chunk, config.page_size)


def extra_buffer(config: EngineConfig) -> bool:
    """``mamba_extra_buffer_of``: the ping-pong track slots, only where the radix cache is on."""
    return config.has_mamba and not config.disable_radix_cache


def mamba_slots_per_request(config: EngineConfig) -> int:
    """``_calculate_mamba_ratio``: 1 with the radix cache disabled."""
    return 1 if config.disable_radix_cache else MAMBA_SLOTS_PER_REQUEST


def accepts(config: EngineConfig) -> str | None:
    """Why SGLang 0.5.23 refuses to start with this configuration (its own checks), or None."""
    page, chunk = config.page_size, config.mamba_chunk
    if config.components not in ("full+swa", "full+mamba", "full+swa+mamba"):
        return f"components {config.components!r}: SGLang's hybrid tree is FULL + SWA and/or MAMBA"
    if page < 1 or config.chunked_prefill_size < 1:
        return "page_size and chunked_prefill_size must be positive"
    if config.chunked_prefill_size % page:
        return "validation_hook: chunked_prefill_size must be divisible by page_size"
    if config.has_swa and (config.window < 1 or config.swa_tokens < page):
        return "hybrid SWA needs a window and an SWA pool of at least one page"
    if config.full_tokens < page:
        return "the FULL pool holds no page"
    if config.has_mamba:
        if config.track_interval % page:
            return "validate_mamba_extra_buffer: mamba_track_interval % page_size != 0"
        if max(chunk, page) % min(chunk, page):
            return "mamba_cache_chunk_size: chunk_size and page_size must divide one another"
        slots = mamba_slots_per_request(config)
        if config.mamba_states // slots < 1:
            return (
                f"resolve_max_num_reqs: {config.mamba_states} MAMBA states // {slots} slots per "
                "request = 0 running requests ('state cache is too small to serve any requests')"
            )
    return None


class Pools(NamedTuple):
    # SGLang's own objects, imported lazily (the engine is optional): typed as SGLang leaves them
    tree_cache: Any
    allocator: Any
    req_to_token_pool: Any
    max_running_requests: int


def server_args(config: EngineConfig):
    """The command line a user would give: page size, chunk, track interval, the default strategy for paged
    hybrid models under the overlap scheduler (``auto`` resolves to ``extra_buffer``)."""
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(
        model_path="dummy",
        page_size=config.page_size,
        chunked_prefill_size=config.chunked_prefill_size,
        mamba_track_interval=config.track_interval,
        mamba_radix_cache_strategy="extra_buffer" if config.has_mamba else "auto",
        disable_radix_cache=config.disable_radix_cache,
        max_mamba_cache_size=config.mamba_states if config.has_mamba else None,
    )
    # what overrides.mamba_cache_chunk_size derives from the HF config (no HF config is loaded here)
    args._mamba_cache_chunk_size = mamba_cache_chunk(config)
    return args


def max_running_requests(config: EngineConfig) -> int:
    """KVCacheConfigurator.resolve_max_num_reqs: --max-running-requests if given (``max_running``), else an
    estimate from the pool, at most half the FULL pool's tokens, and capped by the MAMBA pool."""
    estimated = max(min(int(config.full_tokens / CONTEXT_LEN * 512), 4096), 2048)
    limit = min(config.max_running or estimated, config.full_tokens // 2)
    if config.has_mamba:
        limit = min(limit, config.mamba_states // mamba_slots_per_request(config))
    return limit


def build_pools(config: EngineConfig, max_context_len: int, num_requests: int = MAX_REQ_ROWS) -> Pools:
    """``num_requests``: how many can run at once at most (the request rows are built for that many, or for
    SGLang's own limit where it is lower, so they bind exactly where SGLang's would)."""
    import torch
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
    from sglang.srt.server_args import set_global_server_args_for_scheduler

    set_global_server_args_for_scheduler(server_args(config))
    layers = _layer_ids(config)
    rows = min(max_running_requests(config), max(num_requests, 1))
    req_pool = _req_to_token_pool(config, layers, rows, max_context_len)
    allocator = _allocator(config, layers, req_pool, torch.float32)
    components = (
        [ComponentType.FULL] + [ComponentType.SWA] * config.has_swa + [ComponentType.MAMBA] * config.has_mamba
    )
    params = CacheInitParams(
        req_to_token_pool=req_pool,
        token_to_kv_pool_allocator=allocator,
        page_size=config.page_size,
        disable=config.disable_radix_cache,
        sliding_window_size=config.window if config.has_swa else None,
        tree_components=tuple(components),
        enable_mamba_extra_buffer=extra_buffer(config),
        chunked_prefill_size=config.chunked_prefill_size,
    )
    return Pools(UnifiedRadixCache(params=params), allocator, req_pool, max_running_requests(config))


def _layer_ids(config: EngineConfig) -> dict[str, list[int]]:
    """One layer per kind (the policy reads no tensor): FULL 0, then SWA, then MAMBA."""
    ids = {"full": [0], "swa": [], "mamba": []}
    if config.has_swa:
        ids["swa"] = [1]
    if config.has_mamba:
        ids["mamba"] = [1 + config.has_swa]
    return ids


def _req_to_token_pool(config: EngineConfig, layers: dict, rows: int, max_context_len: int):
    from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool, ReqToTokenPool

    if not config.has_mamba:
        return ReqToTokenPool(
            size=rows, max_context_len=max_context_len, device="cpu", enable_memory_saver=False
        )
    from sglang.srt.configs.mamba_utils import Mamba2CacheParams, Mamba2StateShape
    from sglang.srt.environ import envs

    with envs.SGLANG_MAMBA_SSM_DTYPE.override("float32"):
        shape = Mamba2StateShape.create(
            tp_world_size=1,
            intermediate_size=2,
            n_groups=1,
            num_heads=1,
            head_dim=2,
            state_size=1,
            conv_kernel=2,
        )
        params = Mamba2CacheParams(shape=shape, layers=layers["mamba"])
    return HybridReqToTokenPool(
        size=rows,
        mamba_size=config.mamba_states,
        mamba_spec_state_size=rows,
        max_context_len=max_context_len,
        device="cpu",
        enable_memory_saver=False,
        cache_params=params,
        mamba_layer_ids=layers["mamba"],
        enable_mamba_extra_buffer=extra_buffer(config),
        enable_overlap_schedule=True,
    )


def _allocator(config: EngineConfig, layers: dict, req_pool, dtype):
    """KVCacheConfigurator._build_token_to_kv_pool_allocator's choice for these models."""
    from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
    from sglang.srt.mem_cache.memory_pool import HybridLinearKVPool
    from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

    page = config.page_size
    if config.has_swa:
        kv = SWAKVPool(
            size=config.full_tokens,
            size_swa=config.swa_tokens,
            page_size=page,
            dtype=dtype,
            head_num=1,
            head_dim=1,
            swa_attention_layer_ids=layers["swa"],
            full_attention_layer_ids=layers["full"],
            device="cpu",
        )
        return SWATokenToKVPoolAllocator(
            config.full_tokens,
            config.swa_tokens,
            page_size=page,
            dtype=dtype,
            device="cpu",
            kvcache=kv,
            need_sort=False,
            req_to_token_pool=req_pool,
        )
    kv = HybridLinearKVPool(
        size=config.full_tokens,
        dtype=dtype,
        page_size=page,
        head_num=1,
        head_dim=1,
        full_attention_layer_ids=layers["full"],
        device="cpu",
        enable_memory_saver=False,
        mamba_pool=req_pool.mamba_pool,
    )
    return PagedTokenToKVPoolAllocator(
        config.full_tokens, page_size=page, dtype=dtype, device="cpu", kvcache=kv, need_sort=False
    )


def track_grid(config: EngineConfig) -> int:
    """runtime_context.mamba_track_grid: where decode checkpoints land."""
    grid = math.lcm(mamba_cache_chunk(config), config.page_size)
    return math.lcm(grid, config.track_interval)
