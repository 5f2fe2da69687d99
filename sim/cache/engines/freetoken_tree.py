"""FreeToken's own tree bookkeeping: one timestamp per node, and FULL eviction from a heap kept between calls.

``SWARadixCache`` / ``HybridRadixCache`` keep a single ``timestamp`` per node (here ``full_stamp``): a match
stamps the chosen path with stamps falling toward the root (SWA) or the whole walk with one stamp (GDN); a new
or revived node gets a fresh tick; a split node's halves share one. FreeToken's own eviction is by scans
(``freetoken_scans``); a deletion takes the tombstone leaves it exposes with it (``delete_with_exposed``).

FULL eviction, the one a long run calls all the time, takes its victims from a heap kept between calls
(``LeafHeap``, ``evict_full``) instead: the same leaves in the same order, because no two candidates ever share
a stamp. Each stamp event (one tick) stamps nodes of one path from the root, a split gives its upper half the
lower half's stamp, and a tick's stamps lie below the next tick's (a path is shorter than ``EVENT_STRIDE``):
the nodes sharing a stamp lie on one root path, so at most one of them is a leaf, and a heap pops the same
sequence whatever its ties. ``evict_full_scan`` stays as FreeToken's own procedure, the reference the
property test holds ``evict_full`` to (tests/test_freetoken_leaf_heap.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from sim.cache.components import FULL, Component
from sim.cache.eviction import LRUEviction
from sim.cache.node import Node
from sim.cache.tree import RadixTree
from sim.cache.tree_runs import surface

EVENT_STRIDE = 1 << 24  # a stamp event leaves room below it for per-depth offsets
# True: a push of a node whose entry at the same stamp is still queued is skipped (about a quarter of the pushes:
# a release of a leaf nobody restamped); False: every push queued, the reference. The pops are the same either
# way: a duplicate is the same tuple, popped next to its twin and dropped as dead or as its twin was
# (tests/test_leaf_heap_marks.py)
SKIP_QUEUED = True


class LeafHeap(LRUEviction):
    """FULL candidates only (unlocked leaves), in a lazy heap: ``LRUEviction``'s entries, validity check and
    compaction. The tree pushes a node that may have become a candidate (new, unlocked, lost its last
    child); the clock pushes a leaf it restamps."""

    name = "leaf-heap"
    leaves_only = True  # ``release`` of an inner node does nothing: the tree skips the call

    def __init__(self) -> None:
        super().__init__()
        self.queued: dict[Node, float] = {}  # a node's stamp where its entry at that stamp is in the heap

    def push(self, comp: Component, node: Node, stamp: float) -> None:
        if comp == FULL:
            self._push_leaf(node, stamp)

    def release(self, node: Node) -> None:
        if not node.children:
            self._push_leaf(node, node.full_stamp)

    def _push_leaf(self, node: Node, stamp: float) -> None:
        if SKIP_QUEUED:
            if self.queued.get(node) == stamp:
                return
            self.queued[node] = stamp
        LRUEviction.push(self, FULL, node, stamp)

    def pop(self, comp: Component, eligible: Callable[[Node], bool]) -> Node | None:
        """``LRUEviction.pop``, each popped entry's mark taken off with it."""
        heap, queued = self.heaps[comp], self.queued
        while heap:
            stamp, _, node = heapq.heappop(heap)
            if queued.get(node) == stamp:
                del queued[node]
            if node.alive and stamp == node.full_stamp and eligible(node):
                return node
        return None

    def _compact(self, comp: Component) -> None:
        super()._compact(comp)  # the FULL heap keeps one entry per node, at its stamp: the marks are those
        self.queued = {node: stamp for stamp, _, node in self.heaps[FULL]} if SKIP_QUEUED else {}


