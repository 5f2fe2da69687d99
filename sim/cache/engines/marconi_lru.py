"""The least recently accessed unlocked leaf without scanning the tree (SGLang+ / vLLM+ eviction).

``marconi_evict.candidates`` lists every unlocked leaf in depth-first preorder and LRU takes the lowest
stamp, ties to the first listed: a whole-tree walk per evicted node, which made ``marconi-vllm`` (a node
per 32-token block) spend nearly all its time listing candidates. Here every stamp a node receives is
pushed on a heap; an entry is current while its node is alive, a leaf and still has that stamp, so stale
ones are dropped when they surface and locked leaves are set aside for the pick. The same stamp on two
leaves is resolved as the scan resolves it: the first in preorder.

Every leaf but the root's has a current entry at every pick (each stamp written is pushed, ``Recency.set``;
vLLM+'s chunk run pushes its unpushed leaf before anything else reads the heap), so the compaction keeps the
heap's current entries, one per node, instead of walking the tree for its leaves: the same entries, in another
order (every pick answers from the entries, not their places). In ``marconi-vllm`` timed the tree holds a node
per 32-token block and few leaves, and the walk was ~7% of the run at 1,000 requests. Switch:
``FROM_CURRENT_ENTRIES`` (tests/test_leaf_heap_compaction.py holds both equal).
"""

from __future__ import annotations

import heapq

from sim.cache.node import Node

# the heap is rebuilt from the tree's leaves when it outgrows them this many times: memory flat in trace length
_COMPACT_RATIO = 4
_COMPACT_FLOOR = 4096
# False: the compaction walks the tree for its leaves (the reference)
FROM_CURRENT_ENTRIES = True


class LeafHeap:
    def __init__(self) -> None:
        self.heap: list[tuple[int, int, Node]] = []
        self.compact_at = _COMPACT_FLOOR

    def push(self, node: Node, stamp: int) -> None:
        heapq.heappush(self.heap, (stamp, node.id, node))

    def pick(self, root: Node, stamp_of) -> Node | None:
        """The unlocked leaf with the lowest stamp, the first in preorder among equals; None if none."""
        self._compact(root, stamp_of)
        heap = self.heap
        locked: list[tuple[int, int, Node]] = []
        tied: list[tuple[int, int, Node]] = []
        while heap:
            entry = heap[0]
            if tied and entry[0] != tied[0][0]:
                break
            heapq.heappop(heap)
            node = entry[2]
            if not node.alive or node.children or stamp_of(node) != entry[0]:
                continue  # stale: the node is gone, grew children or was stamped again (a newer entry)
            (locked if node.is_locked else tied).append(entry)
        for entry in locked + tied:
            heapq.heappush(heap, entry)
        distinct = {entry[1]: entry[2] for entry in tied}  # a node pushed twice at one stamp is one candidate
        if len(distinct) < 2:
            return tied[0][2] if tied else None
        return min(distinct.values(), key=_preorder_key)

    def _compact(self, root: Node, stamp_of) -> None:
        """Every leaf once, at its stamp: a walk of the tree each time the heap has grown ``_COMPACT_RATIO``
        times over (amortised, a constant per push)."""
        if len(self.heap) > self.compact_at:
            if FROM_CURRENT_ENTRIES:
                self.heap = current_entries(self.heap, stamp_of)
            else:
                self.heap = [(stamp_of(node), node.id, node) for node in _leaves(root)]
            heapq.heapify(self.heap)
            self.compact_at = max(_COMPACT_FLOOR, _COMPACT_RATIO * len(self.heap))


def current_entries(heap: list[tuple[int, int, Node]], stamp_of) -> list[tuple[int, int, Node]]:
    """The heap's entries that name a leaf of the tree (not the root) at its stamp, one per node: every leaf's
    ``(stamp_of(leaf), leaf.id, leaf)`` where each leaf has a current entry."""
    kept: dict[int, tuple[int, int, Node]] = {}
    for entry in heap:
        node = entry[2]
        if node.alive and not node.children and node.parent is not None and stamp_of(node) == entry[0]:
            kept[entry[1]] = entry
    return list(kept.values())


def _leaves(root: Node):
    stack = list(root.children.values())
    while stack:
        node = stack.pop()
        if node.children:
            stack.extend(node.children.values())
        else:
            yield node


def _preorder_key(node: Node) -> list[int]:
    """Where ``node`` comes in a depth-first walk that visits children in their insertion order."""
    key = []
    while node.parent is not None:
        key.append(list(node.parent.children.values()).index(node))
        node = node.parent
    key.reverse()
    return key
