"""vLLM 0.33.0: no radix-tree rules but a cache model of its own (``sim/cache/blocks/``): one block pool with
one free queue shared by every KV cache group, a hash map of blocks per group, align-mode Mamba, the retention
interval and the junction. The registry names it here so that ``sim.cache.interface.make_manager`` builds its
manager; none of the radix hooks of ``EngineRules`` is called for it."""

from __future__ import annotations

from sim.cache.engines.base import EngineRules


class VllmRules(EngineRules):
    name = "vllm"

    @classmethod
    def check(cls, resolved) -> None:
        raise ValueError(
            "vLLM's cache is not a radix tree: the vllm preset runs BlockCacheManager "
            "(sim.cache.interface.make_manager builds it), not CacheManager"
        )

    @staticmethod
    def manager_class():
        """The cache manager this engine runs with instead of the radix ``CacheManager``."""
        from sim.cache.blocks.manager import BlockCacheManager

        return BlockCacheManager

    @staticmethod
    def settle_for_gpu(policy, gpu: str, given: set[str]):
        """The policy as ``vllm serve`` runs it on ``gpu`` (knobs the user did not give)."""
        from sim.cache.blocks.defaults import settle_for_gpu

        return settle_for_gpu(policy, gpu, given)

    @staticmethod
    def pool_sizes(model, policy, memory_bytes: int, pool_tokens: int | None):
        """One shared pool, in blocks (``sim/cache/blocks/sizing.py``)."""
        from sim.cache.blocks.sizing import shared_pool_sizes

        return shared_pool_sizes(model, policy, memory_bytes, pool_tokens)

    @staticmethod
    def describe_resolved(policy, model, gpu: str) -> str:
        """What ``vllm serve`` settles on ``gpu`` for ``model``: the block size, the groups, the token budget."""
        from sim.cache.blocks.defaults import settle_for_gpu
        from sim.cache.blocks.layout import layout_for
        from sim.cache.resolve import resolve

        settled = settle_for_gpu(policy, gpu, set())
        layout = layout_for(
            model, settled.page_size, resolve(settled, model).window, bool(settled.prefill_checkpoints)
        )
        return (
            f"resolved on {gpu}: block size {layout.block_size}, groups {' '.join(layout.group_kinds)}, "
            f"window {layout.window}, prefill checkpoints {bool(layout.checkpoint_blocks)}, "
            f"max_num_batched_tokens {settled.chunked_prefill_size}"
        )
