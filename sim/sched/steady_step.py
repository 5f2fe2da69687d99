"""vLLM+'s steady page chunks of a timed step planned in one loop and committed in one loop: the default loop's
per-request calls (``add_steady`` then ``plan_steady``; ``postprocess``'s branch then ``commit_steady``) with
what each asked again per chunk (the manager's requests, page, pools and SWA kind, the steady pair's unpacking)
asked once a step.

A timed ``marconi-vllm`` step at 1,000 requests gives ~3 prompts a page each (~412k chunks in ~138k steps);
Round 45's ``STEADY_CHUNKS`` made each chunk one call per side, and here the step's chunks are one loop per
side: the same statements in the same order, each chunk's plan (``is_page_chunk``, the reservation where a pool
is short, ``take_page_slots``, the planned checkpoint) and item, each commit (``commit_steady``), decode and
finish. Anything the steady plan does not take goes to ``_add_prefill`` as before. Switch ``STEP_AT_ONCE``
off: one call per chunk (``add_steady``, the reference; tests/test_steady_step_property.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from sim.cache import insert as insert_module
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi import MarconiRules
from sim.cache.engines.marconi_vllm_chunks import reserve_page
from sim.cache.engines.marconi_vllm_run import commit_chunk
from sim.cache.engines.marconi_vllm_steady import commit_steady, reserve_steady
from sim.cache.engines.marconi_vllm_step import StepHold, end_step, hand_in_step
from sim.cache.events import CheckpointSaved, emit
from sim.cache.manager import CacheManager
from sim.cache.node import Node
from sim.cache.page_chunks import is_page_chunk, take_page_slots
from sim.cache.request import RequestCache
from sim.cache.results import Refusal, new_chunk_plan
from sim.cache.tree import RadixTree
from sim.sched.batch import Batch, BatchItem, StepOutcome
from sim.sched.capped_stalls import CappedStalls
from sim.sched.request import RequestState
from sim.sched.steady_chunks import Steady, add_steady

STEP_AT_ONCE = True  # False: each request's chunk planned and committed in calls of its own (``add_steady``)

AddPrefill = Callable[[Batch, RequestState, int], int]  # ``DefaultScheduler._add_prefill``


def prompt_chunks(
    steady: Steady,
    capped: CappedStalls,
    batch: Batch,
    runs: list[RequestState],
    budget: int,
    add_prefill: AddPrefill,
    stops_when_spent: bool,
) -> int:
    """``schedule``'s walk of the running prompts (``runs``, the capped memo's untold ones) after the decodes:
    each asked for its chunk, one by one (``add_steady`` where the step is steady, else ``add_prefill``), or
    where the step is steady and a spent budget stops the walk, all in one loop (``add_steady_step``); the
    budget left."""
    if steady is not None and stops_when_spent and STEP_AT_ONCE:
        return add_steady_step(steady, capped, batch, runs, budget, add_prefill)
    for run in runs:
        if budget <= 0 and stops_when_spent:
            break  # no spent budget sizes a chunk (``budgeted_chunk``) nor records a stall (``_stall``)
        left = add_steady(steady, capped, batch, run, budget) if steady is not None else None
        budget = add_prefill(batch, run, budget) if left is None else left
    return budget


def add_steady_step(
    steady: tuple[CacheManager, MarconiRules],
    capped: CappedStalls,
    batch: Batch,
    runs: list[RequestState],
    budget: int,
    add_prefill: AddPrefill,
) -> int:
    """``schedule``'s loop over the prompts (``STOP_WHEN_SPENT`` on) where its open found the step steady: each
    request's page chunk planned as ``add_steady`` plans it (the capped memo asked first, then the page, the
    reservation, the slots and the plan), any other through ``add_prefill``; the budget left."""
    manager, rules = steady
    requests, page, items = manager.requests, manager.page_size, batch.items
    pools, has_swa = manager.pools, manager.has_swa
    full_pool, swa_pool, state_pool = pools[FULL], pools[SWA], pools[MAMBA]
    num_swa = 1 if has_swa else 0
    hold = rules.step  # type: ignore[attr-defined]  # vLLM+'s rules (``steady_applies``)
    for run in runs:
        if budget <= 0:
            break  # ``STOP_WHEN_SPENT``: no spent budget sizes a chunk nor records a stall
        req = requests[run.request_id]
        # the memo holds none whose length moved past its cached one (``holds``' first answer): not asked then
        held = req.kv_len == req.cached_len and capped.holds(run.request_id)
        if budget < page or held or not is_page_chunk(req, page):
            budget = add_prefill(batch, run, budget)
            continue
        if full_pool.num_free < 1 or swa_pool.num_free < num_swa or state_pool.num_free < 1:
            if not hold.is_open:  # ``reserve_steady``: ``hand_top_leaf``, else ``reserve_page``
                refusal = reserve_steady(manager, rules, num_swa)
            elif hand_in_step(hold, rules, manager, num_swa):  # ``reserve_steady``'s first answer, asked here
                refusal = None
            else:
                refusal = page_past_hold(manager, rules, hold, num_swa)
            if refusal is not None:
                run.last_refusal = str(refusal)
                continue
        slot = take_page_slots(manager, req, full_pool, swa_pool, state_pool, has_swa)
        start = req.kv_len
        planned = ((start + page, slot),)
        req.planned = planned
        plan = new_chunk_plan(req.request_id, start, start + page, req.state, planned)
        items.append(BatchItem(plan, True, run.copy_state_from))
        run.copy_state_from = None
        budget -= page
    return budget


def page_past_hold(
    manager: CacheManager, rules: MarconiRules, hold: StepHold, num_swa: int
) -> Refusal | None:
    """``reserve_steady``'s rest where ``hand_in_step`` did not take the held victim: the hold ended, then
    ``reserve_page`` with the handed slots taken (the flag is read there only)."""
    manager.takes_handed_slots = True
    end_step(hold, rules)
    refusal = reserve_page(manager, rules.evictor(manager), num_swa)
    manager.takes_handed_slots = False
    return refusal


def commit_steady_step(
    steady: tuple[CacheManager, MarconiRules], batch: Batch, running: dict[str, RequestState]
) -> StepOutcome:
    """``postprocess(batch)`` where the step's open found it steady (``commit_rules``): in the batch's order each
    prompt chunk committed as ``commit_steady`` commits it (the planned checkpoint taken and one new leaf hung
    with its heap entry, in line; any other through ``commit_steady``), each decode completed, each request
    done finished."""
    manager, rules = steady
    requests, tree, has_swa, recency = manager.requests, manager.tree, manager.has_swa, rules.recency
    leaves = recency.leaves  # its ``heap`` is read at each push: a compaction makes a new one
    assert leaves is not None  # ``fuses_chunks`` asked for it
    shortcuts = insert_module.LEAF_SHORTCUTS  # a switch: read once a step
    first_tokens: list[RequestState] = []
    finished: list[RequestState] = []
    for item in batch.items:
        plan = item.plan
        run = running[plan.request_id]
        request_id = run.request_id
        if not item.is_prefill:
            manager.complete_decode(request_id)
            run.decoded += 1
        else:
            req = requests[request_id]
            planned = req.planned
            if shortcuts and len(planned) == 1 and req.checkpoint is None and planned[0][0] > req.prefix_len:
                node = _hang_planned(manager, rules, tree, req, plan.end - plan.start, has_swa)
                if node is not None:  # its heap entry, as ``commit_page`` pushes it
                    heapq.heappush(leaves.heap, (recency.stamps[node.id], node.id, node))
                else:
                    rules.after_prefill_chunk(manager, req, req.kv_len >= req.prompt_len)
            else:
                commit_steady(manager, rules, request_id, plan.end - plan.start)
            if plan.end == run.prompt_len:
                first_tokens.append(run)
        if run.decoded == run.output_len - 1 and requests[request_id].kv_len >= run.prompt_len:
            run.inserted_len = manager.finish(request_id).inserted_len
            del running[request_id]
            finished.append(run)
    return StepOutcome(first_tokens, finished)


def _hang_planned(
    manager: CacheManager,
    rules: MarconiRules,
    tree: RadixTree,
    req: RequestCache,
    chunk_len: int,
    has_swa: bool,
) -> Node | None:
    """``commit_steady``'s statements for a chunk whose one planned checkpoint ends past the request's prefix
    (``LEAF_SHORTCUTS`` on): the chunk done, the checkpoint taken and told, and ``commit_chunk``'s new leaf, or
    None where it hangs none (the caller goes on to ``after_prefill_chunk``, as ``commit_steady`` does)."""
    manager._pass_open = False
    req.kv_len += chunk_len
    req.earlier_checkpoint = None
    req.checkpoint = checkpoint = req.planned[0]
    if manager._checkpoint_saved:
        emit(manager._checkpoint_saved, CheckpointSaved(req.request_id, checkpoint[0], checkpoint[1]))
    req.planned = ()
    return commit_chunk(manager, tree, req, checkpoint[0], rules, has_swa, None)
