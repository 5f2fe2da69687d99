"""A walk that cuts a run node (``tree_runs``) inside a piece below its first lists the pieces surfaced above
the cut, as the per-node tree's walk lists those nodes: the reduced case of
``test_freetoken_trim_walk``'s generated failure (FreeToken's finish trim on its ``match_prefix`` walk, which
missed the run's top piece and left it live where FreeToken's second walk from the root tombstones it)."""

from __future__ import annotations

from cache_helpers import seq

from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.cache.tree_runs import compact

PAGE = 2


def _chain(tree: RadixTree, key, ends: list[int]) -> Node:
    """Nodes ``[0, ends[0])``, ``[ends[0], ends[1])``, ... down ``key``, stamps one apart; the deepest."""
    node, start = tree.root, 0
    for stamp, end in enumerate(ends, 1):
        pages = list(range(start // PAGE, end // PAGE))
        child = Node(key.slice(start, end), start, node, pages, list(pages))
        child.edge = child.key.first_page(PAGE)
        child.full_stamp = stamp
        node.children[child.edge] = child
        node, start = child, end
    return node


def test_a_walk_cut_inside_a_run_lists_the_pieces_above_the_cut():
    """The generated case's tree at request s1-t2's finish: one run [0, 360) cut at 100 and 110 (the system
    prompt, the first turn's user tokens, its output), its trim walking to keep_from 104."""
    tree = RadixTree(PAGE, Pool("full", 4096), Pool("swa", 4096), Pool("mamba", 0))
    key = seq(("a", 360))
    compact(tree, _chain(tree, key, [100, 110, 360]))
    (run,) = tree.root.children.values()
    assert (run.start, run.end, run.cuts) == (0, 360, [100, 110])  # the three nodes are one run
    path, depth = tree.walk(key, 104)
    assert depth == 104
    assert [(n.start, n.end) for n in path] == [(0, 100), (100, 104)]
    assert all(below.parent is above for above, below in zip([tree.root, *path[:-1]], path, strict=True))
