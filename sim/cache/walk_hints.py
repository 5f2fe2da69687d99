"""Where the last walk of a token sequence ended, so that the next walk of it, or of a sequence sharing
its head, climbs up from there instead of comparing every node's tokens again.

An engine walks one request's tokens several times per step (FreeToken re-matches after each insert,
trims and re-matches at finish), and a conversation's next turn walks the same head again, over paths of
dozens of nodes; each step of a walk compares tokens. A node that was on a sequence's path stays on it
while it is alive: a split puts the new upper half above it and keeps its tokens from the root, and only
a leaf is ever deleted (so an alive node's ancestors are alive). A node ending within the tokens two
sequences share is on both paths. So the nodes above a remembered node are exactly the ones a walk from
the root passes first, in the same order, and the walk goes on from there as it would have.
"""

from __future__ import annotations

from sim.cache.node import Node
from sim.tokens import TokenSeq

__all__ = ["WalkHints"]

_MAX_REMEMBERED = 256  # heads: enough for every request in flight; past it, forget all and start over


class WalkHints:
    def __init__(self) -> None:
        # a sequence's first (source, offset) -> (the last sequence walked with that head, its deepest node)
        self._deepest: dict[tuple[str, int], tuple[TokenSeq, Node]] = {}

    def remember(self, key: TokenSeq, node: Node) -> None:
        head = key.runs[0][:2]
        known = self._deepest.get(head)
        if known is not None and known[0] is key and known[1].alive and known[1].end >= node.end:
            return
        if len(self._deepest) >= _MAX_REMEMBERED:
            self._deepest.clear()
        self._deepest[head] = (key, node)

    def deepest_known(self, key: TokenSeq, end: int) -> Node | None:
        """The deepest remembered node on ``key``'s path that ends at or before ``end`` (the root when only
        the root is), or None when nothing alive is remembered for ``key``'s head."""
        known = self._deepest.get(key.runs[0][:2]) if key.runs else None
        if known is None or not known[1].alive:
            return None
        shared = end if known[0] is key else min(end, known[0].common_prefix_len(key))
        node = known[1]
        while node.end > shared:
            node = node.parent
        return node

    def climb(self, key: TokenSeq, end: int, below: Node) -> list[Node]:
        """The path from below ``below`` (a node on ``key``'s path) down to the deepest remembered node on
        ``key``'s path that ends at or before ``end``, top first; empty when none is known below ``below``."""
        node = self.deepest_known(key, end)
        # at or above ``below`` (both on the path): climbing would find the root (an insert walks on from the
        # leaf it added last, below the node remembered)
        if node is None or node.end <= below.end:
            return []
        # ``path.append`` each time, not a bound ``append`` kept: the compiled core calls a list's append
        # directly, but a bound method only through Python's call protocol
        path: list[Node] = []
        if below.parent is None:  # from the root (most walks): every alive node lies below it
            while node.parent is not None:
                path.append(node)
                node = node.parent
        else:
            while node is not below:
                if node.parent is None:  # the remembered node is not below ``below``
                    return []
                path.append(node)
                node = node.parent
        path.reverse()
        return path
