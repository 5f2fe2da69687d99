"""vLLM+'s 32-token chunk, evicted for and committed without the general layers between.

Once its pool is full, every ``marconi-vllm`` prefill chunk evicts one leaf (``MarconiEvictor.reserve`` asked
for a page and a state) and hangs one leaf below the request's own (``MarconiRules.insert``: the insert, the
checkpoint attached, the locks slid one node down, the recency stamp). Those two were ~80% of a replay, much
of it the calls between the rules, the manager, ``insert.py`` and the leaf heap. Here each is done directly,
in the same order, with the same primitives (``MarconiEvictor.evict``, ``RadixTree.add_leaf``,
``set_state``, ``locks.slide``), only where the general path would take exactly this route; anywhere else
the general path runs. The general path stays the reference (``MarconiVllmRules.fused_chunks`` off:
tests/test_marconi_vllm_chunks_property.py).
"""

from __future__ import annotations

import heapq
from typing import Protocol, cast

from sim.cache import insert as insert_module
from sim.cache import locks
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.counted_pages import PageList
from sim.cache.engines.marconi_evict import MarconiEvictor, _refusal
from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_recency import Recency
from sim.cache.engines.marconi_vllm_direct import (
    add_checkpointed_leaf,
    chunk_key,
    evict_lone_leaf,
    exposes_nothing,
    hands_over,
    slide_unreleased,
    takes_direct_nodes,
    told_as_one,
)
from sim.cache.events import EventBus, Inserted, emit
from sim.cache.node import Node
from sim.cache.ops import RadixOps
from sim.cache.request import RequestCache
from sim.cache.results import Refusal
from sim.cache.tree import RadixTree


class _Inserts(Protocol):
    """What of ``CacheManager`` beyond ``RadixOps`` an insert or an eviction announces itself on."""

    _inserted: list
    events: EventBus


class _TakesSlots(Protocol):
    """What of ``CacheManager`` (``PageChunks``) a page chunk's reservation hands the victim's slots over on."""

    takes_handed_slots: bool
    handed_slots: tuple[list[int], list[int | None], int] | None


def takes_lru_leaves(evictor: MarconiEvictor) -> bool:
    """The evictor picks from its leaf heap (``MarconiEvictor.pick``'s first branch), whatever is short."""
    return evictor.recency.leaves is not None and not evictor.flop_aware and not evictor.code_counting


def reserve_page(manager: RadixOps, evictor: MarconiEvictor, swa_pages: int) -> Refusal | None:
    """``evictor.reserve(manager, 1, swa_pages, 1)`` with pools apart and LRU over leaves: one tick if a pool
    is short, then the least recent leaf evicted while one still is."""
    pools = manager.topology.pools
    full_pool, swa_pool, state_pool = pools[FULL], pools[SWA], pools[MAMBA]
    if full_pool.num_free >= 1 and swa_pool.num_free >= swa_pages and state_pool.num_free >= 1:
        return None
    recency, tree = evictor.recency, manager.tree
    recency.tick()
    leaves = cast(LeafHeap, recency.leaves)
    direct = takes_direct_nodes(tree)
    told = told_as_one(tree, cast(_Inserts, manager).events) if direct else None
    chunk = cast(_TakesSlots, manager)
    while True:
        victim = least_recent_leaf(leaves, tree.root, recency)
        if victim is None:
            return _refusal(manager.topology, 1, swa_pages, 1)
        if direct and exposes_nothing(victim, evictor.has_mamba):
            if chunk.takes_handed_slots and hands_over(victim, swa_pages, (full_pool, swa_pool, state_pool)):
                _hand_over(chunk, tree, recency, victim, told)  # one of each freed: no pool is short after it
                return None
            evict_lone_leaf(tree, recency, victim, told=told)
        else:
            evictor.evict(tree, victim, None)
        if full_pool.num_free >= 1 and swa_pool.num_free >= swa_pages and state_pool.num_free >= 1:
            return None


