"""Shortfall-driven eviction, one component at a time, least recently used first.

FULL deletes unlocked leaves. SWA tombstones the least recent unlocked live node (deleting it outright
when it is an unlocked leaf) and drops that node's MAMBA state with it: a state with no window under it
cannot be resumed. MAMBA drops states (again deleting unlocked leaves whole). Locked nodes are skipped.
"""

from __future__ import annotations

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree


def _full_ok(node: Node) -> bool:
    return node.is_leaf and not node.is_locked


def _swa_ok(node: Node) -> bool:
    return node.swa_pages is not None and not node.swa_holders


def _state_ok(node: Node) -> bool:
    return node.state is not None and node.state_lock == 0


_ELIGIBLE = {FULL: _full_ok, SWA: _swa_ok, MAMBA: _state_ok}


def evict_one(tree: RadixTree, comp: Component) -> bool:
    """Evict one node's worth of ``comp``; False when nothing is evictable."""
    node = tree.pop_lru(comp, _ELIGIBLE[comp])
    if node is None:
        return False
    tree.count_eviction(comp, node)
    if _full_ok(node):
        tree.delete_leaf(node)
    elif comp == SWA:
        tree.tombstone(node)
        if node.state_lock == 0:
            tree.drop_state(node)
    elif comp == MAMBA:
        tree.drop_state(node)
    return True


def ensure_free(tree: RadixTree, pool: Pool, comp: Component, needed: int) -> bool:
    """Evict until ``pool`` has ``needed`` free ids; False if the tree cannot give that much."""
    while pool.num_free < needed:
        if not evict_one(tree, comp):
            return False
    return True
