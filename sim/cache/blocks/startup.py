"""vLLM's start-up decisions that bound a run: the tokens in flight, ``max_model_len`` against the pool (the
check in ``kv_cache_planning.py:get_kv_cache_configs``), and the configuration checks vLLM refuses with."""

from __future__ import annotations

from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.blocks.layout import KERNEL_BLOCK, Layout, layout_for
from sim.cache.policy import Policy, own_knobs
from sim.models import MAMBA, SWA, ModelSpec


def in_flight_tokens(policy: Policy) -> int:
    """``VllmConfig.max_in_flight_tokens``: a full token budget per batch in flight (two under async
    scheduling)."""
    return own_knobs(policy, VllmKnobs).batches_in_flight * policy.chunked_prefill_size


def settle_max_model_len(layout: Layout, num_blocks: int, policy: Policy) -> int:
    """The given ``max_model_len`` if the pool passes vLLM's start-up check with it (else ValueError in
    vLLM's terms); when none is given, the longest the pool can serve (``estimate_max_model_len``)."""
    in_flight = in_flight_tokens(policy)
    longest = layout.longest_model_len(num_blocks, in_flight)
    wanted = own_knobs(policy, VllmKnobs).max_model_len
    threshold = own_knobs(policy, VllmKnobs).long_prefill_token_threshold
    if wanted is not None and threshold > wanted:
        raise ValueError(
            f"vLLM refuses long_prefill_token_threshold {threshold}: it cannot be greater than the max_model_len "
            f"({wanted}) (SchedulerConfig)"
        )
    if wanted is None and longest >= 1:
        return longest
    if wanted is not None and layout.min_blocks(wanted, in_flight) <= num_blocks:
        return wanted
    asked = wanted or 1
    raise ValueError(
        f"vLLM refuses to start (kv_cache_planning.py:get_kv_cache_configs): to serve at least one request with "
        f"max seq len {asked}, {layout.min_blocks(asked, in_flight)} blocks of {layout.block_size} tokens are "
        f"needed (the null block, and per group: FULL cdiv(len, B), SWA cdiv(min(W - 1 + {in_flight} tokens in "
        f"flight, len), B) + 1, Mamba 2 + checkpoint blocks), the pool has {num_blocks}; the longest max_model_len "
        f"it can serve is {longest}"
    )


def check_config(layout: Layout, policy: Policy, model: ModelSpec) -> None:
    """ValueError where vLLM 0.33.0 itself refuses the configuration, naming its rule (and what would pass)."""
    if policy.page_size % KERNEL_BLOCK:
        raise ValueError(
            f"vLLM refuses block size {policy.page_size}: not a multiple of FlashAttention's kernel "
            f"block {KERNEL_BLOCK} (AttentionBackend.supports_block_size)"
        )
    if MAMBA in layout.kinds and layout.kind_blocks:
        raise ValueError(
            "the simulator does not model vLLM with Mamba layers beside attention layers of unequal page sizes "
            f"(blocks {dict(layout.kind_blocks)}, scheduler block {layout.block_size}): align mode then cuts "
            "prefill chunks on the Mamba block but checks checkpoints on the scheduler block "
            "(Scheduler._mamba_block_aligned_split), which is not modelled"
        )
    retention = own_knobs(policy, VllmKnobs).retention_interval
    if retention and not (SWA in layout.kinds or MAMBA in layout.kinds):
        raise ValueError(
            f"vLLM refuses prefix_cache_retention_interval {retention} for a model with neither "
            "sliding-window nor Mamba groups (kv_cache_coordinator._validate_prefix_cache_"
            "retention_interval); use 0"
        )
    if retention and retention % layout.block_size:
        raise ValueError(
            f"vLLM refuses prefix_cache_retention_interval {retention}: it must be a multiple of "
            f"scheduler_block_size {layout.block_size} (kv_cache_coordinator._validate_prefix_cache_"
            f"retention_interval){_retention_hint(layout, policy, model, retention)}"
        )


def _retention_hint(layout: Layout, policy: Policy, model: ModelSpec, retention: int) -> str:
    """The nearest intervals that pass, and the block size without in-prefill checkpoints where that one
    would take ``retention`` (GDN prefill on FlashInfer aligns blocks to 64: 576, not 528, for Qwen3.5-4B)."""
    B = layout.block_size
    below, above = retention // B * B, (retention // B + 1) * B
    hint = f"; the nearest that pass are {below or above}" + (f" and {above}" if below else "")
    if layout.checkpoint_blocks:
        unaligned = layout_for(model, policy.page_size, layout.window, False).block_size
        if retention % unaligned == 0:
            hint += (
                f"; or --prefill-checkpoints off (GDN prefill without FlashInfer's checkpoints): block size "
                f"{unaligned}, of which {retention} is a multiple"
            )
    return hint