def _hand_over(
    chunk: _TakesSlots, tree: RadixTree, recency: Recency, victim: Node, told: list | None
) -> None:
    """Evict ``victim`` and hand its page, SWA page and state to the chunk as its allocations."""
    swa = victim.swa_pages
    own_swa: list[int | None] = [None] if swa is None else cast("list[int | None]", swa)
    handed = (cast("list[int]", victim.full_pages), own_swa, cast(int, victim.state))  # pools with ids: lists
    evict_lone_leaf(tree, recency, victim, True, told)
    chunk.handed_slots = handed


def least_recent_leaf(leaves: LeafHeap, root: Node, recency: Recency) -> Node | None:
    """``leaves.pick``'s victim, for a caller that deletes it at once: where the lowest current entry is an
    unlocked leaf and no other leaf shares its stamp, that leaf, its entry popped (deleted, it would be stale);
    a locked leaf on top, a tie, or a heap due for compaction go to ``pick`` itself."""
    heap, stamps = leaves.heap, recency.stamps
    if len(heap) > leaves.compact_at:
        return leaves.pick(root, recency.of)
    while heap:
        stamp, node_id, node = heap[0]
        if not is_current(node, stamp, stamps):
            heapq.heappop(heap)  # stale, as ``pick`` drops it
            continue
        if node.full_lock > 0 or node.swa_holders or node.state_lock > 0:
            break
        heapq.heappop(heap)
        while heap and heap[0][0] == stamp:  # the next at that stamp: stale, the same leaf again, or a tie
            other_id, other = heap[0][1], heap[0][2]
            if other_id != node_id and is_current(other, stamp, stamps):
                heapq.heappush(heap, (stamp, node_id, node))
                return leaves.pick(root, recency.of)  # the first in preorder, as ``pick`` resolves a tie
            heapq.heappop(heap)
        return node
    return leaves.pick(root, recency.of)


def is_current(node: Node, stamp: int, stamps: dict[int, int]) -> bool:
    """A heap entry of ``node`` at ``stamp`` names a leaf of the tree at its stamp (else it is stale)."""
    return node.alive and not node.children and stamps.get(node.id, 0) == stamp


def commit_leaf_chunk(
    manager: RadixOps, req: RequestCache, end: int, recency: Recency, window: int, has_mamba: bool
) -> bool:
    """``MarconiRules.insert(manager, req, end)`` (whole-path recency, its stamp kept at the deepest node; no touching insert) where the request's
    node is a leaf below the root and the chunk's KV is one new leaf all live within the window (the insert's
    leaf shortcut, ``insert.py``): tick, remember the walk, the leaf with the request's pages and
    checkpoint, the locks slid onto it, ``Inserted``, the stamp. False, with nothing changed, elsewhere."""
    tree, last, has_swa, base = manager.tree, req.last_node, manager.has_swa, req.prefix_len
    if not insert_module.LEAF_SHORTCUTS or last.children or last.parent is None or base != last.end:
        return False
    if has_swa and (req.swa_frontier > base or end - base > window):
        return False
    checkpoint, full, swa = req.checkpoint, req.own_full, req.own_swa
    if (
        checkpoint is None
        or checkpoint[0] != end
        or len(swa) != len(full)
        or len(full) * tree.page_size != end - base
    ):
        return False
    if not req.locks.in_walk_order:
        return False
    recency.tick(2)  # Marconi's insert runs a speculative match first: two ticks
    tree.hints.remember(req.tokens, last)
    req.own_full, req.own_swa = [], []  # the pages pass to the tree (``take_own_pages``)
    own_swa = cast(PageList, swa) if has_swa else None
    direct = takes_direct_nodes(tree)
    key = chunk_key(req.tokens, base, end) if direct else req.tokens.slice(base, end)
    if direct:
        node = add_checkpointed_leaf(tree, last, key, full, own_swa, checkpoint[1])
        req.checkpoint = None
    else:
        node = tree.add_leaf(last, key, full, own_swa)
        req.checkpoint = None
        tree.set_state(node, checkpoint[1])
    req.prefix_len = end
    if direct:  # ``CacheManager.relock``: one node down
        slide_unreleased(req.locks, node, tree, window, has_swa, has_mamba)
    else:
        locks.slide(tree, req.locks, node, window, has_swa, has_mamba)
    inserted = cast(_Inserts, manager)._inserted
    if inserted:
        emit(inserted, Inserted(req.request_id, end))
    recency.set(node, recency.now)
    return True
