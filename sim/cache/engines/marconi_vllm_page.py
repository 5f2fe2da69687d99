"""vLLM+'s page chunk in the default loop with the chunk run's statements (``marconi_vllm_run.py``): the
reservation evicts the leaf heap's top and hands its slots to the chunk, the commit hangs one checkpointed leaf.

In timed mode the chunks of several requests go one step at a time (``prepare_prefill`` plans each through
``PageChunks.plan_page_chunk``, ``complete_prefill`` commits it), so the run's loop does not apply; each chunk
still met the general ``reserve_page`` (the pools and observers asked again, ``least_recent_leaf``'s pops, the
lone eviction's pool calls for slots it hands back) and ``commit_leaf_chunk`` (the checks of any leaf insert).
Here the steady chunk runs the run's statements, in the same order, where its shape is the run's; anything else
goes to those functions, which check again. The only difference from the run: a new leaf's heap entry is pushed
at once (other requests' steps read the heap before this request's next chunk). ``MarconiVllmRules.page_steps``
off keeps the general functions (the reference: tests/test_page_plans_property.py).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from sim.cache import insert as insert_module
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi_vllm_chunks import is_current
from sim.cache.engines.marconi_vllm_direct import hands_over, takes_direct_nodes, told_as_one
from sim.cache.engines.marconi_vllm_run import commit_chunk
from sim.cache.engines.marconi_vllm_run_steps import evict_top_handing_over, exposes_nothing_above, top_leaf
from sim.cache.node import Node
from sim.cache.request import RequestCache

if TYPE_CHECKING:
    from sim.cache.engines.marconi import MarconiRules
    from sim.cache.ops import RadixOps


def hand_top_leaf(
    manager: RadixOps,
    rules: MarconiRules,
    swa_pages: int,
    told: list | None = None,
    evicted: list[Node] | None = None,
    held: list[tuple[int, int, Node]] | None = None,
) -> bool:
    """``reserve_page(manager, evictor, swa_pages)`` for a page chunk taking handed slots, where a pool is short
    and the leaf heap's top (``top_leaf``, once the stale entries above it are dropped, as ``least_recent_leaf``
    drops them first) is a lone victim whose slots the chunk takes (``exposes_nothing``, ``hands_over``): the
    tick, the entry popped, the eviction with its slots handed over (``handed_slots``); True. False elsewhere,
    nothing changed but those stale entries dropped (``reserve_page`` decides). ``told``, ``evicted``, ``held``: a
    step's (``marconi_vllm_step.hand_in_step``: the observer, and where the victim and its parent's entry are
    kept); None: the observer asked here, the victim told and the entry pushed at once."""
    tree, recency = manager.tree, rules.recency
    pools = manager.topology.pools
    full_pool, swa_pool, state_pool = pools[FULL], pools[SWA], pools[MAMBA]
    if full_pool.num_free >= 1 and swa_pool.num_free >= swa_pages and state_pool.num_free >= 1:
        return False
    leaves = recency.leaves
    if leaves is None or not takes_direct_nodes(tree):
        return False
    heap, stamps = leaves.heap, recency.stamps
    if len(heap) > leaves.compact_at:
        return False  # ``least_recent_leaf`` has ``pick`` compact it first
    while heap and not is_current(heap[0][2], heap[0][0], stamps):
        heapq.heappop(heap)  # stale: ``least_recent_leaf`` drops it first, as ``pick`` does
    victim = top_leaf(leaves, stamps)
    if (
        victim is None
        or not exposes_nothing_above(victim.parent, rules.has_mamba)
        or not hands_over(victim, swa_pages, (full_pool, swa_pool, state_pool))
    ):
        return False
    if told is None:
        told = told_as_one(tree, manager.events)  # type: ignore[attr-defined]  # a ``CacheManager``
    handed = evict_top_handing_over(tree, recency, leaves, victim, told, evicted, held)
    manager.handed_slots = handed  # type: ignore[attr-defined]  # a ``PageChunks``
    return True


def commit_page(manager: RadixOps, rules: MarconiRules, req: RequestCache, end: int) -> bool:
    """``commit_leaf_chunk(manager, req, end, ...)`` where the chunk is one page checkpointed at ``end`` and
    commits as one new leaf below the request's (the run's ``commit_chunk``), its heap entry pushed as
    ``recency.set`` pushes it; False, nothing changed, elsewhere."""
    tree, leaves = manager.tree, rules.recency.leaves
    if leaves is None or not insert_module.LEAF_SHORTCUTS or not takes_direct_nodes(tree):
        return False
    node = commit_chunk(manager, tree, req, end, rules, manager.has_swa, None)  # type: ignore[arg-type]
    if node is None:
        return False
    heapq.heappush(leaves.heap, (rules.recency.stamps[node.id], node.id, node))
    return True
