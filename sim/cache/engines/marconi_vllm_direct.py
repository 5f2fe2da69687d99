"""vLLM+'s per-chunk leaf eviction and leaf insert without the calls between the evictor, the recency and the
tree: each is the primitives' own statements, in their order, for the one shape a replay meets at every
32-token chunk once the pools are full.

``evict_lone_leaf`` is ``MarconiEvictor.evict(tree, victim, None)`` (``count_eviction``, then
``_delete_with_exposed``: ``Recency.forget``, ``RadixTree.delete_leaf`` with its ``tombstone`` and
``drop_state``, the exposed parent pushed on the leaf heap) where the deletion exposes nothing more to delete
(the parent holds a state, is locked, has other children or is the root). ``add_checkpointed_leaf`` is
``RadixTree.add_leaf`` then ``set_state``. Both run only over ``NoEviction`` (Marconi's evictor keeps its own
heap: the tree's strategy hears nothing), so the strategy's ``push`` and ``release`` calls, which do
nothing there, are left out. The general calls stay the reference (``MarconiVllmRules.fused_chunks`` off:
tests/test_marconi_vllm_chunks_property.py).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right

from sim.cache.components import FULL
from sim.cache.counted_pages import PageList
from sim.cache.engines.marconi_recency import Recency
from sim.cache.events import (
    EventBus,
    Evicting,
    LeafDeleting,
    LeafEvicted,
    SlotsFreed,
    StateDropping,
    Tombstoning,
    emit,
)
from sim.cache.eviction import NoEviction
from sim.cache.locks import LockSet, let_go_past
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq


def takes_direct_nodes(tree: RadixTree) -> bool:
    """The tree's own eviction strategy is told nothing (its ``push`` and ``release`` do nothing)."""
    return type(tree.eviction) is NoEviction


def exposes_nothing(victim: Node, has_mamba: bool) -> bool:
    """Deleting the leaf ``victim`` leaves no stateless unlocked leaf for ``_delete_with_exposed`` to take next."""
    parent = victim.parent
    return (
        parent.parent is None
        or len(parent.children) > 1
        or parent.state is not None
        or parent.is_locked
        or not has_mamba
    )


def told_as_one(tree: RadixTree, events: EventBus) -> list | None:
    """The ``LeafEvicted`` channel where it may stand for a leaf eviction's four events: it and each of the
    four have one handler, so all five are one observer's (one of ``LeafEvicted`` hears the four too: the
    miss watcher); else None (nobody, or someone else too, hears the four)."""
    told = events.channel(LeafEvicted)
    if (
        len(told) == 1
        and len(tree._evicting) == 1
        and len(tree._leaf_deleting) == 1
        and len(tree._tombstoning) == 1
        and len(tree._state_dropping) == 1
    ):
        return told
    return None


def evict_lone_leaf(
    tree: RadixTree, recency: Recency, victim: Node, hand_over: bool = False, told: list | None = None
) -> None:
    """``MarconiEvictor.evict(tree, victim, None)`` for an unlocked leaf that ``exposes_nothing``, whole-path
    recency with its leaf heap, over ``NoEviction``. ``hand_over``: its pages and state are announced freed
    but kept from the pools, for the allocation that would take them straight back (``hands_over``).
    ``told``: the four events go as one ``LeafEvicted`` (``told_as_one``; nothing the watcher reads of the
    victim, its id, edge and parent, changes between them)."""
    tree.num_evictions[FULL] += 1
    if told is not None:
        emit(told, LeafEvicted(victim))
    elif tree._evicting:
        emit(tree._evicting, Evicting(FULL, victim))
    parent, stamps = victim.parent, recency.stamps
    heap = recency.leaves.heap  # type: ignore[union-attr]  # whole-path recency keeps one
    stamp = stamps.pop(victim.id, None)  # ``forget``: the subtree's stamp stays with the parent
    pushed = False
    if stamp is not None and parent.parent is not None:
        pushed = True
        merged = max(stamps.get(parent.id, 0), stamp)
        stamps[parent.id] = merged
        heapq.heappush(heap, (merged, parent.id, parent))
    if told is None and tree._leaf_deleting:  # ``delete_leaf``
        emit(tree._leaf_deleting, LeafDeleting(victim))
    del parent.children[victim.edge]
    _give_back(tree.full_pool, victim.full_pages, hand_over)
    tree.num_full_pages -= len(victim.full_pages)
    tree.num_unlocked_tokens -= victim.end - victim.start
    if told is None and tree._tombstoning:  # ``tombstone``
        emit(tree._tombstoning, Tombstoning(victim))
    swa = victim.swa_pages
    if swa is not None:
        _give_back(tree.swa_pool, swa, hand_over)
        tree.num_swa_pages -= len(swa)
        victim.swa_pages = None
    if told is None and tree._state_dropping:  # ``drop_state``
        emit(tree._state_dropping, StateDropping(victim))
    state = victim.state
    if state is not None:
        _give_back(tree.state_pool, [state], hand_over)
        tree.num_states -= 1
        victim.state = None
    victim.alive = False
    if parent.parent is not None and not parent.children and not pushed:  # a leaf now: on the heap at its
        # stamp (``forget`` pushed that very entry if it moved a stamp up: a second copy changes no pick)
        heapq.heappush(heap, (stamps.get(parent.id, 0), parent.id, parent))


