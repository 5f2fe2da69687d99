"""One byte budget for KV and MAMBA states together, as Marconi's simulator keeps its cache (``capacity_bytes``).

The three pools still hand out ids (the executor's tensors are indexed by them), each sized so that it alone
could fill the budget; what limits them is the bytes all three hold together. This topology does not choose
victims: the engine's rules evict (``sim/cache/engines/marconi_evict.py``) until ``shortfall`` is 0.
"""

from __future__ import annotations

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.events import EventBus
from sim.cache.pools import PoolUsage
from sim.cache.results import Refusal, new_refusal
from sim.cache.sizing import PoolSizes
from sim.cache.topology import component_pools, pool_usage
from sim.models import ModelSpec

BYTES = "bytes"  # the component name a byte shortfall is reported under


class ByteBudget:
    name = "bytes"

    def __init__(self, sizes: PoolSizes, has_swa: bool, has_mamba: bool, events: EventBus | None = None):
        if sizes.budget_bytes is None:
            raise ValueError("a byte-budget topology needs PoolSizes.budget_bytes")
        self.budget = sizes.budget_bytes
        self.unit = {
            FULL: sizes.unit_bytes[0],
            SWA: sizes.unit_bytes[1] if has_swa else 0,
            MAMBA: sizes.unit_bytes[2] if has_mamba else 0,
        }
        self.pools = component_pools(sizes, has_swa, has_mamba, events)

    def used_bytes(self) -> int:
        return sum(pool.num_used * self.unit[comp] for comp, pool in self.pools.items())

    def bytes_of(self, full_pages: int, swa_pages: int, states: int) -> int:
        return full_pages * self.unit[FULL] + swa_pages * self.unit[SWA] + states * self.unit[MAMBA]

    def shortfall(self, full_pages: int, swa_pages: int, states: int) -> int:
        """Bytes to free before ``full_pages`` + ``swa_pages`` + ``states`` fit in the budget."""
        return max(0, self.used_bytes() + self.bytes_of(full_pages, swa_pages, states) - self.budget)

    def reserve(self, tree, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        """No eviction here: a refusal when the budget cannot take the allocation now."""
        return (
            self.refusal(full_pages, swa_pages, states)
            if self.shortfall(full_pages, swa_pages, states)
            else None
        )

    def kv_room(self, has_swa: bool) -> int:
        """Pages of FULL (and as many of SWA) the budget takes now without evicting anything."""
        per_page = self.unit[FULL] + (self.unit[SWA] if has_swa else 0)
        room = (self.budget - self.used_bytes()) // per_page if per_page else self.pools[FULL].num_free
        return min(room, self.pools[FULL].num_free, self.pools[SWA].num_free if has_swa else room)

    def refusal(self, full_pages: int, swa_pages: int, states: int) -> Refusal:
        return new_refusal(
            "BYTES", self.bytes_of(full_pages, swa_pages, states), self.budget - self.used_bytes()
        )

    def usage(self, tree) -> dict[Component, PoolUsage]:
        return pool_usage(self.pools, tree)


def unit_bytes(model: ModelSpec, page_size: int) -> tuple[int, int, int]:
    """Bytes of one FULL page, one SWA page and one MAMBA state of ``model``."""
    state = model.mamba_state_bytes() if model.has_mamba else 0
    return (page_size * model.full_kv_bytes_per_token(), page_size * model.swa_kv_bytes_per_token(), state)


def byte_budget_sizes(model: ModelSpec, page_size: int, budget_bytes: int) -> PoolSizes:
    """Pools that one budget limits: each can hold as many ids as the whole budget would pay for."""
    if budget_bytes <= 0:
        raise ValueError(f"--cache-bytes must be > 0, got {budget_bytes}")
    units = unit_bytes(model, page_size)
    full, swa, state = ((budget_bytes // unit if unit else 0) for unit in units)
    if full < 1:
        raise ValueError(
            f"--cache-bytes {budget_bytes} holds less than one {page_size}-token page "
            f"({units[0]} bytes) of model {model.name!r}"
        )
    return PoolSizes(full, swa, state, budget_bytes=budget_bytes, unit_bytes=units)
