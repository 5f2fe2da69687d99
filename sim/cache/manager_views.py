"""What callers read of a radix cache manager (``CacheModel``'s views): pool usage and capacities, page
tables, evictions, why a request could never fit, the integrity check, and the watcher of match misses."""

from __future__ import annotations

from typing import Any

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.events import EventBus
from sim.cache.integrity import check_integrity
from sim.cache.misses import TreeMissTracker
from sim.cache.pools import Pool, PoolUsage
from sim.cache.request import RequestCache
from sim.cache.resolve import Resolved
from sim.cache.sizing import PoolSizes, sequence_refusal
from sim.cache.tree import RadixTree
from sim.trace.trace import Trace


class ManagerViews:
    """The first of ``CacheManager``'s bases (views <- step plans <- plain decodes <- manager: one line of
    classes, as the compiled core takes single inheritance only); declares the attributes all of them use."""

    rules: Any  # EngineRules: its reserve() takes the manager itself, which satisfies RadixOps
    policy: Any  # Policy
    topology: Any  # SeparatePools or ByteBudget
    tree: RadixTree
    pools: dict[Component, Pool]
    requests: dict[str, RequestCache]
    resolved: Resolved
    events: EventBus
    sizes: PoolSizes
    page_size: int
    has_swa: bool
    has_mamba: bool
    _checkpoint_saved: list
    _pass_open: bool = False  # a scheduling pass began and no step completed since (``passes.py``)

    def usage(self) -> dict[Component, PoolUsage]:
        return self.topology.usage(self.tree)

    def page_tables(self, request_id: str) -> tuple[list[int], list[int | None]]:
        """FULL and SWA page ids of the request's positions (None where SWA is freed)."""
        return self.requests[request_id].page_tables()

    def capacities(self) -> dict[Component, int]:
        """Each pool's size (with one byte budget, each is sized to the whole budget)."""
        held = {FULL: True, SWA: self.has_swa, MAMBA: self.has_mamba}
        return {comp: pool.size if held[comp] else 0 for comp, pool in self.pools.items()}

    def num_evictions(self) -> dict[Component, int]:
        """Nodes each component's eviction took."""
        return dict(self.tree.num_evictions)

    @property
    def requeues_lone_request(self) -> bool:
        return self.rules.requeues_lone_request

    def never_fits(self, prompt_len: int, output_len: int) -> str | None:
        states = self.rules.admission_states if self.has_mamba else 0
        return sequence_refusal(prompt_len + output_len, self.page_size, states, self.sizes)

    def check_integrity(self) -> None:
        check_integrity(self)

    def watch_misses(self, trace: Trace | None = None) -> TreeMissTracker:  # every event recorded
        request_seq = trace.request_seq if trace is not None else None  # a deferred entry's tokens
        return TreeMissTracker(self.tree, self.resolved, self.events, request_seq)
