"""vLLM+'s page chunks taken as one run: ``PageChunks.take_page_chunks``' loop with the rules' reservation
(``reserve_page``: the least recent leaf evicted, its slots handed to the chunk) and commit
(``commit_leaf_chunk``: one checkpointed leaf below the request's, the locks slid onto it) written into it.

Once the pools are full, each 32-token chunk of a ``marconi-vllm`` prefill evicts one leaf and hangs one
leaf: a replay is ~430k such chunks for 1,000 requests, and per chunk the loop called some thirty functions
between the manager, the rules, the evictor, the recency and the tree, each asking again what cannot change
within one request's run (the rules' switches, the tree's strategy, the observers, the pools' kind). Here
those are asked once per run (``run_applies``) and each chunk runs the same statements in the same order;
the per-chunk loop (``MarconiVllmRules.chunk_runs`` off) stays the reference
(tests/test_marconi_vllm_run_property.py). Anywhere the chunk leaves the one shape (a locked or tied leaf on
the heap's top, a victim that exposes its parent or holds other slots, a commit that is not one new leaf),
the run asks the per-chunk function itself, which re-checks and takes its general path.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Protocol, cast

from sim.cache import insert as insert_module
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi_evict import _refusal
from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_vllm_chunks import least_recent_leaf, takes_lru_leaves
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
from sim.cache.events import CheckpointSaved, EventBus, Inserted, LeafEvicted, SlotsFreed, emit
from sim.cache.node import Node
from sim.cache.page_chunks import is_page_chunk
from sim.cache.pools import Pool
from sim.cache.request import RequestCache
from sim.cache.results import Refusal

if TYPE_CHECKING:
    from sim.cache.engines.marconi_vllm import MarconiVllmRules
    from sim.cache.ops import RadixOps


class _ChunkManager(Protocol):
    """What of ``CacheManager`` (``PageChunks``) the run reads and writes, as ``take_page_chunks`` does."""

    events: EventBus
    _inserted: list
    _checkpoint_saved: list
    _pass_open: bool
    takes_handed_slots: bool
    handed_slots: tuple[list[int], list[int | None], int] | None


def run_applies(manager: RadixOps, rules: MarconiVllmRules) -> bool:
    """Every chunk of the run takes the rules' direct reservation and commit where its shape allows: the
    switches ``reserve`` and ``after_prefill_chunk`` ask, the tree's strategy told nothing, named pool ids.
    None of these changes within a run (the rules' and the tree's are set at construction, a pool turns
    anonymous only empty)."""
    pools = manager.pools
    return (
        rules.chunk_runs
        and rules.fused_chunks
        and rules.every_page
        and rules.recency.whole_paths
        and rules._bytes is None
        and insert_module.LEAF_SHORTCUTS
        and takes_direct_nodes(manager.tree)
        and not (pools[FULL].anonymous or pools[SWA].anonymous or pools[MAMBA].anonymous)
    )


def take_chunk_run(manager: RadixOps, rules: MarconiVllmRules, req: RequestCache) -> int | Refusal:
    """``take_page_chunks(request_id, budget)`` for a budget of at least a page, where ``run_applies``."""
    chunks = cast(_ChunkManager, manager)
    page, tree, recency = manager.page_size, manager.tree, rules.recency
    pools = (manager.pools[FULL], manager.pools[SWA], manager.pools[MAMBA])
    full_pool, swa_pool, state_pool = pools
    has_swa, has_mamba, window = manager.has_swa, rules.has_mamba, rules.window
    num_swa = 1 if has_swa else 0
    # the eviction's one observer (told once per reservation in the per-chunk loop; nobody subscribes mid-run)
    told = told_as_one(tree, chunks.events)
    done = 0
    while is_page_chunk(req, page):
        end = req.kv_len + page
        handed: tuple[list[int], list[int | None], int] | None = None
        if full_pool.num_free < 1 or swa_pool.num_free < num_swa or state_pool.num_free < 1:
            outcome = _reserve(manager, rules, pools, num_swa, told)
            if isinstance(outcome, Refusal):
                return outcome
            handed = outcome
        if handed is not None:  # the allocations below, as the pools would answer them
            req.own_full, req.own_swa, slot = handed
        else:
            req.own_full = full_pool.alloc(1)
            req.own_swa = cast("list[int | None]", swa_pool.alloc(1)) if has_swa else [None]
            slot = state_pool.alloc_one()
        chunks._pass_open = False
        req.kv_len = end
        req.earlier_checkpoint = None
        req.checkpoint = (end, slot)
        if chunks._checkpoint_saved:
            emit(chunks._checkpoint_saved, CheckpointSaved(req.request_id, end, slot))
        if not _commit(manager, req, end, recency, window, has_swa, has_mamba):
            rules.after_prefill_chunk(manager, req, end >= req.prompt_len)
        done += 1
    return done


def _reserve(
    manager: RadixOps,
    rules: MarconiVllmRules,
    pools: tuple[Pool, Pool, Pool],
    num_swa: int,
    told: list | None,
) -> tuple[list[int], list[int | None], int] | Refusal | None:
    """``rules.reserve(manager, 1, num_swa, 1)`` asked with the chunk taking handed slots (a pool is short):
    the slots handed over, a refusal, or None (the pools hold the chunk's allocations)."""
    evictor = rules.evictor(manager) if rules.tuner.done else None
    if evictor is None or not takes_lru_leaves(evictor):
        chunks = cast(_ChunkManager, manager)
        chunks.takes_handed_slots = True
        refusal = rules.reserve(manager, 1, num_swa, 1)
        chunks.takes_handed_slots = False
        if refusal is not None:
            return refusal
        handed, chunks.handed_slots = chunks.handed_slots, None
        return handed
    tree, recency = manager.tree, rules.recency
    full_pool, swa_pool, state_pool = pools
    recency.tick()  # ``reserve_page``: one tick, then the least recent leaf while a pool is short
    leaves = cast(LeafHeap, recency.leaves)
    while True:
        victim = _top_leaf(leaves, recency.stamps)
        if victim is None:
            victim = least_recent_leaf(leaves, tree.root, recency)
            if victim is None:
                return _refusal(manager.topology, 1, num_swa, 1)
        if exposes_nothing(victim, evictor.has_mamba):
            if hands_over(victim, num_swa, pools):
                swa = victim.swa_pages
                own_swa: list[int | None] = [None] if swa is None else cast("list[int | None]", swa)
                handed = (victim.full_pages, own_swa, cast(int, victim.state))
                if told is not None:
                    _evict_handed(manager, leaves, recency.stamps, victim, told)
                else:
                    evict_lone_leaf(tree, recency, victim, True, None)
                return handed
            evict_lone_leaf(tree, recency, victim, told=told)
        else:
            evictor.evict(tree, victim, None)
        if full_pool.num_free >= 1 and swa_pool.num_free >= num_swa and state_pool.num_free >= 1:
            return None


def _top_leaf(leaves: LeafHeap, stamps: dict[int, int]) -> Node | None:
    """``least_recent_leaf``'s answer where the heap's top is a current, unlocked leaf that no other entry
    ties (the lowest of the rest, at index 1 or 2, has a higher stamp), its entry popped; else None with the
    heap untouched (``least_recent_leaf`` decides)."""
    heap = leaves.heap
    if not heap or len(heap) > leaves.compact_at:
        return None
    stamp, node_id, node = heap[0]
    if not node.alive or node.children or stamps.get(node_id, 0) != stamp:
        return None
    if node.full_lock > 0 or node.swa_holders or node.state_lock > 0:
        return None
    size = len(heap)
    if (size > 1 and heap[1][0] == stamp) or (size > 2 and heap[2][0] == stamp):
        return None
    heapq.heappop(heap)
    return node


def _evict_handed(
    manager: RadixOps, leaves: LeafHeap, stamps: dict[int, int], victim: Node, told: list
) -> None:
    """``evict_lone_leaf(tree, recency, victim, True, told)``: the same statements in the same order."""
    tree = manager.tree
    tree.num_evictions[FULL] += 1
    emit(told, LeafEvicted(victim))
    parent = victim.parent
    heap = leaves.heap
    stamp = stamps.pop(victim.id, None)
    pushed = False
    if stamp is not None and parent.parent is not None:
        pushed = True
        merged = max(stamps.get(parent.id, 0), stamp)
        stamps[parent.id] = merged
        heapq.heappush(heap, (merged, parent.id, parent))
    del parent.children[victim.edge]
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
    victim.alive = False
    if parent.parent is not None and not parent.children and not pushed:
        heapq.heappush(heap, (stamps.get(parent.id, 0), parent.id, parent))


def _commit(
    manager: RadixOps,
    req: RequestCache,
    end: int,
    recency,
    window: int,
    has_swa: bool,
    has_mamba: bool,
) -> bool:
    """``commit_leaf_chunk(manager, req, end, ...)`` over the direct nodes (``run_applies``), for the chunk
    just checkpointed at ``end`` with one page of its own; False, nothing changed, where it is not one new leaf
    below the request's (``after_prefill_chunk`` then decides, as it would have)."""
    last, base = req.locks.node, req.prefix_len
    if last.children or last.parent is None or base != last.end or end - base != manager.page_size:
        return False
    if has_swa and (req.swa_frontier > base or end - base > window):
        return False
    full, swa = req.own_full, req.own_swa
    if len(swa) != len(full) or len(full) != 1 or not req.locks.in_walk_order:
        return False
    tree = manager.tree
    recency.now += 2  # Marconi's insert: a speculative match, then the insert
    tree.hints.remember(req.tokens, last)
    req.own_full, req.own_swa = [], []
    own_swa = cast("list[int]", swa) if has_swa else None
    checkpoint = cast("tuple[int, int]", req.checkpoint)
    node = add_checkpointed_leaf(tree, last, chunk_key(req.tokens, base, end), full, own_swa, checkpoint[1])
    req.checkpoint = None
    req.prefix_len = end
    slide_unreleased(req.locks, node, tree, window, has_swa, has_mamba)
    inserted = cast(_ChunkManager, manager)._inserted
    if inserted:
        emit(inserted, Inserted(req.request_id, end))
    now = recency.now
    recency.stamps[node.id] = now
    heapq.heappush(cast(LeafHeap, recency.leaves).heap, (now, node.id, node))
    return True
