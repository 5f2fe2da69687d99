"""``locks.LEAN_LOOPS`` against its reference, lock by lock: two identical trees (FreeToken's ``LeafHeap``, which
hears only of leaves, or ``LRUEviction``, which hears of every release) take the same locks, unlocks (whole, or
keeping the new path's FULL locks) and evictions' pops (a popped locked leaf is dropped from the heap, so only a
later release puts it back), one tree with the switch on, one off; after every operation every node's locks, the
tree's count of unlocked tokens and the heap's entries (and the leaf heap's queued marks) are equal.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sim.cache.locks as locks
from sim.cache.components import FULL
from sim.cache.engines.freetoken_tree import LeafHeap
from sim.cache.eviction import LRUEviction
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq


def build(shapes: list[tuple[int, int, bool]], leaves_only: bool) -> tuple[RadixTree, list]:
    """Nodes as (parent: an index into the nodes made before, 0 the root; tokens; live SWA)."""
    eviction = LeafHeap() if leaves_only else LRUEviction()
    tree = RadixTree(1, Pool("full", 0), Pool("swa", 0), Pool("state", 0), eviction=eviction)
    nodes = [tree.root]
    for i, (parent_at, length, live) in enumerate(shapes):
        parent = nodes[parent_at % len(nodes)]
        key = TokenSeq.of(f"r:{i}", length)  # a source of its own: every node a new edge
        node = tree.add_leaf(parent, key, [0] * length, [0] * length if live else None)
        node.full_stamp = i + 1
        tree.release(node)
        nodes.append(node)
    return tree, nodes


def state(tree: RadixTree, nodes: list) -> tuple:
    heaps = tree.eviction.heaps
    entries = {
        comp: sorted((stamp, n.id - nodes[0].id) for stamp, _, n in heap) for comp, heap in heaps.items()
    }
    marks = sorted((n.id - nodes[0].id, s) for n, s in getattr(tree.eviction, "queued", {}).items())
    locked = [(n.full_lock, sorted(n.swa_holders)) for n in nodes]
    return locked, tree.num_unlocked_tokens, entries, marks


def apply(tree: RadixTree, nodes: list, held: dict, op: tuple) -> None:
    kind, holder, at, window = op
    holder_name = f"h{holder}"
    if kind == "lock" and holder_name not in held:
        held[holder_name] = locks.lock(tree, holder_name, nodes[at % len(nodes)], window, True, False)
    elif kind == "unlock" and holder_name in held:
        locks.unlock(tree, held.pop(holder_name))
    elif kind == "relock" and holder_name in held:  # the holder's path extended to a descendant, if any
        old = held[holder_name]
        below = [n for n in nodes[1:] if n is not old.node and old.node in _ancestors(n)]
        if below:
            new = below[at % len(below)]
            locks.unlock(tree, old, keep_from=old.node)
            held[holder_name] = locks.lock(tree, holder_name, new, window, True, False, locked_above=old.node)
    elif kind == "pop":
        tree.pop_lru(FULL, lambda n: n.full_lock == 0)


def _ancestors(node) -> list:
    found = []
    while node.parent is not None:
        node = node.parent
        found.append(node)
    return found


node_shapes = st.tuples(st.integers(0, 12), st.integers(1, 6), st.booleans())
ops = st.tuples(
    st.sampled_from(["lock", "unlock", "relock", "pop", "pop"]),
    st.integers(0, 3),
    st.integers(0, 30),
    st.integers(0, 12),
)
# a chain of three: h1 locks the leaf, a pop drops its entry (locked), h0 locks it too, h1's unlock leaves it
# FULL-locked (by h0) but tells the strategy through its window, the next pop finds it still locked
CHAIN = [(0, 2, True), (1, 2, True), (2, 2, True)]
PINNED = [("lock", 1, 3, 4), ("pop", 0, 0, 0), ("lock", 0, 3, 8), ("unlock", 1, 0, 0), ("pop", 0, 0, 0)]


@pytest.mark.parametrize("leaves_only", [True, False])
@settings(max_examples=300, deadline=None)
@given(shapes=st.lists(node_shapes, min_size=1, max_size=12), operations=st.lists(ops, max_size=30))
@example(shapes=CHAIN, operations=PINNED)
@example(
    shapes=CHAIN, operations=[("lock", 0, 3, 2), ("lock", 1, 2, 6), ("pop", 0, 0, 0), ("unlock", 1, 0, 0)]
)
def test_lean_locks_equal_the_reference(leaves_only, shapes, operations):
    lean_tree, lean_nodes = build(shapes, leaves_only)
    plain_tree, plain_nodes = build(shapes, leaves_only)
    lean_held: dict = {}
    plain_held: dict = {}
    try:
        for op in operations:
            locks.LEAN_LOOPS = True
            apply(lean_tree, lean_nodes, lean_held, op)
            locks.LEAN_LOOPS = False
            apply(plain_tree, plain_nodes, plain_held, op)
            assert state(lean_tree, lean_nodes) == state(plain_tree, plain_nodes), op
    finally:
        locks.LEAN_LOOPS = True
