"""vLLM 0.33.0 (``vllm/v1/core/``): no radix tree but a cache of its own (``sim/cache/blocks/``): one block
pool with one free queue shared by every KV cache group, align-mode Mamba, the retention interval and the
junction; batch defaults and the GDN prefill backend settled from the GPU as ``vllm serve`` does."""

from __future__ import annotations

from sim.cache.blocks.defaults import settle_for_gpu
from sim.cache.blocks.knobs import VllmKnobs
from sim.cache.blocks.layout import policy_layout
from sim.cache.blocks.manager import BlockCacheManager
from sim.cache.blocks.sizing import shared_pool_sizes
from sim.cache.components import Component
from sim.cache.events import EventBus
from sim.cache.interface import CacheModel
from sim.cache.policy import Policy, own_knobs
from sim.cache.resolve import describe_resolved, resolve
from sim.cache.sizing import PoolOptions, PoolSizes
from sim.engines.entry import Engine
from sim.engines.pool_views import PoolLayout, PoolView
from sim.models import FULL, MAMBA, SWA, ModelSpec
from sim.sched.interface import Scheduler
from sim.sched.vllm import VllmScheduler


def _manager(model: ModelSpec, policy: Policy, sizes: PoolSizes, events: EventBus) -> CacheModel:
    return BlockCacheManager(model, policy, sizes, events)


def _scheduler(manager: CacheModel, policy: Policy, sizes: PoolSizes) -> Scheduler:
    """vLLM's own: ``max_num_batched_tokens`` a step, ``max_num_seqs`` running, async scheduling unless off."""
    knobs = own_knobs(policy, VllmKnobs)
    return VllmScheduler(
        manager,
        policy.chunked_prefill_size,
        policy.max_running_requests,
        knobs.async_scheduling,
        knobs.long_prefill_token_threshold,
    )


def _pool_sizes(config: PoolOptions, model: ModelSpec, policy: Policy) -> PoolSizes:
    return shared_pool_sizes(model, policy, int(config.kv_memory_gb * 2**30), config.pool_tokens)


def _describe(policy: Policy, model: ModelSpec, gpu: str) -> str:
    """The knobs, then what ``vllm serve`` settles on ``gpu`` for ``model``: block size, groups, token budget."""
    settled = settle_for_gpu(policy, gpu, frozenset())
    layout = policy_layout(model, settled)
    rules = describe_resolved(resolve(policy, model)).split("; ")[0]
    knobs = ", ".join(
        f"{name} {'none' if value is None else value}"
        for name, value in policy.knob_items().items()
        if name in READS or name in VllmKnobs.specs()
    )
    head = f"{rules}; {knobs}"
    return (
        f"{head}; resolved on {gpu}: block size {layout.block_size}, groups {' '.join(layout.group_kinds)}, "
        f"window {layout.window}, prefill checkpoints {bool(layout.checkpoint_blocks)}, "
        f"max_num_batched_tokens {settled.chunked_prefill_size}"
    )


READS = frozenset(
    {"page_size", "window", "chunked_prefill_size", "max_running_requests"}
)  # of the shared knobs
_KINDS = {FULL: Component.FULL, SWA: Component.SWA, MAMBA: Component.MAMBA}


def _pool_layout(model: ModelSpec, policy: Policy, sizes: PoolSizes) -> PoolLayout:
    """One block pool every group draws from: a view per group kind the model has (KV in the tokens of its
    blocks, Mamba in states, a block each), each of which could fill the whole pool."""
    layout = policy_layout(model, policy)
    B, blocks = layout.block_size, sizes.blocks
    views = []
    for kind in (FULL, SWA, MAMBA):
        if kind in layout.kinds:
            count = layout.group_kinds.count(kind)
            mamba = kind == MAMBA
            # a group's blocks hold its own block size of tokens (unify_kv_cache_spec_page_size)
            unit, per = ("states", 1) if mamba else ("tokens", layout.block_of(kind))
            name = f"{kind.upper()} group{'s' if count > 1 else ''} ({count})"
            views.append(PoolView(_KINDS[kind], name, unit, per, blocks * per))
    groups = " ".join(layout.group_kinds)
    shared = f"one block pool of {blocks:,} blocks of {B} tokens, groups {groups}"
    return PoolLayout(tuple(views), shared, eviction_unit="blocks", one_pool=True)


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
    reads=READS,
    pool_layout=_pool_layout,
    settles=lambda model, policy: {},  # no radix grids: the block size and groups are the pool's
)
