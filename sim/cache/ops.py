"""Exactly what an engine's rules may use of the radix cache manager (``CacheManager`` satisfies it): the
tree, the pools and the running requests to read, and the primitives that change them."""

from __future__ import annotations

from typing import Protocol

from sim.cache.components import Component
from sim.cache.interface import CacheModel
from sim.cache.node import Node
from sim.cache.policy import Policy
from sim.cache.pools import Pool
from sim.cache.request import RequestCache
from sim.cache.results import Refusal
from sim.cache.tree import RadixTree
from sim.models import ModelSpec


class Layout(Protocol):
    """The pools' layout (``SeparatePools``, ``ByteBudget``): how a reservation is met."""

    pools: dict[Component, Pool]

    def reserve(self, tree: RadixTree, full_pages: int, swa_pages: int, states: int) -> Refusal | None: ...
    def kv_room(self, has_swa: bool) -> int: ...


class BudgetLayout(Layout, Protocol):
    """One byte budget for every pool (Marconi): what must be freed before an allocation fits."""

    def shortfall(self, full_pages: int, swa_pages: int, states: int) -> int: ...


class RadixOps(Protocol):
    policy: Policy
    model: ModelSpec
    has_swa: bool
    tree: RadixTree
    pools: dict[Component, Pool]
    requests: dict[str, RequestCache]
    topology: Layout

    def free_swa_below(self, req: RequestCache, frontier: int) -> None: ...
    def insert(self, req: RequestCache, end: int) -> None: ...
    def relock(self, req: RequestCache, node: Node) -> None: ...
    def empty_like(self, policy: Policy, anonymous_pages: bool = False) -> CacheModel: ...
