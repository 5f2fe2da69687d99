"""Which node a component's eviction takes next: a priority over the candidates (LRU today).

The tree stamps a node per component whenever a rule refreshes it (``RadixTree.touch``) and tells the
strategy whenever a node may have become a candidate (``push``: new, unlocked, revived, lost its last
child). ``pop`` returns the best eligible candidate; what evicting it does is ``evictor``'s business.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import ClassVar

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.node import Node

# True: ``NoEviction`` reads as ``leaves_only``, so ``locks.unlock`` tells the tree of the holder's node and the
# window's childless nodes alone, not of every node its FULL pass unlocks (Marconi's: ~1.7 M ``release`` calls
# at 4,000 ``marconi-vllm`` requests, each doing nothing); False: every one told (the reference)
UNHEARD_INNER_RELEASES = True


class LRUEviction:
    """Least recently stamped first, from lazy heaps: an entry whose stamp is stale or whose node died is
    dropped when popped, and the heaps are rebuilt from their live entries when stale ones dominate (so a
    long run's memory stays proportional to the tree, not to its history)."""

    name: ClassVar[str] = "lru"
    _CHECK_EVERY = 8192  # pushes between looks at the heaps' sizes

    def __init__(self) -> None:
        self.heaps: dict[Component, list[tuple[float, int, Node]]] = {comp: [] for comp in Component}
        self._limit = dict.fromkeys(Component, 4096)
        self._until_check = self._CHECK_EVERY

    def push(self, comp: Component, node: Node, stamp: float) -> None:
        heapq.heappush(self.heaps[comp], (stamp, node.id, node))
        self._counted(1)

    def release(self, node: Node) -> None:
        """The node may be a candidate again, for each component it holds (FULL: only as a leaf)."""
        heaps, pushed = self.heaps, 0
        if not node.children:
            heapq.heappush(heaps[FULL], (node.full_stamp, node.id, node))
            pushed += 1
        if node.swa_pages is not None:
            heapq.heappush(heaps[SWA], (node.swa_stamp, node.id, node))
            pushed += 1
        if node.state is not None:
            heapq.heappush(heaps[MAMBA], (node.state_stamp, node.id, node))
            pushed += 1
        self._counted(pushed)

    def pop(self, comp: Component, eligible: Callable[[Node], bool]) -> Node | None:
        """The least recently used eligible node, or None. Ineligible entries are dropped: whatever makes a
        node eligible again (unlock, losing its last child, a touch) pushes it anew."""
        heap = self.heaps[comp]
        while heap:
            stamp, _, node = heapq.heappop(heap)
            if node.alive and stamp == stamp_of(node, comp) and eligible(node):
                return node
        return None

    def _counted(self, pushed: int) -> None:
        self._until_check -= pushed
        if self._until_check <= 0:
            self._until_check = self._CHECK_EVERY
            for comp, heap in self.heaps.items():
                if len(heap) > self._limit[comp]:
                    self._compact(comp)

    def _compact(self, comp: Component) -> None:
        live: dict[int, tuple[float, int, Node]] = {}
        for entry in self.heaps[comp]:
            node = entry[2]
            if node.alive and entry[0] == stamp_of(node, comp) and _holds(node, comp):
                live[node.id] = entry
        heap = list(live.values())
        heapq.heapify(heap)
        self.heaps[comp] = heap
        self._limit[comp] = max(4096, 4 * len(heap))


def _holds(node: Node, comp: Component) -> bool:
    if comp is FULL:
        return not node.children
    return (node.swa_pages if comp is SWA else node.state) is not None


def stamp_of(node: Node, comp: Component) -> float:
    """The node's LRU stamp for ``comp`` (``getattr(node, comp.stamp)``, read without a lookup by name)."""
    if comp is FULL:
        return node.full_stamp
    if comp is SWA:
        return node.swa_stamp
    return node.state_stamp


def set_stamp(node: Node, comp: Component, stamp: int) -> None:
    """``setattr(node, comp.stamp, stamp)``, without the lookup by name."""
    if comp is FULL:
        node.full_stamp = stamp
    elif comp is SWA:
        node.swa_stamp = float(stamp)  # a float slot (splits put a stamp between two touches)
    else:
        node.state_stamp = stamp


class NoEviction:
    """For rules that choose their victims by scanning the tree (FreeToken): nothing to keep up to date."""

    name: ClassVar[str] = "scan"

    @property
    def leaves_only(self) -> bool:
        """``RadixTree.leaves_only``: ``release`` hears nothing, so the tree may skip it for inner nodes too
        (``UNHEARD_INNER_RELEASES``)."""
        return UNHEARD_INNER_RELEASES

    def push(self, comp: Component, node: Node, stamp: float) -> None:
        pass

    def release(self, node: Node) -> None:
        pass

    def pop(self, comp: Component, eligible: Callable[[Node], bool]) -> Node | None:
        raise RuntimeError("these rules evict by scanning the tree, not from a queue")


EVICTIONS = {LRUEviction.name: LRUEviction, NoEviction.name: NoEviction}