class FreeTokenClock:
    def __init__(self) -> None:
        self.events = 0
        self.leaves = LeafHeap()  # the tree's eviction strategy (``FreeTokenCommon.eviction``)

    def tick(self) -> int:
        self.events += 1
        return self.events * EVENT_STRIDE

    def stamp_new(self, node: Node) -> None:
        """A fresh tick (a new or revived node)."""
        node.full_stamp = self.tick()
        if not node.children:
            self.leaves.push(FULL, node, node.full_stamp)

    def stamp_path(self, node: Node) -> None:
        """``SWARadixCache._stamp_path``: the path to ``node`` newest at the node, older toward the root
        (``stamp_from(node, base, 0)``: every node but the root ends past 0)."""
        stamp = self.begin_path(node)
        while node.parent is not None:
            node.full_stamp = stamp
            cuts = node.cuts
            if cuts is None:
                stamp -= 1
            else:  # a run node: its pieces one apart (``tree_runs``)
                node.stamp_step = 1
                stamp -= len(cuts) + 1
            node = node.parent

    def begin_path(self, node: Node) -> int:
        """``stamp_path``'s tick and its leaf's candidacy; returns the stamp the node is due."""
        base = self.tick()
        if not node.children and node.parent is not None:  # its ancestors are not leaves
            self.leaves.push(FULL, node, base)
        return base

    def stamp_from(self, node: Node, base: int, above_end: int) -> None:
        """``stamp_path``'s stamps, from ``node`` up to the ancestor ending at ``above_end`` (excluded)."""
        offset = 0
        while node.parent is not None and node.end > above_end:
            node.full_stamp = base - offset
            cuts = node.cuts
            if cuts is None:
                offset += 1
            else:
                node.stamp_step = 1
                offset += len(cuts) + 1
            node = node.parent

    def stamp_walk(self, nodes: list[Node]) -> None:
        """``HybridRadixCache._walk``: every node walked gets the walk's one stamp."""
        stamp = self.tick()
        for node in nodes:
            node.full_stamp = stamp
            node.stamp_step = 0
            if not node.children:
                self.leaves.push(FULL, node, stamp)


def tick_pieces(node: Node, events: int) -> int:
    """The clock after a fresh tick for each of ``node``'s pieces, top first (one for a plain node): a revive."""
    cuts = node.cuts
    if cuts is None:
        return events + 1
    node.stamp_step = EVENT_STRIDE
    return events + len(cuts) + 1


def _tombstoned(node: Node, has_swa: bool) -> bool:
    return node.swa_pages is None if has_swa else node.state is None


def delete_with_exposed(tree: RadixTree, node: Node, has_swa: bool) -> tuple[Node, int]:
    """Delete an unlocked leaf, then every unlocked tombstone leaf its deletion exposes upward
    (``_cascade_*_tombstone_leaves``). Returns the surviving ancestor and the tokens freed. A run node goes a
    piece at a time, as the per-node tree's nodes would (``tree_runs``)."""
    if node.cuts is not None:
        surface(tree, node, node.cuts[-1])
    freed = node.end - node.start
    parent = node.parent
    tree.delete_leaf(node)
    while (
        parent.parent is not None
        and not parent.children
        and parent.full_lock == 0
        and _tombstoned(parent, has_swa)
    ):
        if parent.cuts is not None:
            surface(tree, parent, parent.cuts[-1])
        freed += parent.end - parent.start
        grand = parent.parent
        tree.delete_leaf(parent)
        parent = grand
    return parent, freed


def _unlocked_leaf(node: Node) -> bool:
    return not node.children and node.full_lock == 0


def evict_full(tree: RadixTree, num_tokens: int, has_swa: bool) -> int:
    """``evict_full_scan``'s victims, from the tree's ``LeafHeap``; returns the tokens freed."""
    freed = 0
    while freed < num_tokens:
        node = tree.pop_lru(FULL, _unlocked_leaf)
        if node is None:
            break
        tree.count_eviction(FULL, node)
        freed += delete_with_exposed(tree, node, has_swa)[1]
    return freed
