"""What callers read of the block cache manager: pool usage per group kind, capacities, evictions, the start-up
limit on a request's length, and the integrity check (the first of ``BlockCacheManager``'s bases)."""

from __future__ import annotations

from sim.cache.blocks import private
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.misses import BlockMissTracker
from sim.cache.blocks.pool import BlockPool
from sim.cache.components import Component
from sim.cache.events import EventBus
from sim.cache.pools import PoolUsage
from sim.trace.trace import Trace

# each component with its layer kind, read once (``usage`` runs at every engine step)
_LAYER_KINDS = tuple((comp, comp.layer_kind) for comp in Component)


class BlockViews:
    """Needs the manager's ``layout``, ``pool``, ``events``, ``num_blocks``, ``has_swa``, ``has_mamba`` and
    ``max_model_len``."""

    layout: Layout
    pool: BlockPool
    events: EventBus
    num_blocks: int
    has_swa: bool
    has_mamba: bool
    max_model_len: int
    shared_sources: frozenset[str] | None  # the trace's shared sources where the watcher is told them

    def usage(self) -> dict[Component, PoolUsage]:
        """Per group kind, in blocks of the one pool: free (unhashed, shared by all), held by running
        requests, cached in the free queue (hashed, evictable)."""
        pool = self.pool
        held, cached_free = pool.held, pool.cached_free
        empty = pool.num_free - sum(cached_free.values())
        return {
            comp: PoolUsage(empty, held.get(kind, 0), cached_free.get(kind, 0)) for comp, kind in _LAYER_KINDS
        }

    def capacities(self) -> dict[Component, int]:
        """The whole pool for every group kind the model has: each could fill it alone."""
        held = (True, self.has_swa, self.has_mamba)
        return {comp: self.num_blocks if on else 0 for comp, on in zip(Component, held, strict=True)}

    def num_evictions(self) -> dict[Component, int]:
        return {comp: self.pool.num_evictions.get(comp.layer_kind, 0) for comp in Component}

    def watch_misses(self, trace: Trace | None = None) -> BlockMissTracker:
        """Why each hit lost what it lost: evictions and retention, from the pool's events. Given the run's
        ``trace``, the blocks only their own request can hold are not told (``private.py``)."""
        if trace is not None and private.UNWATCHES_PRIVATE:
            self.shared_sources = private.shared_sources(trace)
            self.pool.marks_private = True
        return BlockMissTracker(self.layout, self.pool, self.events)

    def never_fits(self, prompt_len: int, output_len: int) -> str | None:
        """Why vLLM would never run a request of this size (it is longer than max_model_len), or None."""
        if prompt_len + output_len > self.max_model_len:
            return (
                f"prompt + output = {prompt_len + output_len} tokens exceeds vLLM's max_model_len "
                f"{self.max_model_len}"
            )
        return None

    def check_integrity(self) -> None:
        from sim.cache.blocks.integrity import check_integrity

        check_integrity(self)
