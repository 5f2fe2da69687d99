"""Marconi's FLOP-aware scores' terms in one walk of the tree: ``MarconiEvictor.pick``'s fast path.

Every eviction scans the whole tree (a few dozen nodes in the tuner's replays, which evict about once a
request, 21 times over). ``scan`` then ``_best`` walk the tree and then the candidates twice more (recency,
efficiency) before normalising and scoring them; this walk takes each candidate's recency and efficiency as
it finds it, with the same expressions (``1 / max(now - stamp, 1)``, ``NodeCost.efficiency``), and both
readings normalise and score through the same ``_normalize`` and ``_lowest``: the victim is the same node,
ties to the first. ``ONE_WALK = False`` runs ``scan`` and ``_best`` (tests/test_marconi_evict_scan.py holds
the two victim by victim, tests/test_marconi_one_walk.py whole runs)"""

from __future__ import annotations

from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.node import Node

ONE_WALK = True


def candidate_terms(
    root: Node, leaves_only: bool, has_mamba: bool, stamps: dict[int, int], now: int, cost: NodeCost
) -> tuple[list[Node], list[float], list[float], int]:
    """The candidates in ``scan``'s order, each one's recency and FLOP efficiency (not yet normalised), and
    the last one's ``parent_end``."""
    found: list[Node] = []
    recency: list[float] = []
    efficiency: list[float] = []
    last_end = 0
    stack = [(child, root.end) for child in reversed(root.children.values())]
    while stack:
        node, end_above = stack.pop()
        children = node.children
        if children:
            below = node.end if node.state is not None or not has_mamba else end_above
            stack.extend([(child, below) for child in reversed(children.values())])
            if leaves_only or len(children) != 1 or node.state is None or node.state_lock != 0:
                continue
        elif node.is_locked:
            continue
        found.append(node)
        recency.append(1 / max(now - stamps.get(node.id, 0), 1))
        efficiency.append(
            cost.efficiency(end_above, node.end) if node.state is not None or not has_mamba else 0.0
        )
        last_end = end_above
    return found, recency, efficiency, last_end
