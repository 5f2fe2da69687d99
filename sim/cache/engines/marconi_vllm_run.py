"""vLLM+'s page chunks taken as one run: ``PageChunks.take_page_chunks``' loop with the rules' reservation
(``reserve_page``: the least recent leaf evicted, its slots handed to the chunk) and commit
(``commit_leaf_chunk``: one checkpointed leaf below the request's, the locks slid onto it) written into it.

Once the pools are full, each 32-token chunk of a ``marconi-vllm`` prefill evicts one leaf and hangs one
leaf: ~430k chunks in 1,000 requests, and per chunk the loop called some thirty functions between the
manager, the rules, the evictor, the recency and the tree, each asking again what cannot change within one
request's run (the rules' switches, the tree's strategy, the observers, the pools' kind). Here those are
asked once per run (``run_applies``) and each chunk runs the same statements in the same order, but one:
the new leaf's heap entry is pushed only if the leaf is still a leaf when anything but this run reads the
heap. A chunk's leaf gets the next chunk's leaf as its child one reservation later, so its entry would be
stale at once: the per-chunk loop pushed ~430k entries that only made the heap outgrow the tree and be
rebuilt (``LeafHeap._compact``). Unpushed, it is missed by no pick in between: it is the request's own,
FULL-locked and the heap's unique highest stamp, so ``top_leaf`` sees the same entries; before any other
reader (the general evictor or commit, a refusal, the run's end) it is pushed. Every pick answers from the
current entries alone, so a stale entry fewer changes no pick, only when the heap is next compacted.
Chains (each victim the last's held parent) go through ``marconi_vllm_chain.take_chain``.

The per-chunk loop (``MarconiVllmRules.chunk_runs`` off) is the reference (tests/test_marconi_vllm_run_property.py).
Where a chunk leaves the one shape the run asks the rules' own function, which checks again and goes general.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Protocol

from sim.cache import insert as insert_module
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines import marconi_vllm_chain as chain_module
from sim.cache.engines.marconi_lru import LeafHeap
from sim.cache.engines.marconi_vllm_chunks import takes_lru_leaves
from sim.cache.engines.marconi_vllm_direct import (
    chunk_key,
    slide_unreleased,
    takes_direct_nodes,
    told_as_one,
)
from sim.cache.engines.marconi_vllm_run_steps import (
    ChunkKeys,
    evict_top_handing_over,
    exposes_nothing_above,
    holds_the_top,
    one_page,
    push_unpushed,
    remember_deferred,
    top_leaf,
)
from sim.cache.events import CheckpointSaved, EventBus, Inserted, emit
from sim.cache.misses_run import defers_to
from sim.cache.node import Node
from sim.cache.page_chunks import is_page_chunk
from sim.cache.request import RequestCache
from sim.cache.results import Refusal
from sim.cache.tree import RadixTree

if TYPE_CHECKING:
    from sim.cache.engines.marconi import MarconiRules
    from sim.cache.ops import RadixOps

# a victim's page, SWA page and state, the chunk's allocations
Handed = tuple[list[int], list[int | None], int]

WATCHER_AS_RUN = True  # False: the watcher hears each eviction as it goes (tests/test_misses_run_property.py)
# False: an evicted leaf's parent goes on the heap at once, to be popped at the next chunk (the reference)
HOLDS_PARENTS = True
DEFERS_HINTS = True  # False: each commit remembers its hint; True: the last, once (``remember_deferred``)


class _ChunkManager(Protocol):
    """What of ``CacheManager`` (``PageChunks``) the run reads and writes, as ``take_page_chunks`` does."""

    events: EventBus
    _inserted: list
    _checkpoint_saved: list
    _pass_open: bool
    takes_handed_slots: bool
    handed_slots: Handed | None


def run_applies(manager: RadixOps, rules: MarconiRules) -> bool:
    """Every chunk of the run takes the rules' direct reservation and commit where its shape allows: the
    switches ``reserve`` and ``after_prefill_chunk`` ask (``chunk_runs`` and ``fused_chunks``: the caller), the
    tree's strategy told nothing, named pool ids.
    None of these changes within a run (the rules' and the tree's are set at construction, a pool turns
    anonymous only empty)."""
    pools = manager.pools
    return (
        rules.every_page
        and rules.recency.whole_paths
        and rules._bytes is None
        and insert_module.LEAF_SHORTCUTS
        and takes_direct_nodes(manager.tree)
        and not (pools[FULL].anonymous or pools[SWA].anonymous or pools[MAMBA].anonymous)
    )


def take_chunk_run(manager: RadixOps, rules: MarconiRules, req: RequestCache) -> int | Refusal:
    """``take_page_chunks(request_id, budget)`` for a budget of at least a page, where ``run_applies``."""
    chunks: _ChunkManager = manager  # type: ignore[assignment]  # a ``PageChunks``
    tree, recency = manager.tree, rules.recency
    page = tree.page_size
    pools = (manager.pools[FULL], manager.pools[SWA], manager.pools[MAMBA])
    full_pool, swa_pool, state_pool = pools
    has_swa = manager.has_swa
    num_swa = 1 if has_swa else 0
    has_mamba = rules.has_mamba
    # the eviction's one observer (told once per reservation in the per-chunk loop; nobody subscribes mid-run)
    told = told_as_one(tree, chunks.events)
    # its victims told at once before anything else runs, where nobody hears anything else in the run
    quiet = WATCHER_AS_RUN and not (chunks._checkpoint_saved or chunks._inserted or full_pool._freed)
    watcher = defers_to(told) if quiet else None
    evicted: list[Node] | None = [] if watcher is not None else None
    leaves: LeafHeap = recency.leaves  # type: ignore[assignment]  # whole-path recency keeps one
    pending: Node | None = None  # the last chunk's leaf, its heap entry not pushed yet
    # the last victim's parent's entry, not pushed yet: the next victim where it would be the heap's top
    held: list[tuple[int, int, Node]] = []
    holds = held if HOLDS_PARENTS else None
    lru: bool | None = None  # ``takes_lru_leaves(rules.evictor(manager))``: its alpha is fixed once tuned
    keys = ChunkKeys(req.tokens)
    hint: Node | None = None  # the last commit's walk hint, not remembered yet where deferred (None: none)
    done = 0
    chains = chain_module.FUSES_CHAINS and DEFERS_HINTS  # ``take_chain``: each victim the last's held parent
    while is_page_chunk(req, page):
        kv_len = req.kv_len
        end = kv_len + page
        handed: Handed | None = None
        if full_pool.num_free < 1 or swa_pool.num_free < num_swa or state_pool.num_free < 1:
            if chains and lru and hint is not None and rules.tuner.done:
                node = chain_module.take_chain(tree, rules, req, keys, held, evicted, has_swa, watcher)
                if node is not None:
                    pending, hint, done = node, node.parent, done + (node.end - kv_len) // page
                    continue
            on_heap = not (held and rules.tuner.done and holds_the_top(held[0], leaves, recency.stamps))
            if on_heap and held:  # pushed as the eviction would have: the heap's own top decides
                heapq.heappush(leaves.heap, held.pop())
            victim = (
                held[0][2] if not on_heap else top_leaf(leaves, recency.stamps) if rules.tuner.done else None
            )
            if victim is not None and lru is None:
                lru = takes_lru_leaves(rules.evictor(manager))
            if (
                victim is not None
                and lru
                and exposes_nothing_above(victim.parent, has_mamba)
                and len(victim.full_pages) == 1
                and victim.state is not None
                and (victim.swa_pages is None if num_swa == 0 else one_page(victim.swa_pages))
            ):  # ``reserve_page``'s tick and least recent leaf, ``exposes_nothing``, ``hands_over``: handed over
                held.clear()
                handed = evict_top_handing_over(tree, recency, leaves, victim, told, evicted, holds, on_heap)
            else:  # the rules' own reservation
                push_unpushed(leaves, recency.stamps, pending, watcher, evicted, held)
                pending = None
                remember_deferred(tree, req, hint)
                hint = None
                outcome = _reserve(chunks, manager, rules, num_swa)
                if isinstance(outcome, Refusal):
                    return outcome
                handed = outcome
        if handed is not None:  # the allocations below, as the pools would answer them
            req.own_full, req.own_swa, slot = handed
        else:
            req.own_full = full_pool.alloc(1)
            req.own_swa = swa_pool.alloc(1) if has_swa else [None]
            slot = state_pool.alloc_one()
        chunks._pass_open = False
        req.kv_len = end
        req.earlier_checkpoint = None
        req.checkpoint = (end, slot)
        if chunks._checkpoint_saved:
            emit(chunks._checkpoint_saved, CheckpointSaved(req.request_id, end, slot))
        node = commit_chunk(chunks, tree, req, end, rules, has_swa, keys, hint is None or not DEFERS_HINTS)
        if node is None:  # not one new leaf: the rules' own commit
            push_unpushed(leaves, recency.stamps, pending, watcher, evicted, held)
            pending = None
            remember_deferred(tree, req, hint)
            hint = None
            rules.after_prefill_chunk(manager, req, end >= req.prompt_len)
        else:  # the last leaf's entry is stale now (``node`` is its child): never pushed
            pending = node
            hint = node.parent  # remembered now or deferred: remembered again, it returns at once
        done += 1
    push_unpushed(leaves, recency.stamps, pending, watcher, evicted, held)
    remember_deferred(tree, req, hint)
    return done


def _reserve(
    chunks: _ChunkManager, manager: RadixOps, rules: MarconiRules, num_swa: int
) -> Handed | Refusal | None:
    """``rules.reserve(manager, 1, num_swa, 1)`` asked as the loop asks it (handed slots taken): the slots
    handed over, a refusal, or None (the pools hold the chunk's allocations)."""
    chunks.takes_handed_slots = True
    refusal = rules.reserve(manager, 1, num_swa, 1)
    chunks.takes_handed_slots = False
    if refusal is not None:
        return refusal
    handed, chunks.handed_slots = chunks.handed_slots, None
    return handed


def commit_chunk(
    chunks: _ChunkManager,
    tree: RadixTree,
    req: RequestCache,
    end: int,
    rules: MarconiRules,
    has_swa: bool,
    keys: ChunkKeys | None,
    remembers: bool = True,
) -> Node | None:
    """``commit_leaf_chunk(manager, req, end, ...)`` over the direct nodes (``run_applies``) for the chunk just
    checkpointed at ``end`` with one page of its own, but for the new leaf's heap entry (the caller's): the
    new leaf; None, nothing changed, where it is not one new leaf below the request's. ``keys``: the run's key
    cutter (None: ``chunk_key``). ``remembers`` False: the walk hint of the request's node (the new leaf's
    parent) left to the caller (``remember_deferred``)."""
    last, base, window = req.locks.node, req.prefix_len, rules.window
    if last.children or last.parent is None or base != last.end:
        return None
    if has_swa and (req.swa_frontier > base or end - base > window):
        return None
    full, swa, page = req.own_full, req.own_swa, tree.page_size
    if len(swa) != 1 or len(full) != 1 or end - base != page or not req.locks.in_walk_order:
        return None
    recency = rules.recency
    recency.now += 2  # Marconi's insert runs a speculative match first: two ticks
    if remembers:
        tree.hints.remember(req.tokens, last)
    req.own_full, req.own_swa = [], []  # the pages pass to the tree (``take_own_pages``)
    key = keys.cut(base, end) if keys is not None else chunk_key(req.tokens, base, end)
    node = Node(key, base, last, full, swa if has_swa else None, None, req.request_id)  # ``Node.source``
    node.edge = edge = key.runs  # a key of one page is its own first page (``add_checkpointed_leaf``)
    last.children[edge] = node
    tree.num_full_pages += 1
    tree.num_unlocked_tokens += page
    if has_swa:
        tree.num_swa_pages += 1
    clock = tree.clock  # ``add_leaf``'s three touches, then ``set_state``'s
    node.full_stamp, node.swa_stamp, node.state_stamp = clock + 1, float(clock + 2), clock + 4
    tree.clock = clock + 4
    node.state = req.checkpoint[1]  # type: ignore[index]
    tree.num_states += 1
    req.checkpoint = None
    req.prefix_len = end
    slide_unreleased(req.locks, node, tree, window, has_swa, rules.has_mamba)
    if chunks._inserted:
        emit(chunks._inserted, Inserted(req.request_id, end))
    recency.stamps[node.id] = recency.now  # ``recency.set``, its heap entry left to the caller
    return node
