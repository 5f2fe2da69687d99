"""vLLM+'s page chunk of a timed step sized, planned and committed in one call each, the questions whose
answers cannot change within a run asked once, those of a step at its open.

A timed ``marconi-vllm`` step gives each prefilling request one 32-token page (~412k chunks at 1,000
requests), and each chunk went down ``next_chunk_len`` (the budget's chunk, the page stop),
``prepare_prefill``, ``plan_page_chunk``, ``_page_slots`` and ``MarconiVllmRules.reserve`` to the step's
held reservation, then up ``complete_prefill``, ``take_planned_checkpoint``, ``after_prefill_chunk`` and
``commit_page`` to the commit: some twenty calls, each asking again the rules' switches, the evictor's kind,
the manager's and the pools' (Round 44's profile: the two were ~56% of a timed run). Where those answers
hold (``steady_applies``), a chunk of one whole page (``is_page_chunk``, a budget of a page or more) is
sized to that page, as ``two_pass`` stops it, and takes the same reservation (``hand_in_step``,
``hand_top_leaf``, else ``reserve_page``), the same allocations and plan; a commit takes the planned
checkpoint and ``commit_chunk`` with its heap entry. Anything else goes to the general calls, nothing
changed. Switch ``STEADY_CHUNKS`` off: the general calls (the reference;
tests/test_marconi_vllm_steady_property.py).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from sim.cache import insert as insert_module
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi_vllm import MarconiVllmRules, reserve_held_page
from sim.cache.engines.marconi_vllm_chunks import takes_lru_leaves
from sim.cache.engines.marconi_vllm_run import commit_chunk, run_applies
from sim.cache.events import CheckpointSaved, emit
from sim.cache.manager import CacheManager
from sim.cache.page_chunks import is_page_chunk, take_page_slots
from sim.cache.request import RequestCache
from sim.cache.results import ChunkPlan, Refusal, new_chunk_plan

if TYPE_CHECKING:
    from sim.cache.engines.marconi import MarconiRules

STEADY_CHUNKS = True  # False: every chunk of a timed step through the manager's general calls

# the manager's own calls the fused ones stand for (a probe that wraps them keeps them: tests/executor)
_PREPARE = CacheManager.prepare_prefill
_COMPLETE = CacheManager.complete_prefill


def steady_applies(manager: CacheManager, rules: MarconiRules) -> bool:
    """At a step's open, after ``open_step``: whether every page chunk of the step may be planned by
    ``plan_steady`` and committed by ``commit_steady`` (the switches, the hold open: the tuner done, the
    direct nodes, the leaf heap; the pass open; what ``fuses_chunks`` asks once a run), kept on the hold for
    the step's commits."""
    hold = rules.step  # type: ignore[attr-defined]  # vLLM+'s rules (``MarconiVllmRules``)
    fuses = hold.fuses
    if fuses is None:
        fuses = hold.fuses = fuses_chunks(manager, rules)
    steady = STEADY_CHUNKS and fuses and insert_module.LEAF_SHORTCUTS and hold.is_open and manager._pass_open
    hold.steady = steady
    return steady


def fuses_chunks(manager: CacheManager, rules: MarconiRules) -> bool:
    """What ``steady_applies`` asks once a run (none of it changes within one: the rules', the manager's and
    the policy's settings, the evictor's kind, the tree's strategy, the pools' kind): vLLM+'s own rules with
    their direct reservation and commit (``run_applies``), the page plans, the manager's own calls."""
    return (
        type(rules) is MarconiVllmRules
        and type(manager).prepare_prefill is _PREPARE
        and type(manager).complete_prefill is _COMPLETE
        and rules.fused_chunks
        and rules.page_steps
        and rules.chunk_runs
        and rules.recency.leaves is not None
        and run_applies(manager, rules)
        and manager.plans_page_chunks
        and manager.policy.fault != "early-checkpoint"
        and rules.takes_page_chunks(manager)
        and takes_lru_leaves(rules.evictor(manager))
    )


def plan_steady(
    manager: CacheManager, rules: MarconiRules, req: RequestCache, budget: int
) -> ChunkPlan | Refusal | None:
    """``next_chunk_len(request_id, budget)`` then ``prepare_prefill`` of that chunk where it is one whole
    page (``is_page_chunk``: the budget's chunk is a page or more, ``two_pass`` stops it at the next page) and
    ``steady_applies`` held at the step's open: the plan, or the reservation's refusal. None, nothing
    changed, elsewhere (the general calls decide)."""
    page = manager.page_size
    if budget < page or not is_page_chunk(req, page):
        return None
    pools = manager.pools
    full_pool, swa_pool, state_pool = pools[FULL], pools[SWA], pools[MAMBA]
    has_swa = manager.has_swa
    num_swa = 1 if has_swa else 0
    if full_pool.num_free < 1 or swa_pool.num_free < num_swa or state_pool.num_free < 1:
        refusal = _reserve(manager, rules, num_swa)
        if refusal is not None:
            return refusal
    slot = take_page_slots(manager, req, full_pool, swa_pool, state_pool, has_swa)
    start = req.kv_len
    planned = ((start + page, slot),)
    req.planned = planned
    return new_chunk_plan(req.request_id, start, start + page, req.state, planned)


def _reserve(manager: CacheManager, rules: MarconiRules, num_swa: int) -> Refusal | None:
    """``MarconiVllmRules.reserve(manager, 1, num_swa, 1)`` with the handed slots taken, for its steady branch
    (the tuner done, the direct chunks, LRU over leaves: ``steady_applies``)."""
    manager.takes_handed_slots = True
    refusal = reserve_held_page(rules.step, rules, manager, num_swa, True)  # type: ignore[attr-defined]
    manager.takes_handed_slots = False
    return refusal


def commit_steady(manager: CacheManager, rules: MarconiRules, request_id: str, chunk_len: int) -> None:
    """``complete_prefill(request_id, chunk_len)`` where ``steady_applies`` held at the step's open: the chunk
    done, its planned checkpoint taken, and the commit of one new leaf with its heap entry (``commit_page``);
    any other commit through the rules' ``after_prefill_chunk``."""
    manager._pass_open = False
    req = manager.requests[request_id]
    req.kv_len += chunk_len
    planned = req.planned
    if len(planned) == 1 and req.checkpoint is None:  # ``take_planned_checkpoint`` of the one it planned
        req.earlier_checkpoint = None
        req.checkpoint = checkpoint = planned[0]
        if manager._checkpoint_saved:
            emit(manager._checkpoint_saved, CheckpointSaved(request_id, checkpoint[0], checkpoint[1]))
        req.planned = ()
        if checkpoint[0] > req.prefix_len and insert_module.LEAF_SHORTCUTS:
            tree, has_swa = manager.tree, manager.has_swa
            node = commit_chunk(manager, tree, req, checkpoint[0], rules, has_swa, None)
            if node is not None:  # its heap entry, as ``commit_page`` pushes it
                recency = rules.recency
                heap = recency.leaves.heap  # type: ignore[union-attr]  # ``fuses_chunks`` asked for it
                heapq.heappush(heap, (recency.stamps[node.id], node.id, node))
                return
    else:
        manager.take_planned_checkpoint(req)
    rules.after_prefill_chunk(manager, req, req.kv_len >= req.prompt_len)
