"""vLLM+'s timed page chunk (``marconi_vllm_page.py``) in one function a side: the reservation's steady case
(the heap's top a lone victim whose slots the chunk takes) and the commit's (one new leaf below the request's).

A timed run makes ~400k page chunks at 1,000 Mooncake requests, each a reservation and a commit; each went
through nine or so small calls (``takes_direct_nodes``, ``is_current``, ``top_leaf``, ``exposes_nothing_above``,
``hands_over``, ``told_as_one``, ``evict_top_handing_over``, ``evict_handed``; ``commit_page``, ``commit_chunk``,
``slide_unreleased``). Here their statements run in line, in the same order, with the same checks; anything
not the steady case answers as they do (False, nothing changed but what they would have changed) or goes to
them. Switch ``LEAN_STEPS`` (off: ``hand_top_leaf`` and ``commit_page``, the reference;
tests/test_marconi_vllm_lean_property.py)."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from sim.cache import insert as insert_module
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi_vllm_direct import chunk_key
from sim.cache.engines.marconi_vllm_run_steps import evict_top_handing_over
from sim.cache.events import Inserted, LeafEvicted, SlotsFreed, emit
from sim.cache.eviction import NoEviction
from sim.cache.locks import let_go_past
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree

if TYPE_CHECKING:
    from sim.cache.engines.marconi import MarconiRules
    from sim.cache.engines.marconi_vllm_run import Handed
    from sim.cache.ops import RadixOps

LEAN_STEPS = True


def lean_hand_top_leaf(manager: RadixOps, rules: MarconiRules, swa_pages: int) -> bool:
    """``hand_top_leaf(manager, rules, swa_pages)``: its checks in line, the steady eviction
    (``evict_handed``'s statements) too where one observer hears it as one (``told_as_one``)."""
    tree, recency = manager.tree, rules.recency
    pools = manager.topology.pools
    full_pool, swa_pool, state_pool = pools[FULL], pools[SWA], pools[MAMBA]
    if full_pool.num_free >= 1 and swa_pool.num_free >= swa_pages and state_pool.num_free >= 1:
        return False
    leaves = recency.leaves
    if leaves is None or type(tree.eviction) is not NoEviction:
        return False
    heap, stamps = leaves.heap, recency.stamps
    if len(heap) > leaves.compact_at:
        return False
    while heap:  # the stale entries dropped, as ``least_recent_leaf`` drops them first
        entry = heap[0]
        top = entry[2]
        if top.alive and not top.children and stamps.get(top.id, 0) == entry[0]:
            break
        heapq.heappop(heap)
    if not heap or not _takes_top(heap, stamps, rules.has_mamba, swa_pages):
        return False
    victim = heap[0][2]
    if full_pool.anonymous or swa_pool.anonymous or state_pool.anonymous:
        return False
    told = manager.events.channel(LeafEvicted)  # type: ignore[attr-defined]  # a ``CacheManager``
    one = (
        len(told) == 1
        and len(tree._evicting) == 1
        and len(tree._leaf_deleting) == 1
        and len(tree._tombstoning) == 1
        and len(tree._state_dropping) == 1
    )
    if not one:
        handed = evict_top_handing_over(tree, recency, leaves, victim, None)
    else:
        handed = _evict_told(manager, rules, victim, told)
    manager.handed_slots = handed  # type: ignore[attr-defined]  # a ``PageChunks``
    return True


def _takes_top(
    heap: list[tuple[int, int, Node]], stamps: dict[int, int], has_mamba: bool, swa_pages: int
) -> bool:
    """``top_leaf`` answers with the current top, ``exposes_nothing_above`` its parent and ``hands_over`` its
    slots (the pools' anonymity asked by the caller)."""
    stamp, node_id, node = heap[0]
    if stamps.get(node_id, 0) != stamp or node.full_lock > 0 or node.swa_holders or node.state_lock > 0:
        return False
    size = len(heap)
    if (size > 1 and heap[1][0] == stamp) or (size > 2 and heap[2][0] == stamp):
        return False
    parent = node.parent
    if not (
        parent.parent is None
        or len(parent.children) > 1
        or parent.state is not None
        or parent.full_lock > 0
        or bool(parent.swa_holders)
        or parent.state_lock > 0
        or not has_mamba
    ):
        return False
    swa = node.swa_pages
    return (
        len(node.full_pages) == 1
        and node.state is not None
        and (swa is None if swa_pages == 0 else swa_pages == 1 and swa is not None and len(swa) == 1)
    )


def _evict_told(manager: RadixOps, rules: MarconiRules, victim: Node, told: list) -> Handed:
    """``evict_top_handing_over(tree, recency, leaves, victim, told)``: the tick, the entry popped, the
    eviction (``evict_handed``'s statements) with its slots handed over."""
    tree, recency = manager.tree, rules.recency
    leaves, stamps = recency.leaves, recency.stamps
    assert leaves is not None
    recency.now += 1
    heapq.heappop(leaves.heap)
    swa = victim.swa_pages
    handed = (victim.full_pages, [None] if swa is None else swa, victim.state)
    tree.num_evictions[FULL] += 1
    told[0](LeafEvicted(victim))
    parent = victim.parent
    stamp = stamps.pop(victim.id, None)
    pushed = False
    if stamp is not None and parent.parent is not None:
        pushed = True
        merged = max(stamps.get(parent.id, 0), stamp)
        stamps[parent.id] = merged
        heapq.heappush(leaves.heap, (merged, parent.id, parent))
    del parent.children[victim.edge]
    _count_freed(tree, victim)
    victim.alive = False
    if parent.parent is not None and not parent.children and not pushed:
        heapq.heappush(leaves.heap, (stamps.get(parent.id, 0), parent.id, parent))
    return handed  # type: ignore[return-value]  # as ``evict_top_handing_over`` hands them


def _count_freed(tree: RadixTree, victim: Node) -> None:
    """``evict_handed``'s slot events and counts for the victim's page, SWA page and state."""
    full = victim.full_pages
    if tree.full_pool._freed:
        emit(tree.full_pool._freed, SlotsFreed(tree.full_pool.component, full))
    tree.num_full_pages -= len(full)
    tree.num_unlocked_tokens -= victim.end - victim.start
    swa = victim.swa_pages
    if swa is not None:
        if tree.swa_pool._freed:
            emit(tree.swa_pool._freed, SlotsFreed(tree.swa_pool.component, swa))
        tree.num_swa_pages -= len(swa)
        victim.swa_pages = None
    state = victim.state
    if state is not None:
        if tree.state_pool._freed:
            emit(tree.state_pool._freed, SlotsFreed(tree.state_pool.component, [state]))
        tree.num_states -= 1
        victim.state = None


def lean_commit_page(manager: RadixOps, rules: MarconiRules, req: RequestCache, end: int) -> bool:
    """``commit_page(manager, rules, req, end)``: ``commit_chunk``'s checks and statements in line, its heap
    entry pushed; False, nothing changed, where it is not one new leaf below the request's."""
    tree, recency = manager.tree, rules.recency
    leaves = recency.leaves
    if leaves is None or not insert_module.LEAF_SHORTCUTS or type(tree.eviction) is not NoEviction:
        return False
    locks = req.locks
    last, base, window, has_swa = locks.node, req.prefix_len, rules.window, manager.has_swa
    if last.children or last.parent is None or base != last.end:
        return False
    if has_swa and (req.swa_frontier > base or end - base > window):
        return False
    full, swa, page = req.own_full, req.own_swa, tree.page_size
    if len(swa) != 1 or len(full) != 1 or end - base != page or not locks.in_walk_order:
        return False
    recency.now += 2  # Marconi's insert runs a speculative match first: two ticks
    tree.hints.remember(req.tokens, last)
    req.own_full, req.own_swa = [], []
    key = chunk_key(req.tokens, base, end)
    node = Node(key, base, last, full, swa if has_swa else None, None, req.request_id)
    node.edge = edge = key.runs
    last.children[edge] = node
    tree.num_full_pages += 1
    tree.num_unlocked_tokens += page
    if has_swa:
        tree.num_swa_pages += 1
    clock = tree.clock
    node.full_stamp, node.swa_stamp, node.state_stamp = clock + 1, float(clock + 2), clock + 4
    tree.clock = clock + 4
    node.state = req.checkpoint[1]  # type: ignore[index]
    tree.num_states += 1
    req.checkpoint = None
    req.prefix_len = end
    _slide(req, node, tree, window, has_swa, rules.has_mamba)
    inserted = manager._inserted  # type: ignore[attr-defined]  # a ``PageChunks``
    if inserted:
        emit(inserted, Inserted(req.request_id, end))
    stamp = recency.stamps[node.id] = recency.now
    heapq.heappush(leaves.heap, (stamp, node.id, node))
    return True


def _slide(
    req: RequestCache, node: Node, tree: RadixTree, window: int, has_swa: bool, has_mamba: bool
) -> None:
    """``slide_unreleased(req.locks, node, tree, window, has_swa, has_mamba)``'s statements."""
    held = req.locks
    if node.full_lock == 0:
        tree.num_unlocked_tokens -= node.end - node.start
    node.full_lock += 1
    if has_swa and window > 0:
        holder, nodes = held.holder, held.swa_nodes
        if node.swa_pages is not None:
            node.swa_holders.add(holder)
            nodes.insert(0, node)
            held.swa_covered += node.end - node.start
        held.swa_covered = let_go_past(nodes, held.swa_covered, window, holder)
    old_state = held.state_node
    if old_state is not None:
        old_state.state_lock -= 1
        held.state_node = None
    if has_mamba and node.state is not None:
        node.state_lock += 1
        held.state_node = node
    held.node = node
