"""How the cache's memory is laid out: which pools exist and how a reservation is met (evicting as needed).

``SeparatePools`` is SGLang's and FreeToken's layout: FULL pages, SWA pages and MAMBA states each in a pool of
its own, each evicted for its own shortfall. (vLLM's one shared block pool is another topology.)
"""

from __future__ import annotations

from sim.cache import evictor
from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.events import EventBus
from sim.cache.pools import Pool, PoolUsage, new_pool_usage
from sim.cache.results import Refusal, new_refusal
from sim.cache.sizing import PoolSizes

# False: each pool's usage made in a loop over the pools (the reference; tests/test_step_rows_lean.py holds both
# equal); True: the three pools' usages written out (asked at every full step and event step: a row's pools)
USAGE_WRITTEN_OUT = True


class SeparatePools:
    name = "separate"

    def __init__(self, sizes: PoolSizes, has_swa: bool, has_mamba: bool, events: EventBus | None = None):
        self.pools = component_pools(sizes, has_swa, has_mamba, events)

    def reserve(self, tree, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        """Evict until each pool can hand out what is asked, or say which cannot."""
        for comp, needed in (
            (FULL, full_pages),
            (SWA, swa_pages),
            (MAMBA, states),
        ):
            pool = self.pools[comp]
            if needed and not evictor.ensure_free(tree, pool, comp, needed):
                return new_refusal(pool.name, needed, pool.num_free)
        return None

    def usage(self, tree) -> dict[Component, PoolUsage]:
        return pool_usage(self.pools, tree)

    def kv_room(self, has_swa: bool) -> int:
        """Pages of FULL (and as many of SWA) that can be handed out now without evicting anything."""
        full = self.pools[FULL].num_free
        return min(full, self.pools[SWA].num_free) if has_swa else full


def component_pools(
    sizes: PoolSizes, has_swa: bool, has_mamba: bool, events: EventBus | None = None
) -> dict[Component, Pool]:
    """A pool per component, empty for a component the model does not have."""
    counts = {
        FULL: sizes.full_pages,
        SWA: sizes.swa_pages if has_swa else 0,
        MAMBA: sizes.states if has_mamba else 0,
    }
    return {comp: Pool(comp.pool_name, count, comp, events) for comp, count in counts.items()}


def pool_usage(pools, tree) -> dict[Component, PoolUsage]:
    """Each pool's free, running-held and tree-held units: what the tree holds is counted by the tree."""
    if USAGE_WRITTEN_OUT:  # ``component_pools`` makes the three, in this order
        full, swa, mamba = pools[FULL], pools[SWA], pools[MAMBA]
        in_full, in_swa, in_states = tree.num_full_pages, tree.num_swa_pages, tree.num_states
        return {
            FULL: new_pool_usage(full.num_free, full.size - full.num_free - in_full, in_full),
            SWA: new_pool_usage(swa.num_free, swa.size - swa.num_free - in_swa, in_swa),
            MAMBA: new_pool_usage(mamba.num_free, mamba.size - mamba.num_free - in_states, in_states),
        }
    tree_held = {FULL: tree.num_full_pages, SWA: tree.num_swa_pages, MAMBA: tree.num_states}
    return {
        comp: new_pool_usage(pool.num_free, pool.num_used - tree_held[comp], tree_held[comp])
        for comp, pool in pools.items()
    }