def hands_over(victim: Node, swa_pages: int, pools: tuple[Pool, Pool, Pool]) -> bool:
    """Whether the victim's slots are exactly the page chunk's allocation (``alloc(1)`` of FULL, ``alloc(swa_pages)``
    of SWA, ``alloc_one`` of MAMBA) after its eviction: it holds one page, one SWA page (none: ``swa_pages``
    0) and a state. A pool hands out the newest freed list first, from its first id (``Pool._take``), so a
    free of one id and then an allocation of one leaves the pool as it was and hands out that id."""
    swa = victim.swa_pages
    return (
        len(victim.full_pages) == 1
        and victim.state is not None
        and (swa is None if swa_pages == 0 else swa_pages == 1 and swa is not None and len(swa) == 1)
        and not (pools[0].anonymous or pools[1].anonymous or pools[2].anonymous)
    )


def _give_back(pool: Pool, ids: PageList, hand_over: bool) -> None:
    """``pool.free(ids)``; handed over: only its ``SlotsFreed`` (the next allocation takes ``ids`` back)."""
    if not hand_over:
        pool.free(ids)
    elif pool._freed:
        emit(pool._freed, SlotsFreed(pool.component, ids))


def add_checkpointed_leaf(
    tree: RadixTree, parent: Node, key: TokenSeq, full: PageList, swa: PageList | None, state: int
) -> Node:
    """``tree.add_leaf(parent, key, full, swa)`` then ``tree.set_state(node, state)``, over ``NoEviction``."""
    node = Node(key, parent.end, parent, full, swa, None)
    page = tree.page_size  # a key of one page is its own first page (``TokenSeq.first_page``'s value)
    node.edge = edge = key.runs if len(key) == page else key.first_page(page)
    parent.children[edge] = node
    tree.num_full_pages += len(full)
    tree.num_unlocked_tokens += len(key)
    if swa is not None:
        tree.num_swa_pages += len(swa)
    clock = tree.clock  # three touches as ``add_leaf`` stamps it, then the state's touch
    node.full_stamp, node.swa_stamp, node.state_stamp = clock + 1, float(clock + 2), clock + 4
    tree.clock = clock + 4
    node.state = state
    tree.num_states += 1
    return node


def slide_unreleased(
    held: LockSet, node: Node, tree: RadixTree, window: int, has_swa: bool, has_mamba: bool
) -> None:
    """``locks.slide(tree, held, node, window, has_swa, has_mamba)`` over ``NoEviction``: the same counts and
    lock moves, without the ``tree.release`` calls (its strategy's ``release`` does nothing)."""
    if node.full_lock == 0:
        tree.num_unlocked_tokens -= node.end - node.start
    node.full_lock += 1
    if has_swa and window > 0:
        holder, nodes = held.holder, held.swa_nodes
        if node.swa_pages is not None:
            node.swa_holders.add(holder)
            nodes.insert(0, node)
            held.swa_covered += node.end - node.start
        held.swa_covered = let_go_past(nodes, held.swa_covered, window, holder)  # ``_slide_window``'s
    old_state = held.state_node
    if old_state is not None:
        old_state.state_lock -= 1
        held.state_node = None
    if has_mamba and node.state is not None:
        node.state_lock += 1
        held.state_node = node
    held.node = node


def chunk_key(tokens: TokenSeq, start: int, end: int) -> TokenSeq:
    """``tokens.slice(start, end)`` for ``0 <= start < end <= len(tokens)``: a chunk within one run (a page of a
    trace segment, nearly every one) is cut here from that run; any other goes to ``slice``."""
    if start == 0 and end == tokens.length:
        return tokens  # as ``slice`` answers it: the sequence itself
    starts = tokens._run_starts()
    index = bisect_right(starts, start) - 1
    run, run_start = tokens.runs[index], starts[index]
    run_end = run_start + run[2]
    if end > run_end:
        return tokens.slice(start, end)
    if start == run_start and end == run_end:
        return TokenSeq._trusted((run,), end - start)  # a whole run is shared, as ``slice`` shares it
    return TokenSeq._trusted(((run[0], run[1] + start - run_start, end - start),), end - start)
