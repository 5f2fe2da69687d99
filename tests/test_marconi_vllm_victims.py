"""``least_recent_leaf`` (vLLM+'s direct eviction) names the victim ``LeafHeap.pick`` names, on trees and heaps
that the runs rarely reach: leaves stamped again (stale lower entries), leaves sharing a stamp (a tie, the
first in preorder), locked leaves on top, duplicate entries, a heap due for compaction. Each victim is then
deleted as Marconi deletes a leaf (its stamp moves to its parent, which is pushed if it is a leaf now), and
the next victims compared, until none is left: the entry ``least_recent_leaf`` leaves out of its heap never
changes a later pick.
"""

from __future__ import annotations

from cache_helpers import parentless_node, seq
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_recency import Recency
from sim.cache.engines.marconi_vllm_chunks import least_recent_leaf
from sim.cache.node import Node


def _tree(parents: list[int]) -> tuple[Node, list[Node]]:
    """A root and one node per entry of ``parents`` (an index into the nodes made before it, 0: the root)."""
    root = parentless_node()
    nodes = [root]
    for index, parent_index in enumerate(parents):
        parent = nodes[parent_index % len(nodes)]
        node = Node(seq((f"n{index}", 1)), parent.end, parent, [index], None)
        node.edge = (index,)
        parent.children[node.edge] = node
        nodes.append(node)
    return root, nodes[1:]


def _delete(recency: Recency, heaps: list[LeafHeap], leaf: Node) -> None:
    """``MarconiEvictor._delete_with_exposed`` for one leaf whose parent keeps it: forget, unlink, push."""
    parent = leaf.parent
    stamp = recency.stamps.pop(leaf.id, None)
    del parent.children[leaf.edge]
    leaf.alive = False
    if stamp is not None and parent.parent is not None:
        merged = max(recency.stamps.get(parent.id, 0), stamp)
        recency.stamps[parent.id] = merged
        for heap in heaps:
            heap.push(parent, merged)
    if parent.parent is not None and not parent.children:
        for heap in heaps:
            heap.push(parent, recency.stamps.get(parent.id, 0))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=40),
    st.lists(st.tuples(st.integers(0, 39), st.integers(0, 12)), max_size=80),
    st.lists(st.integers(0, 39), max_size=4),
    st.sampled_from([0, 4096]),
)
def test_least_recent_leaf_is_the_heaps_pick(parents, stamps, locked, compact_at):
    root, nodes = _tree(parents)
    recency = Recency(whole_paths=True)
    ours, theirs = LeafHeap(), LeafHeap()
    for index, stamp in stamps:  # stamps in any order: ties, a node stamped again higher or lower
        node = nodes[index % len(nodes)]
        recency.stamps[node.id] = stamp
        ours.push(node, stamp)
        theirs.push(node, stamp)
    for index in locked:
        nodes[index % len(nodes)].full_lock += 1
    ours.compact_at = theirs.compact_at = compact_at
    while True:
        expected = theirs.pick(root, recency.of)
        assert least_recent_leaf(ours, root, recency) is expected
        if expected is None:
            return
        _delete(recency, [ours, theirs], expected)
