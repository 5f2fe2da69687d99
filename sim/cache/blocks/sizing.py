"""The one shared pool's size in blocks (vLLM's ``num_gpu_blocks``, the null block included).

From memory: the KV budget over the bytes of one block id, a page in every layer of the widest group
(``kv_cache_planning.py:_get_kv_cache_bytes_per_block``: a block of every group lives in the same per-layer
tensors). From tokens:
``--pool-tokens T`` is ``floor(T / B)`` usable blocks plus the null block, i.e. the pool holds ``T`` tokens of
FULL KV when FULL alone uses it; the SWA and Mamba groups draw from the same blocks."""

from __future__ import annotations

from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.blocks.layout import layout_for
from sim.cache.policy import Policy, own_knobs
from sim.cache.resolve import resolve
from sim.cache.sizing import PoolSizes
from sim.models import FULL, ModelSpec


def shared_pool_sizes(
    model: ModelSpec, policy: Policy, memory_bytes: int, pool_tokens: int | None
) -> PoolSizes:
    layout = layout_for(
        model,
        policy.page_size,
        resolve(policy, model).window,
        bool(own_knobs(policy, VllmKnobs).prefill_checkpoints),
    )
    if pool_tokens is not None:
        blocks = pool_tokens // layout.block_of(FULL) + 1
    else:
        blocks = memory_bytes // layout.block_bytes
    return PoolSizes(0, 0, 0, blocks=blocks)
