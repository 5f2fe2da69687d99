"""How an engine's pools read in headers and figures: which components the model has, what each is called,
its unit, how many units one count of the step table is, and its capacity; and, where pools share one
resource (vLLM's one block pool, Marconi's one byte budget), what they share. A report draws a panel per view
and titles it from here, so no report tests an engine's name or guesses a page size."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.policy import Policy
from sim.cache.resolve import resolve
from sim.cache.sizing import PoolSizes
from sim.models import ModelSpec

# the summary's peak / mean / capacity figures of each component (KV in token slots, MAMBA in states)
SUMMARY_NAMES = {FULL: "full_slots", SWA: "swa_slots", MAMBA: "mamba_states"}


@dataclass(frozen=True)
class PoolView:
    component: Component  # the step table's columns and the summary's figures it reads
    name: str  # "FULL KV", "MAMBA", "FULL groups"
    unit: str  # "tokens" or "states": the summary's unit for it
    per_count: int  # units per count of the step table (a page's or a block's tokens; 1 for states)
    capacity: int  # in units

    @property
    def figure(self) -> str:
        """The summary's name stem of this component's peak / mean / capacity (``full_slots``)."""
        return SUMMARY_NAMES[self.component]


@dataclass(frozen=True)
class PoolLayout:
    views: tuple[PoolView, ...]  # one per component the run's cache holds, FULL first
    shared: str = ""  # what the views share, said in a sentence; "" for separate pools
    eviction_unit: str = "nodes"  # what an eviction count counts
    one_pool: bool = False  # every view counts ids of one pool (vLLM's blocks): the others' share is drawn

    def view(self, component: Component) -> PoolView | None:
        return next((v for v in self.views if v.component == component), None)

    def describe(self) -> str:
        """One line for a header: each pool with its capacity, and what they share."""
        pools = ", ".join(f"{v.name} {v.capacity:,} {v.unit}" for v in self.views)
        return f"{self.shared}: {pools}" if self.shared else pools


def radix_pool_layout(model: ModelSpec, policy: Policy, sizes: PoolSizes) -> PoolLayout:
    """A radix cache's pools: one per component the policy keeps for the model, in pages of ``page_size``
    tokens (MAMBA in states); with one byte budget (``--cache-bytes``) each could take the whole of it."""
    resolved, page = resolve(policy, model), policy.page_size
    held = {FULL: True, SWA: resolved.has_swa, MAMBA: resolved.has_mamba}
    counts = {FULL: sizes.full_pages, SWA: sizes.swa_pages, MAMBA: sizes.states}
    views = tuple(
        PoolView(
            comp,
            "MAMBA" if comp == MAMBA else f"{comp.pool_name} KV",
            "states" if comp == MAMBA else "tokens",
            1 if comp == MAMBA else page,
            counts[comp] * (1 if comp == MAMBA else page),
        )
        for comp in Component
        if held[comp]
    )
    if sizes.budget_bytes is None:
        return PoolLayout(views)
    shared = f"one byte budget of {sizes.budget_bytes / 2**30:,.3g} GiB, each pool up to all of it"
    return PoolLayout(views, shared)
