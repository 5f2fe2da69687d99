"""Marconi's FLOP-aware pick at alpha != 0 in one walk: ``scan``'s candidates scored as they are found.

The tuner's 20 replays at alpha != 0 pick a victim at every eviction by the whole score, min-max normalised
recency plus alpha x normalised FLOP efficiency (``MarconiEvictor._best``), over every candidate of a tree walk
(``scan``): ~22% of the tuner, in list passes over the same candidates (their ends, their recencies, their
efficiencies). Here the walk reads each candidate's recency and efficiency where it finds it, and both are
scored by the one ``first_lowest`` (``_best`` calls it too), so the first lowest is the same node, ties
included.
Off (``marconi_evict.SCORED_WALK``): ``scan`` then ``_best``, the reference
(tests/test_marconi_scored_walk_property.py).

A reserve's later picks (``KeptCandidates``): a reserve that evicts more than once (the tuner's solo runs:
~27% of their picks at 1,000 requests) would walk the whole tree for each victim. Between two picks of one
reserve nothing but its own eviction changes the tree: a leaf goes, with the stateless ancestors its deletion
leaves as leaves, and no lock, state or clock moves. So the next pick's candidates are the last pick's, in the
same preorder, less the victim, and plus the first surviving ancestor in the victim's place where that is a
leaf now (its one child was the victim's chain: nothing lies between the two in preorder); every other
candidate's efficiency stays (its node, its end and the end above it are untouched), and each recency is read
again. A pick that is not of leaves only (a MAMBA or byte shortfall, whose eviction may drop a state and so
move the ends below it) stops the keeping. Off (``marconi_evict.KEEP_CANDIDATES``): every pick walks, the
reference (tests/test_marconi_kept_candidates_property.py).
"""

from __future__ import annotations

from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.node import Node


def scored_victim(
    root: Node,
    leaves_only: bool,
    has_mamba: bool,
    now: int,
    stamps: dict[int, int],
    cost: NodeCost,
    alpha: float,
    kept: KeptCandidates | None = None,
) -> Node | None:
    """The first candidate of the lowest ``norm(recency) + alpha * norm(efficiency)``, or None (no candidate).
    ``kept``: handed the candidates, their efficiencies and the victim's index (leaves only)."""
    found: list[Node] = []
    recency: list[float] = []
    efficiency: list[float] = []
    efficiency_of, remembered, stamp_of = cost.efficiency, cost.remembered, stamps.get
    stack = [(child, root.end) for child in reversed(root.children.values())]
    while stack:
        node, end_above = stack.pop()
        children = node.children
        if children:
            below = node.end if node.state is not None or not has_mamba else end_above
            stack.extend([(child, below) for child in reversed(children.values())])
            if leaves_only or len(children) != 1 or node.state is None or node.state_lock != 0:
                continue
        elif node.full_lock > 0 or node.swa_holders or node.state_lock > 0:  # ``is_locked``
            continue
        age = now - stamp_of(node.id, 0)
        found.append(node)
        recency.append(1 / (age if age > 1 else 1))  # ``1 / max(age, 1)``: the same int divides
        if node.state is None and has_mamba:
            efficiency.append(0.0)
            continue
        known = remembered.get((end_above, node.end))  # most candidates stay from one eviction to the next
        efficiency.append(known if known is not None else efficiency_of(end_above, node.end))
    if not found:
        return None
    at = first_lowest(recency, efficiency, alpha)
    if kept is not None:
        kept.keep(found, efficiency, at)
    return found[at]


def first_lowest(recency: list[float], efficiency: list[float], alpha: float) -> int:
    """The index of the first lowest score, ``normalize(recency) + alpha * normalize(efficiency)`` (one list per
    candidate, in order): ``_best`` and the walk both score with it."""
    scores = [r + alpha * e for r, e in zip(normalize(recency), normalize(efficiency), strict=True)]
    return scores.index(min(scores))


def normalize(values: list[float]) -> list[float]:
    """Min-max to [0, 1]; all ones when there is one value or all are equal (``utils._normalize``)."""
    low, high = min(values), max(values)
    if len(values) < 2 or low == high:
        return [1.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def parent_end(node: Node, has_mamba: bool) -> int:
    """Where a hit would resume without the node: the end of the nearest ancestor holding a state (0: the
    root), or, in a cache without MAMBA state, of its parent."""
    current = node.parent
    while has_mamba and current.parent is not None and current.state is None:
        current = current.parent
    return current.end


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
