"""A walk from the root that returns where it ends, not the nodes it passed.

``RadixTree.walk(key, end)`` returns the path's list, and a walk from the root makes it by climbing from the
node its hint remembers up to the root (``WalkHints.climb``): at FreeToken's paths of a hundred nodes and more
(``freetoken-budget`` matches nothing, so its requests' walks start at the root) that list was most of a match.
FreeToken's SWA match reads only the walk's end and climbs the parent links from it
(``matching.deepest_acceptable_above``, ``FreeTokenClock.stamp_path``), so ``walk_end`` goes down from the
remembered node itself: the same end node (``path[-1]``, the root where the path is empty), depth, splits and
hint (tests/test_walk_end_property.py holds it to ``RadixTree.walk``).
"""

from __future__ import annotations

from sim.cache.node import Node
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq

__all__ = ["walk_end"]


def walk_end(tree: RadixTree, key: TokenSeq, end: int) -> tuple[Node, int]:
    """``RadixTree.walk(key, end)`` from the root: its last node (the root if none) and its matched depth."""
    end = min(end, len(key))
    known = tree.hints.deepest_known(key, end)  # the walk's climb ends on it (on the root: an empty climb)
    node = tree.root if known is None else known
    pos, page = node.end, tree.page_size
    while end - pos >= page:
        child = node.children.get(key.first_page(page, pos))
        if child is None:
            break
        matched = min(child.key.common_prefix_len(key, pos), end - pos) // page * page
        if matched < child.end - child.start:
            child = tree.split(child, matched)
            tree.hints.remember(key, child)
            return child, pos + matched
        pos += matched
        node = child
    if node is not tree.root:
        tree.hints.remember(key, node)
    return node, pos
