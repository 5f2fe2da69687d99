"""vLLM 0.33.0 (``vllm/v1/core/``): no radix tree but a cache of its own (``sim/cache/blocks/``): one block
pool with one free queue shared by every KV cache group, align-mode Mamba, the retention interval and the
junction; batch defaults and the GDN prefill backend settled from the GPU as ``vllm serve`` does."""

from __future__ import annotations

from sim.cache.blocks.defaults import settle_for_gpu
from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.blocks.layout import policy_layout
from sim.cache.blocks.manager import BlockCacheManager
from sim.cache.blocks.sizing import shared_pool_sizes
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.policy import Policy
from sim.cache.resolve import describe_resolved, resolve
from sim.cache.sizing import PoolOptions, PoolSizes
from sim.engines.entry import Engine
from sim.models import ModelSpec
from sim.sched.default import DefaultScheduler
from sim.sched.interface import Scheduler


def _manager(model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus) -> CacheModel:
    return BlockCacheManager(model, policy, sizes, events)


def _scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    """The default loop under ``max_num_seqs`` alone (vLLM has no MAMBA pool to cap by)."""
    return DefaultScheduler(manager, policy.chunked_prefill_size, policy.max_running_requests)


def _pool_sizes(config: PoolOptions, model: ModelSpec, policy: Policy) -> PoolSizes:
    return shared_pool_sizes(model, policy, int(config.kv_memory_gb * 2**30), config.pool_tokens)


def _describe(policy: Policy, model: ModelSpec, gpu: str) -> str:
    """The knobs, then what ``vllm serve`` settles on ``gpu`` for ``model``: block size, groups, token budget."""
    settled = settle_for_gpu(policy, gpu, frozenset())
    layout = policy_layout(model, settled)
    head = describe_resolved(resolve(policy, model)).split("; resolved:")[0]
    return (
        f"{head}; resolved on {gpu}: block size {layout.block_size}, groups {' '.join(layout.group_kinds)}, "
        f"window {layout.window}, prefill checkpoints {bool(layout.checkpoint_blocks)}, "
        f"max_num_batched_tokens {settled.chunked_prefill_size}"
    )


# vLLM 0.33.0 as `vllm serve` starts it: --block-size unset (16, raised for Mamba hybrids), the batch defaults
# and the GDN prefill backend of the GPU (settle_for_gpu), retention interval 0
ENGINE = Engine(
    name="vllm",
    about="vLLM 0.33.0: one shared block pool, align-mode Mamba, retention interval, junction, async scheduling",
    knobs=VllmKnobs,
    presets=(
        Policy(
            name="vllm",
            engine="vllm",
            page_size=16,
            chunked_prefill_size=8192,
            max_running_requests=1024,
            about="vLLM 0.33.0 defaults: one shared block pool with one free queue, align-mode Mamba, retention "
            "interval 0, the shared-prefix junction, async scheduling",
            own=VllmKnobs(),
        ),
    ),
    manager=_manager,
    scheduler=_scheduler,
    pool_sizes=_pool_sizes,
    settle_for_gpu=settle_for_gpu,
    describe=_describe,
    executes="execute runs the radix cache manager's FULL / SWA / MAMBA pools; policy {policy!r} runs vllm's "
    "own cache (one shared block pool, sim/cache/blocks), whose block tables the executor's pools do not model: "
    "use `simulate` for it",
)
