"""One reserve's leaf candidates kept from its first pick to its next (Marconi's pick at alpha != 0).

A reserve that evicts more than once (the tuner's solo runs: ~27% of their picks at 1,000 requests) walks the
whole tree for each victim (``marconi_scored.scored_victim``). Between two picks of one reserve nothing but
its own eviction changes the tree: a leaf goes, with the stateless ancestors its deletion leaves as leaves,
and no lock, state or clock moves. So the candidates of the next pick are the last pick's, in the same
preorder, less the victim, and plus the first surviving ancestor in the victim's place where that is a leaf
now (its one child was the victim's chain: nothing lies between the two in preorder); every other
candidate's efficiency stays (its node, its end and the end above it are untouched), and each recency is read
again. A pick that is not of leaves only (a MAMBA or byte shortfall, whose eviction may drop a state and so move
the ends below it) stops the keeping. Off (``marconi_evict.KEEP_CANDIDATES``): every pick walks, the
reference (tests/test_marconi_kept_candidates_property.py).
"""

from __future__ import annotations

from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.engines.marconi_scored import first_lowest, parent_end
from sim.cache.node import Node


class KeptCandidates:
    """The last pick's candidates in preorder, their efficiencies and the victim's index; ``current``: the
    walk filled them and every eviction since was their victim's."""

    def __init__(self) -> None:
        self.found: list[Node] = []
        self.efficiency: list[float] = []
        self.at = -1
        self.current = False

    def keep(self, found: list[Node], efficiency: list[float], at: int) -> None:
        self.found, self.efficiency, self.at, self.current = found, efficiency, at, True

    def victim(self, now: int, stamps: dict[int, int], alpha: float) -> Node | None:
        """The walk's victim over the kept candidates: the same scores, in the same order."""
        found = self.found
        if not found:
            return None
        stamp_of, recency = stamps.get, []
        for node in found:
            age = now - stamp_of(node.id, 0)
            recency.append(1 / (age if age > 1 else 1))
        self.at = first_lowest(recency, self.efficiency, alpha)
        return found[self.at]

    def evicted(self, victim: Node, has_mamba: bool, cost: NodeCost) -> None:
        """``victim`` (the last pick's) and its deleted ancestors are gone: the survivor takes its place."""
        at = self.at
        assert self.found[at] is victim and not victim.alive, "the kept pick's victim was evicted"
        exposed = victim.parent
        while not exposed.alive:
            exposed = exposed.parent
        if exposed.parent is None or exposed.children or exposed.is_locked:
            del self.found[at], self.efficiency[at]
            return
        self.found[at] = exposed
        stateless = exposed.state is None and has_mamba
        self.efficiency[at] = (
            0.0 if stateless else cost.efficiency(parent_end(exposed, has_mamba), exposed.end)
        )
