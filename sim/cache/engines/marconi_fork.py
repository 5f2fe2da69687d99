"""Marconi's tuner replays its window once per alpha (``marconi_tuner.py``), and the 21 replays decide alike
until their first eviction: alpha is read only when an eviction scores its candidates. So the requests before
it run once, on one shared cache, and each alpha's replay goes on from a copy of that cache (``fork``).

Which request evicts first is known only once it has run, so the shared run stops before the first request
that *could* evict (``could_evict``: a pool has less room than the request's every page and a few states);
a request that evicts anyway (a wrong bound) sends every alpha back to a replay from scratch. The copy takes
the tree (spans, page lists (shared: ``_copy_tree`` says why), states, stamps, in the children's order), the
pools' counts and free lists and Marconi's recency stamps: everything a solo run carries to the next (a run
begins its own scheduling pass; the walk hints only shorten walks). ``AlphaTuner.replay``, from scratch, is
the reference (tests/test_marconi_fork.py).
"""

from __future__ import annotations

from typing import Protocol, cast

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.engines.marconi_recency import Recency
from sim.cache.manager import CacheManager
from sim.cache.node import Node
from sim.cache.topology import SeparatePools
from sim.cache.tree import RadixTree

# the MAMBA states a solo request may take at once: its running state, the two spare slots and the
# checkpoints they hold, with room to spare (only a cheaper fork hangs on it: a wrong bound is caught)
_STATES_PER_REQUEST = 8


class _RemembersAccesses(Protocol):
    recency: Recency


def can_fork(manager: CacheManager) -> bool:
    """Pools apart (a byte budget's one shortfall is not bounded per pool here) and an empty cache."""
    return isinstance(manager.topology, SeparatePools) and not manager.requests


def num_evictions(manager: CacheManager) -> int:
    return sum(manager.tree.num_evictions.values())


def could_evict(manager: CacheManager, num_tokens: int) -> bool:
    """Whether a request of ``num_tokens`` tokens run alone might find a pool short (then it evicts)."""
    pools, pages = manager.pools, -(-num_tokens // manager.page_size) + 1
    if pools[FULL].num_free < pages or (manager.has_swa and pools[SWA].num_free < pages):
        return True
    return manager.has_mamba and pools[MAMBA].num_free < _STATES_PER_REQUEST


def fork(shared: CacheManager, fresh: CacheManager) -> CacheManager:
    """``fresh`` (an empty cache of the same model and sizes, under its own policy) made a copy of ``shared``
    between two requests; returns it."""
    assert not shared.requests and not fresh.requests and can_fork(shared)
    for comp in Component:
        fresh.pools[comp].copy_free_ids(shared.pools[comp])
    copies = _copy_tree(shared.tree, fresh.tree)
    _copy_recency(
        cast(_RemembersAccesses, shared.rules).recency, cast(_RemembersAccesses, fresh.rules).recency, copies
    )
    return fresh


def _copy_tree(tree: RadixTree, into: RadixTree) -> dict[int, Node]:
    """``tree``'s nodes copied under ``into``'s root (an empty tree), children in their order; returns each
    node's copy by the node's id."""
    assert not into.root.children
    copies: dict[int, Node] = {tree.root.id: into.root}
    stack = [(tree.root, into.root)]
    while stack:
        node, copy = stack.pop()
        for edge, child in node.children.items():
            assert not child.is_locked, "a fork is taken between requests"
            # the page lists are shared, not copied (a full cache holds about 1.5M ids): no code changes a
            # node's list in place (a split slices it, a revive or tombstone replaces it) and an anonymous
            # pool keeps no list it frees, so neither tree sees the other's changes
            twin = Node(child.key, child.start, copy, child.full_pages, child.swa_pages, child.state)
            twin.edge = edge
            twin.full_stamp, twin.swa_stamp, twin.state_stamp = (
                child.full_stamp,
                child.swa_stamp,
                child.state_stamp,
            )
            copy.children[edge] = twin
            copies[child.id] = twin
            stack.append((child, twin))
    into.clock, into.num_evictions = tree.clock, dict(tree.num_evictions)
    into.num_full_pages, into.num_swa_pages = tree.num_full_pages, tree.num_swa_pages
    into.num_states, into.num_unlocked_tokens = tree.num_states, tree.num_unlocked_tokens
    # the walk hints stay empty: they only shorten walks, whose results they never change (walk_hints.py)
    return copies


def _copy_recency(recency: Recency, into: Recency, copies: dict[int, Node]) -> None:
    assert recency.leaves is None and into.leaves is None, "LRU over leaves reads no alpha: never tuned"
    into.now = recency.now
    into.stamps = {
        copies[node_id].id: stamp for node_id, stamp in recency.stamps.items() if node_id in copies
    }
