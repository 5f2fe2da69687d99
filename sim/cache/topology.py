"""How the cache's memory is laid out: which pools exist and how a reservation is met (evicting as needed).

``SeparatePools`` is SGLang's and FreeToken's layout: FULL pages, SWA pages and MAMBA states each in a pool of
its own, each evicted for its own shortfall. (vLLM's one shared block pool is another topology.)
"""
from __future__ import annotations

from sim.cache import evictor
from sim.cache.components import FULL, STATE, SWA
from sim.cache.pools import Pool, PoolUsage
from sim.cache.results import Refusal
from sim.cache.sizing import PoolSizes


class SeparatePools:
    name = "separate"

    def __init__(self, sizes: PoolSizes, has_swa: bool, has_mamba: bool, on_free: dict | None = None):
        on_free = on_free or {}
        self.pools = {
            FULL: Pool("FULL", sizes.full_pages, on_free.get(FULL)),
            SWA: Pool("SWA", sizes.swa_pages if has_swa else 0, on_free.get(SWA)),
            STATE: Pool("MAMBA", sizes.states if has_mamba else 0, on_free.get(STATE)),
        }

    def reserve(self, tree, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        """Evict until each pool can hand out what is asked, or say which cannot."""
        for comp, needed in ((FULL, full_pages), (SWA, swa_pages), (STATE, states)):
            pool = self.pools[comp]
            if needed and not evictor.ensure_free(tree, pool, comp, needed):
                return Refusal(pool.name, needed, pool.num_free)
        return None

    def usage(self, tree) -> dict[str, PoolUsage]:
        tree_held = {FULL: tree.num_full_pages, SWA: tree.num_swa_pages, STATE: tree.num_states}
        return {comp: PoolUsage(pool.num_free, pool.num_used - tree_held[comp], tree_held[comp])
                for comp, pool in self.pools.items()}


TOPOLOGIES = {SeparatePools.name: SeparatePools}
