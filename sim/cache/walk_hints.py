"""Where the last walk of a token sequence ended, so that the next walk of the same sequence climbs up
from there instead of comparing every node's tokens again.

An engine walks one request's tokens several times per step (FreeToken re-matches after each insert,
trims and re-matches at finish), over paths of dozens of nodes; each step of a walk compares tokens.
A node that was on a sequence's path stays on it while it is alive: a split puts the new upper half
above it and keeps its tokens from the root, and only a leaf is ever deleted (so an alive node's
ancestors are alive). So the nodes above a remembered node are exactly the ones a walk from the root
passes first, in the same order, and the walk goes on from there as it would have.
"""

from __future__ import annotations

from sim.cache.node import Node
from sim.tokens import TokenSeq

__all__ = ["WalkHints"]

_MAX_REMEMBERED = 256  # sequences: enough for every request in flight; past it, forget all and start over


class WalkHints:
    def __init__(self) -> None:
        self._deepest: dict[int, tuple[TokenSeq, Node]] = {}  # id(key) -> (key, deepest node reached)

    def remember(self, key: TokenSeq, node: Node) -> None:
        known = self._deepest.get(id(key))
        if known is not None and known[0] is key and known[1].alive and known[1].end >= node.end:
            return
        if len(self._deepest) >= _MAX_REMEMBERED:
            self._deepest.clear()
        self._deepest[id(key)] = (key, node)

    def climb(self, key: TokenSeq, end: int, below: Node) -> list[Node]:
        """The path from below ``below`` (a node on ``key``'s path) down to the deepest remembered node of
        ``key`` that ends at or before ``end``, top first; empty when nothing below ``below`` is known."""
        known = self._deepest.get(id(key))
        if known is None or known[0] is not key or not known[1].alive:
            return []
        node = known[1]
        while node.end > end:
            node = node.parent
        path = []
        while node is not below:
            if node.parent is None:  # the remembered node is not below ``below``
                return []
            path.append(node)
            node = node.parent
        path.reverse()
        return path
