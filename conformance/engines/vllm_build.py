"""vLLM 0.33.0's engine start-up, minus the model: the real config objects, the real KV cache planner and the
real (async) scheduler with its KVCacheManager, HybridKVCacheCoordinator and BlockPool.

What vLLM would read from a model and a GPU is supplied here instead (every stub is listed in
docs/conformance-vllm.md):
* one layer per kind, named like a model's layers, with tiny shapes; what matters to the cache is the
  spec kind, the block size, the window and that every group has one page size (vLLM pads the Mamba page to
  the attention page, Platform._align_hybrid_block_size; here the padding is set the same way);
* a `ModelConfig` stand-in holding the attributes the scheduler and the planner read (text-only, generative);
* the platform's decisions for a CUDA GPU, which vLLM makes in VllmConfig.__post_init__ / the executor:
  hybrid KV cache manager on, async scheduling on, a KV cache layout (only tensor placement);
* a structured-output manager that accepts every token (no request uses a grammar).
"""

from __future__ import annotations

from types import SimpleNamespace

from conformance.scenario import EngineConfig

FLASH_ATTN_KERNEL_BLOCK = 16  # FlashAttention: get_supported_kernel_block_sizes() == [MultipleOf(16)]
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64  # v1/attention/backends/gdn_attn.py
MAX_NUM_SEQS = 1024  # EngineArgs.get_batch_defaults for an H100/H200-class GPU
_HEADS, _HEAD_DIM = 1, 8  # attention page: 2 * heads * head_dim * 2 bytes per token


def model_stub(max_model_len: int) -> SimpleNamespace:
    """What Scheduler.__init__, VllmConfig and the KV cache planner read from ModelConfig."""
    return SimpleNamespace(
        max_model_len=max_model_len,
        original_max_model_len=max_model_len,
        uses_mrope=False,
        runner_type="generate",
        is_diffusion=False,
        is_encoder_decoder=False,
        supports_multimodal_inputs=False,
        return_sampling_mask=False,
        supports_kv_cache_grouping=False,
        multimodal_config=None,
    )


def vllm_config(config: EngineConfig, async_scheduling: bool = True):
    import vllm.config as cfg

    cache = cfg.CacheConfig(
        block_size=config.page_size,
        enable_prefix_caching=True,
        mamba_cache_mode="align" if config.has_mamba else "none",
        mamba_block_size=config.page_size if config.has_mamba else None,
        prefix_cache_retention_interval=config.retention_interval,
        num_gpu_blocks_override=config.num_blocks,
    )
    scheduler = cfg.SchedulerConfig(
        max_model_len=config.max_model_len,
        is_encoder_decoder=False,
        max_num_batched_tokens=config.chunked_prefill_size,
        max_num_seqs=max_num_seqs(config),
        async_scheduling=async_scheduling,
        long_prefill_token_threshold=config.long_prefill_threshold,
    )
    vllm = cfg.VllmConfig(
        cache_config=cache, scheduler_config=scheduler, device_config=cfg.DeviceConfig(device="cpu")
    )
    # CudaPlatform.support_hybrid_kv_cache() is True; this CPU host's platform is "unspecified" and False.
    vllm.scheduler_config.disable_hybrid_kv_cache_manager = False
    vllm.cache_config.kv_cache_layout = "NHD"  # resolve_kv_cache_layout's pick; it places tensors only
    object.__setattr__(vllm, "model_config", model_stub(config.max_model_len))
    return vllm


def layer_specs(config: EngineConfig) -> dict:
    """One layer of each kind in the scenario, as the model's layers would declare them."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheSpec, MambaSpec, SlidingWindowSpec

    block, dtype = config.page_size, torch.bfloat16
    full = FullAttentionSpec(
        block_size=block, head_size=_HEAD_DIM, dtype=dtype, num_kv_heads=_HEADS * config.full_kv_heads
    )
    specs: dict[str, KVCacheSpec] = {"model.layers.0.self_attn.attn": full}
    if config.has_swa:
        swa_heads = _HEADS * config.swa_kv_heads
        specs["model.layers.1.self_attn.attn"] = SlidingWindowSpec(
            block_size=block,
            head_size=_HEAD_DIM,
            dtype=dtype,
            num_kv_heads=swa_heads,
            sliding_window=config.window,
        )
    if config.has_mamba:
        on = config.prefill_checkpoints  # off: MambaSpec's own defaults (0 blocks, no alignment)
        specs["model.layers.2.linear_attn"] = MambaSpec(
            block_size=config.page_size,
            shapes=((3, 4), (2, 4, 4)),
            dtypes=(torch.bfloat16, torch.float32),
            page_size_padded=full.page_size_bytes,
            mamba_cache_mode="align",
            num_prefill_checkpoint_blocks=1 if on else 0,
            prefill_checkpoint_alignment=config.page_size if on else None,
        )
    return specs


def kv_cache_config(vllm, config: EngineConfig):
    """EngineCore._initialize_kv_caches without a worker: group the layers, size the pool to
    num_gpu_blocks_override (its check that one max_model_len request fits raises ValueError)."""
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs

    specs = layer_specs(config)
    groups = get_global_kv_cache_groups(vllm, [specs])
    unlimited_bytes = 1 << 50  # the override, not the memory, sets the pool size
    kv_config = get_kv_cache_configs(vllm, [specs], [unlimited_bytes], groups)[0]
    vllm.cache_config.num_gpu_blocks = kv_config.num_blocks
    return kv_config


def max_num_seqs(config: EngineConfig) -> int:
    """--max-num-seqs as given (``max_running``), else the GPU default capped at max_num_batched_tokens (vLLM
    requires max_num_seqs <= max_num_batched_tokens)."""
    return config.max_running or min(MAX_NUM_SEQS, config.chunked_prefill_size)


def config_error(config: EngineConfig) -> str | None:
    """Checks vLLM makes outside the cache manager, for choices a GPU deployment cannot reach."""
    if config.page_size % FLASH_ATTN_KERNEL_BLOCK:
        return (
            f"block size {config.page_size} is not a multiple of FlashAttention's kernel block "
            f"{FLASH_ATTN_KERNEL_BLOCK} (AttentionBackend.supports_block_size)"
        )
    if config.prefill_checkpoints and not config.has_mamba:
        return "prefill_checkpoints needs a Mamba group"
    if config.prefill_checkpoints and config.page_size % FLASHINFER_GDN_CHECKPOINT_ALIGNMENT:
        return (
            f"internal prefill checkpoints (FlashInfer GDN) align blocks to "
            f"{FLASHINFER_GDN_CHECKPOINT_ALIGNMENT}; block size {config.page_size} is not a multiple "
            "(Platform._align_hybrid_block_size)"
        )
    if config.num_blocks <= 0 or config.max_model_len <= 0:
        return "num_blocks and max_model_len must be set for vLLM (generate('vllm', ...) sets them)"
    return None


def scheduler(config: EngineConfig, async_scheduling: bool = True):
    """The scheduler EngineCore.__init__ builds, with its KVCacheManager."""
    from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes

    vllm = vllm_config(config, async_scheduling)
    kv_config = kv_cache_config(vllm, config)
    scheduler_block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_config, vllm)
    scheduler_cls = vllm.scheduler_config.get_scheduler_cls()
    grammar_free = SimpleNamespace(accept_tokens=lambda request, token_ids: True)
    built = scheduler_cls(
        vllm_config=vllm,
        kv_cache_config=kv_config,
        structured_output_manager=grammar_free,
        block_size=scheduler_block_size,
        hash_block_size=hash_block_size,
        log_stats=False,
    )
    return built, hash_block_size
