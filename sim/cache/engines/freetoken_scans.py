"""FreeToken's eviction by scans: ``evict_full_scan`` / ``evict_swa`` / ``evict_states`` build their candidate list in
the tree's depth-first order, heapify it on the timestamp alone and pop until enough is freed, deleting the tombstone
leaves a deletion exposes. Ties are broken exactly as ``heapq`` breaks them for FreeToken, because the list and the
comparisons are the same.

SWA and state eviction stay scans. Their candidates do share stamps (a split's two halves, both candidates, next to
each other in the scan's order), and which of two equal entries heapq pops first depends on the values of the other
entries, so no heap kept between calls can know it (docs/results/presets-speed.md, Round 21). What is kept cheap is
the entry: ``(stamp, NaN, node, piece)`` tuples that heapq compares in C (``SCANS_AS_TRIPLES``). Every comparison gives
``_ByStamp``'s answer: the stamps decide; two entries of one stamp differ at their NaNs (each entry's own float
object, so never equal by identity), where ``<`` is False both ways, "not less" as ``_ByStamp`` says, and the node
(which has no order) is never compared. Same answers, so heapq makes the same moves and pops the same nodes
(tests/test_freetoken_scans.py). FULL eviction takes its victims from ``freetoken_tree.LeafHeap`` instead; the scan
here is its reference.
"""

from __future__ import annotations

import heapq
import math

from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.freetoken_tree import delete_with_exposed
from sim.cache.node import Node
from sim.cache.tree import RadixTree
from sim.cache.tree_runs import piece_at

# True: the SWA and state scans heap ``(stamp, NaN, node, piece)`` entries from one tight walk; False: the reference,
# FreeToken's ``_ByStamp`` entries, compared in Python
SCANS_AS_TRIPLES = True
_NAN = math.nan


class _ByStamp:
    """A heap entry that compares on the timestamp alone, as ``RadixTreeNode.__lt__`` does."""

    __slots__ = ("node",)

    def __init__(self, node: Node):
        self.node = node

    def __lt__(self, other: "_ByStamp") -> bool:
        return self.node.full_stamp < other.node.full_stamp


def _depth_first(tree: RadixTree, keep) -> list[_ByStamp]:
    """Nodes in FreeToken's traversal order (a stack of children, last child first) that ``keep`` accepts."""
    out, stack = [], [tree.root]
    while stack:
        node = stack.pop()
        if node is not tree.root and keep(node):
            out.append(_ByStamp(node))
        stack.extend(node.children.values())
    return out


def _candidates(tree: RadixTree, swa: bool) -> list[tuple[int, float, Node, int]]:
    """``_depth_first``'s nodes, in its order, each after its stamp and a NaN of its own: the live, window-unlocked
    ones (``swa``) or the unlocked snapshot ones (``swa_candidate`` / ``state_candidate``, inline: a call per node
    would cost as much as the rest of the walk). Last, -1, or where a run node's pieces are candidates, each
    piece's start (the per-node tree's nodes, consecutive in its order: a run has no branch)."""
    out: list[tuple[int, float, Node, int]] = []
    stack = list(tree.root.children.values())
    while stack:
        node = stack.pop()
        if (
            (node.swa_pages is not None and not node.swa_holders)
            if swa
            else (node.state is not None and node.state_lock == 0)
        ):
            cuts = node.cuts
            if cuts is None or not swa:  # a state is at a run's end, on its deepest piece
                out.append((node.full_stamp, -_NAN, node, -1))  # negation makes a new float object
            else:
                _add_pieces(out, node, cuts)
        if node.children:
            stack.extend(node.children.values())
    return out


def _add_pieces(out: list[tuple[int, float, Node, int]], node: Node, cuts: list[int]) -> None:
    stamp, step, num_cuts = node.full_stamp, node.stamp_step, len(cuts)
    out.append((stamp - num_cuts * step, -_NAN, node, node.start))
    for index in range(num_cuts):
        out.append((stamp - (num_cuts - 1 - index) * step, -_NAN, node, cuts[index]))


def evict_full_scan(tree: RadixTree, num_tokens: int, has_swa: bool) -> int:
    """LRU over unlocked leaves until ``num_tokens`` tokens are freed; returns the tokens freed."""
    heap = _depth_first(tree, lambda n: not n.children and n.full_lock == 0)
    heapq.heapify(heap)
    freed = 0
    while freed < num_tokens and heap:
        node = heapq.heappop(heap).node
        if not node.alive or node.full_lock or node.children:
            continue
        tree.count_eviction(FULL, node)
        parent, count = delete_with_exposed(tree, node, has_swa)
        freed += count
        if parent.parent is not None and not parent.children and parent.full_lock == 0:
            heapq.heappush(heap, _ByStamp(parent))
    return freed


def evict_swa(tree: RadixTree, num_tokens: int) -> int:
    """LRU over live, window-unlocked nodes: an unlocked leaf goes whole, anything else is tombstoned. Returns the
    tokens taken (the exposed tombstone leaves deleted with a leaf are not counted)."""
    return _evict_by_scan(tree, num_tokens, True)


def evict_states(tree: RadixTree, num_states: int) -> int:
    """LRU over unlocked snapshot nodes: an unlocked leaf goes whole, an internal node loses its state. Returns the
    states taken."""
    return _evict_by_scan(tree, num_states, False)


def swa_candidate(node: Node) -> bool:
    return node.swa_pages is not None and not node.swa_holders


def state_candidate(node: Node) -> bool:
    return node.state is not None and node.state_lock == 0


def _evict_by_scan(tree: RadixTree, amount: int, swa: bool) -> int:
    """Pop the scan's candidates until ``amount`` (SWA: tokens; states: one a node) is taken."""
    keep = swa_candidate if swa else state_candidate
    heap: list = _candidates(tree, swa) if SCANS_AS_TRIPLES else _depth_first(tree, keep)
    heapq.heapify(heap)
    freed = 0
    while freed < amount and heap:
        top = heapq.heappop(heap)
        node = top[2] if SCANS_AS_TRIPLES else top.node
        if SCANS_AS_TRIPLES and top[3] >= 0:  # a run's piece: made a node
            node = piece_at(tree, node, top[3])
        if not node.alive or not keep(node):
            continue
        tree.count_eviction(SWA if swa else MAMBA, node)
        freed += node.end - node.start if swa else 1
        if not node.children and node.full_lock == 0:
            delete_with_exposed(tree, node, swa)
        elif swa:
            tree.tombstone(node)
        else:
            tree.drop_state(node)
    return freed
